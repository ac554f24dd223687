// Model profiles: what a model is (architecture figures) and how long its
// steps take on one tensor-parallel group (measured-point tables), for one
// TP degree. The sim engine computes step durations from a profile; the
// router and the instance scheduler use it to predict costs.
//
// Profiles live in profiles/*.toml (format in docs/profiles.md). The loader
// rejects a malformed or incomplete file with the file, line and key of
// every problem, and rejects unknown keys so a typo is never ignored.
// A loaded profile is immutable and may be shared across threads.
#pragma once

#include <algorithm>
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "profile/table.h"

namespace talaria {

enum class AttentionFamily { kGqa, kMha, kMla, kHybrid };
const char* ToString(AttentionFamily f);

// Switch paths (DESIGN.md §5): weights gathered device-to-device from staged
// chunks, partly staged with an H2D top-up, or fully reloaded from host.
enum class SwitchPath { kD2d, kPartial, kH2d };
const char* ToString(SwitchPath p);

// The five phases of a model switch, seconds per rank (paper appendix,
// "Switch Timeline Instrumentation"). open_weights_s is what the profile's
// measurement saw; the sim derives phase 2 from bytes and bandwidths.
struct SwitchPhases {
  double save_teardown_s = 0;
  double open_weights_s = 0;
  double kv_shell_s = 0;
  double runtime_graph_s = 0;
  double publish_s = 0;

  // Everything but phase 2, which depends on how many bytes were staged.
  double FixedSeconds() const { return save_teardown_s + kv_shell_s + runtime_graph_s + publish_s; }
};

struct ModelProfile {
  std::string name;
  std::string source;  // file it was loaded from

  // [model]
  double total_params_b = 0;
  double active_params_b = 0;
  std::int32_t layers = 0;
  std::int64_t max_context_tokens = 0;

  // [attention]
  AttentionFamily family = AttentionFamily::kGqa;
  std::int32_t kv_layers = 0;   // layers with a KV cache
  std::int32_t kv_heads = 0;    // gqa/mha/hybrid
  std::int32_t head_dim = 0;    // gqa/mha/hybrid
  std::int32_t latent_dim = 0;  // mla: compressed KV + rope key width
  std::string kv_dtype;
  std::int32_t kv_dtype_bytes = 0;
  std::int32_t recurrent_layers = 0;                    // hybrid
  std::int64_t recurrent_state_bytes_per_layer = 0;     // hybrid, whole model

  // [deployment]
  std::int32_t tp = 0;
  double hbm_gib_per_gpu = 0;
  std::int64_t weight_bytes_per_rank = 0;

  // Step tables.
  Table1D prefill_s;         // by prompt tokens, nothing cached
  Table2D prefill_cached_s;  // by (new tokens, cached tokens); optional
  Table2D decode_step_s;     // by (batch size, mean context tokens)

  // [transfer], bytes per second per rank.
  double h2d_bytes_per_s = 0;
  double d2d_bytes_per_s = 0;
  // [restore]
  double restore_fixed_s = 0;

  // [switch]
  std::map<SwitchPath, SwitchPhases> switch_phases;
  // Logical switch p50s the paper observed by path (for validation only).
  std::map<std::string, double> switch_reference_p50_s;

  // Derived quantities.
  std::int64_t KvBytesPerTokenPerRank() const;
  std::int64_t RecurrentStateBytesPerRank() const;
  std::int64_t HbmBytesPerRank() const;

  // Prefill of `new_tokens` after `cached_tokens` already in KV. Without a
  // measured cached table: P(0) + P(cached + new) - P(cached), i.e. the
  // marginal cost of extending the sequence plus the per-batch overhead.
  // Inline: the router and the scheduler evaluate them per decision and
  // per step.
  double PrefillSeconds(std::int64_t new_tokens, std::int64_t cached_tokens = 0) const {
    const auto n = static_cast<double>(new_tokens);
    const auto c = static_cast<double>(cached_tokens);
    if (cached_tokens == 0) return prefill_s.At(n);
    if (!prefill_cached_s.empty()) return prefill_cached_s.At(n, c);
    return prefill_s.At(0) + std::max(0.0, prefill_s.At(c + n) - prefill_s.At(c));
  }
  double DecodeStepSeconds(std::int32_t batch, std::int64_t mean_context_tokens) const {
    return decode_step_s.At(batch, static_cast<double>(mean_context_tokens));
  }
  // Phase 2 of a switch with `d2d_bytes` gathered on device and the rest of
  // the weights loaded from host.
  double OpenWeightsSeconds(std::int64_t d2d_bytes) const;
  // H2D restore of `tokens` of host-registered KV onto one rank.
  double KvRestoreSeconds(std::int64_t tokens) const;
};

ModelProfile LoadProfile(const std::string& path);
// The same from a profile's TOML text; `source` names it in errors.
ModelProfile ParseProfile(std::string_view text, const std::string& source);

// Every profiles/*.toml of a directory, keyed by (name, tp).
class ProfileSet {
 public:
  static ProfileSet LoadDirectory(const std::string& dir);
  void Add(ModelProfile profile);

  // nullptr when absent.
  const ModelProfile* Find(const std::string& name, std::int32_t tp) const;
  const std::map<std::pair<std::string, std::int32_t>, ModelProfile>& all() const {
    return profiles_;
  }

 private:
  std::map<std::pair<std::string, std::int32_t>, ModelProfile> profiles_;
};

}  // namespace talaria
