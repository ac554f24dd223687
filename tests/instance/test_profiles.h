// Small synthetic profiles for scheduler tests: round numbers so expected
// step sequences can be worked out by hand.
#pragma once

#include <string>
#include <vector>

#include "core/units.h"
#include "engine/cpu_model.h"
#include "instance/config.h"
#include "profile/profile.h"

namespace talaria::testing {

// prefill: 1 ms per token (+0 overhead); decode: 10 ms per iteration;
// weights 8 GiB per rank; H2D 8 GiB/s-ish, D2D 80x faster; 512 B of KV per
// token; 80 GiB HBM.
inline ModelProfile TinyProfile(const std::string& name, AttentionFamily family = AttentionFamily::kGqa) {
  ModelProfile p;
  p.name = name;
  p.source = "test";
  p.total_params_b = 4;
  p.active_params_b = 4;
  p.layers = 2;
  p.max_context_tokens = 1 << 20;
  p.family = family;
  p.kv_layers = 1;
  p.kv_heads = 1;
  p.head_dim = 128;
  p.kv_dtype = "bf16";
  p.kv_dtype_bytes = 2;
  if (family == AttentionFamily::kHybrid) {
    p.recurrent_layers = 1;
    p.recurrent_state_bytes_per_layer = 4096;
  }
  p.tp = 1;
  p.hbm_gib_per_gpu = 80;
  p.weight_bytes_per_rank = 8 * kGiB;
  p.prefill_s = Table1D({0, 1000}, {0, 1.0});
  p.decode_step_s = Table2D({1}, {0}, {{0.010}});
  p.h2d_bytes_per_s = 8.0 * static_cast<double>(kGiB);
  p.d2d_bytes_per_s = 640.0 * static_cast<double>(kGiB);
  p.restore_fixed_s = 0.0;
  for (SwitchPath path : {SwitchPath::kD2d, SwitchPath::kPartial, SwitchPath::kH2d}) {
    p.switch_phases[path] = SwitchPhases{0.001, 0, 0.001, 0.001, 0.001};
  }
  return p;
}

// A cold TP=1 instance config sized for TinyProfile models: the whole HBM
// is the arena, small fixed regions.
inline InstanceConfig TinyInstance(const std::string& name, std::vector<std::string> models) {
  InstanceConfig c;
  c.name = name;
  c.pool = Pool::kCold;
  c.models = std::move(models);
  c.tp = 1;
  c.bump_fraction = 1.0;
  c.non_bump_reserved_gib = 0;
  c.runtime_gib = 1;
  c.graph_pool_gib = 1;
  return c;
}

// A profile that agrees with a CPU model's shapes (an instance lays out its
// weights and KV blocks by it); its step times only steer the scheduler.
inline ModelProfile CpuModelProfile(const CpuModelConfig& c, double hbm_gib) {
  ModelProfile p = TinyProfile(c.name);
  p.layers = c.layers;
  p.kv_layers = c.layers;
  p.kv_heads = c.kv_heads;
  p.head_dim = c.head_dim();
  p.kv_dtype = "fp32";
  p.kv_dtype_bytes = 4;
  p.weight_bytes_per_rank = c.WeightBytes();
  p.hbm_gib_per_gpu = hbm_gib;
  p.max_context_tokens = c.max_context;
  return p;
}

}  // namespace talaria::testing
