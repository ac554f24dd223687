#include "profile/profile.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <set>

#include "core/error.h"
#include "core/toml_reader.h"
#include "core/units.h"

namespace talaria {
namespace {

int DtypeBytes(const std::string& dtype) {
  if (dtype == "fp32") return 4;
  if (dtype == "bf16" || dtype == "fp16") return 2;
  if (dtype == "fp8") return 1;
  return 0;
}

AttentionFamily ParseFamily(const std::string& s) {
  if (s == "mha") return AttentionFamily::kMha;
  if (s == "mla") return AttentionFamily::kMla;
  if (s == "hybrid") return AttentionFamily::kHybrid;
  return AttentionFamily::kGqa;
}

SwitchPhases ReadPhases(TomlSection s) {
  SwitchPhases p;
  if (!s.present()) return p;
  p.save_teardown_s = s.Number("save_teardown_s", 0);
  p.open_weights_s = s.Number("open_weights_s", 0);
  p.kv_shell_s = s.Number("kv_shell_s", 0);
  p.runtime_graph_s = s.Number("runtime_graph_s", 0);
  p.publish_s = s.Number("publish_s", 0);
  s.RejectUnknown();
  return p;
}

}  // namespace

const char* ToString(AttentionFamily f) {
  switch (f) {
    case AttentionFamily::kGqa: return "gqa";
    case AttentionFamily::kMha: return "mha";
    case AttentionFamily::kMla: return "mla";
    case AttentionFamily::kHybrid: return "hybrid";
  }
  return "?";
}

const char* ToString(SwitchPath p) {
  switch (p) {
    case SwitchPath::kD2d: return "d2d";
    case SwitchPath::kPartial: return "partial";
    case SwitchPath::kH2d: return "h2d";
  }
  return "?";
}

std::int64_t ModelProfile::KvBytesPerTokenPerRank() const {
  if (family == AttentionFamily::kMla) {
    // The latent is not split by head: every rank keeps all of it.
    return static_cast<std::int64_t>(kv_layers) * latent_dim * kv_dtype_bytes;
  }
  // K and V; heads are split across ranks, and replicated when tp > heads.
  const std::int64_t heads_per_rank = std::max<std::int64_t>(1, (kv_heads + tp - 1) / tp);
  return 2LL * kv_layers * heads_per_rank * head_dim * kv_dtype_bytes;
}

std::int64_t ModelProfile::RecurrentStateBytesPerRank() const {
  return static_cast<std::int64_t>(recurrent_layers) * recurrent_state_bytes_per_layer / tp;
}

std::int64_t ModelProfile::HbmBytesPerRank() const {
  return static_cast<std::int64_t>(hbm_gib_per_gpu * static_cast<double>(kGiB));
}

double ModelProfile::OpenWeightsSeconds(std::int64_t d2d_bytes) const {
  const auto staged = static_cast<double>(std::clamp<std::int64_t>(d2d_bytes, 0, weight_bytes_per_rank));
  return staged / d2d_bytes_per_s + (static_cast<double>(weight_bytes_per_rank) - staged) / h2d_bytes_per_s;
}

double ModelProfile::KvRestoreSeconds(std::int64_t tokens) const {
  if (tokens <= 0) return 0;
  return restore_fixed_s +
         static_cast<double>(tokens * KvBytesPerTokenPerRank() + RecurrentStateBytesPerRank()) /
             h2d_bytes_per_s;
}

namespace {

ModelProfile FromTable(const toml::table& root, const std::string& path);

}  // namespace

ModelProfile LoadProfile(const std::string& path) { return FromTable(ParseTomlFile(path), path); }

ModelProfile ParseProfile(std::string_view text, const std::string& source) {
  return FromTable(ParseTomlText(text, source), source);
}

namespace {

ModelProfile FromTable(const toml::table& root, const std::string& path) {
  ProblemList problems;
  ModelProfile p;
  p.source = path;
  TomlSection top(&root, path, "", problems);

  TomlSection model = top.Sub("model", true);
  if (const toml::node* n = model.Get("name", true)) {
    if (auto s = n->value<std::string>(); s && !s->empty()) {
      p.name = *s;
    } else {
      model.Fail("name", n, "must be a non-empty string");
    }
  }
  p.total_params_b = model.Number("total_params_b", 0);
  p.active_params_b = model.Number("active_params_b", 0);
  p.layers = static_cast<std::int32_t>(model.Integer("layers", 1));
  p.max_context_tokens = model.Integer("max_context_tokens", 1);
  if (p.active_params_b > p.total_params_b) {
    model.Fail("active_params_b", nullptr, "exceeds total_params_b");
  }
  model.RejectUnknown();

  TomlSection att = top.Sub("attention", true);
  p.family = ParseFamily(att.String("family", {"gqa", "mha", "mla", "hybrid"}));
  p.kv_layers = static_cast<std::int32_t>(att.Integer("kv_layers", 1));
  p.kv_dtype = att.String("kv_dtype", {"bf16", "fp16", "fp8", "fp32"});
  p.kv_dtype_bytes = DtypeBytes(p.kv_dtype);
  if (p.family == AttentionFamily::kMla) {
    p.latent_dim = static_cast<std::int32_t>(att.Integer("latent_dim", 1));
  } else {
    p.kv_heads = static_cast<std::int32_t>(att.Integer("kv_heads", 1));
    p.head_dim = static_cast<std::int32_t>(att.Integer("head_dim", 1));
  }
  if (p.family == AttentionFamily::kHybrid) {
    p.recurrent_layers = static_cast<std::int32_t>(att.Integer("recurrent_layers", 1));
    p.recurrent_state_bytes_per_layer = att.Integer("recurrent_state_bytes_per_layer", 1);
  }
  if (p.kv_layers + p.recurrent_layers > p.layers && p.layers > 0) {
    att.Fail("kv_layers", nullptr, "kv_layers + recurrent_layers exceeds model.layers");
  }
  att.RejectUnknown();

  TomlSection dep = top.Sub("deployment", true);
  p.tp = static_cast<std::int32_t>(dep.Integer("tp", 1));
  p.hbm_gib_per_gpu = dep.Number("hbm_gib_per_gpu", 0);
  p.weight_bytes_per_rank = dep.Integer("weight_bytes_per_rank", 1);
  dep.RejectUnknown();

  TomlSection prefill = top.Sub("prefill", true);
  const toml::node* tokens_at = nullptr;
  auto tokens = prefill.Numbers("tokens", true, &tokens_at);
  auto seconds = prefill.Numbers("seconds", false);
  if (!tokens.empty() && !seconds.empty()) {
    if (tokens.size() != seconds.size()) {
      prefill.Fail("seconds", tokens_at, "must have as many entries as prefill.tokens");
    } else {
      p.prefill_s = Table1D(tokens, seconds);
    }
  }
  prefill.RejectUnknown();

  if (TomlSection cached = top.Sub("prefill_cached", false); cached.present()) {
    auto n = cached.Numbers("new_tokens", true);
    auto c = cached.Numbers("cached_tokens", true);
    auto z = cached.Matrix("seconds", n.size(), c.size());
    if (!z.empty()) p.prefill_cached_s = Table2D(n, c, z);
    cached.RejectUnknown();
  }

  TomlSection decode = top.Sub("decode", true);
  auto batch = decode.Numbers("batch", true);
  auto context = decode.Numbers("context_tokens", true);
  if (!batch.empty() && !context.empty()) {
    auto z = decode.Matrix("seconds", batch.size(), context.size());
    if (!z.empty()) p.decode_step_s = Table2D(batch, context, z);
  }
  decode.RejectUnknown();

  TomlSection transfer = top.Sub("transfer", true);
  p.h2d_bytes_per_s = transfer.Number("h2d_gbps", 0) * kGB;
  p.d2d_bytes_per_s = transfer.Number("d2d_gbps", 0) * kGB;
  transfer.RejectUnknown();

  TomlSection restore = top.Sub("restore", true);
  p.restore_fixed_s = restore.Number("fixed_s", -1e-300);
  restore.RejectUnknown();

  TomlSection sw = top.Sub("switch", true);
  for (SwitchPath path : {SwitchPath::kD2d, SwitchPath::kPartial, SwitchPath::kH2d}) {
    TomlSection phases = sw.Sub(ToString(path), true);
    if (phases.present()) p.switch_phases[path] = ReadPhases(phases);
  }
  if (TomlSection ref = sw.Sub("reference_p50_s", false); ref.present()) {
    for (const auto& [k, v] : *ref.table()) {
      p.switch_reference_p50_s[std::string(k.str())] = ref.Number(k.str(), 0);
    }
  }
  sw.RejectUnknown();
  top.RejectUnknown();
  problems.ThrowIfAny();
  return p;
}

}  // namespace

void ProfileSet::Add(ModelProfile profile) {
  auto key = std::make_pair(profile.name, profile.tp);
  if (auto it = profiles_.find(key); it != profiles_.end()) {
    throw InputError(profile.source, "profile for model '" + profile.name + "' at tp=" +
                                         std::to_string(profile.tp) + " is also defined in " +
                                         it->second.source);
  }
  profiles_.emplace(std::move(key), std::move(profile));
}

ProfileSet ProfileSet::LoadDirectory(const std::string& dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) throw InputError(dir, "not a directory of profiles");
  std::vector<std::string> files;
  for (const auto& e : fs::directory_iterator(dir)) {
    if (e.is_regular_file() && e.path().extension() == ".toml") files.push_back(e.path().string());
  }
  std::sort(files.begin(), files.end());
  ProfileSet set;
  for (const auto& f : files) set.Add(LoadProfile(f));
  return set;
}

const ModelProfile* ProfileSet::Find(const std::string& name, std::int32_t tp) const {
  auto it = profiles_.find({name, tp});
  return it == profiles_.end() ? nullptr : &it->second;
}

}  // namespace talaria
