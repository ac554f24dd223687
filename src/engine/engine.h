// The Engine interface (DESIGN.md rule 2): an engine executes one step the
// instance scheduler chose and reports how long it took. It never decides
// what runs next.
//
// Steps are described by value; every size is per rank. Engines are driven
// from one thread per instance.
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include "core/time.h"
#include "memory/stager.h"
#include "profile/profile.h"

namespace talaria {

// One request's share of a prefill (or session-prefill) batch.
struct PrefillItem {
  std::int64_t new_tokens = 0;      // computed now
  std::int64_t cached_tokens = 0;   // already in device KV (device hit or restored)
  std::int64_t restore_tokens = 0;  // of cached_tokens, restored from host (H2D) first
};

struct PrefillStep {
  const ModelProfile* model = nullptr;
  std::span<const PrefillItem> items;
};

struct DecodeStep {
  const ModelProfile* model = nullptr;
  std::int32_t batch = 0;
  std::int64_t mean_context_tokens = 0;  // at the first iteration
  std::int32_t iterations = 1;           // consecutive decode boundaries
};

struct SwitchStep {
  const ModelProfile* from = nullptr;  // null when nothing was active
  const ModelProfile* to = nullptr;
  GatherPlan plan;                      // how the target's weights arrive
  Duration drain{};                     // wait for the outgoing model's D2H copies
  bool recapture = false;               // the pointer check saw moved regions
  double full_open_s = 0;               // the target was not resident: load it from storage first
};

// The five phases of a switch (paper appendix, Table 2), seconds.
struct SwitchTiming {
  double save_teardown_s = 0;  // includes the D2H drain
  double open_weights_s = 0;
  double kv_shell_s = 0;
  double runtime_graph_s = 0;  // includes a recapture when one was needed
  double publish_s = 0;
  double total_s() const {
    return save_teardown_s + open_weights_s + kv_shell_s + runtime_graph_s + publish_s;
  }
};

class Engine {
 public:
  virtual ~Engine() = default;
  // Restores then prefills the batch; the duration covers both.
  virtual Duration Prefill(const PrefillStep& step) = 0;
  virtual Duration Decode(const DecodeStep& step) = 0;
  virtual SwitchTiming Switch(const SwitchStep& step) = 0;
};

}  // namespace talaria
