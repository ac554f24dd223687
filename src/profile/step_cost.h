// The one step-cost model (DESIGN.md §6): how long a step takes, predicted
// from a model's profile. The profile's tables answer single points
// (ModelProfile::PrefillSeconds, DecodeStepSeconds, KvRestoreSeconds); this
// composes them into steps, one formula each, for every user:
//   - the sim engine times the steps it emulates with it;
//   - the scheduler predicts prefill batches, decode steps and its slot
//     budgets with it (Eq.3-5), and compares what an engine measured with
//     it (its prefill and decode scales, reported in telemetry);
//   - the router predicts a call's own work, recompute and restore with it
//     (Eq.1), scaled by the scales the instance reported.
// Switch phases are the sim engine's (engine/sim_engine.h): only it times a
// switch from a gather plan; the router reads switch costs from telemetry.
// Pure functions.
#pragma once

#include <cstdint>

#include "profile/profile.h"

namespace talaria::step_cost {

// A prefill batch: each item's H2D restore of `restore_tokens`, then its
// prefill of `new_tokens` after `cached_tokens` already in KV. `Items` is
// any range of structs with those three fields (engine/engine.h's
// PrefillItem).
template <typename Items>
double PrefillBatch(const ModelProfile& m, const Items& items) {
  double s = 0;
  for (const auto& it : items) {
    if (it.restore_tokens > 0) s += m.KvRestoreSeconds(it.restore_tokens);
    if (it.new_tokens > 0) s += m.PrefillSeconds(it.new_tokens, it.cached_tokens);
  }
  return s;
}

// `iterations` decode steps of `batch` calls whose mean context is
// `mean_context_tokens` at the first: contexts grow a token an iteration,
// so the mid-point is charged.
inline double Decode(const ModelProfile& m, std::int32_t batch, std::int64_t mean_context_tokens,
                     std::int32_t iterations) {
  return iterations * m.DecodeStepSeconds(batch, mean_context_tokens + iterations / 2);
}

// A call's own work, as if it ran alone: the prefill of its prompt past
// `cached_tokens`, and `output_tokens` decode steps at batch 1.
inline double CallPrefill(const ModelProfile& m, std::int64_t prompt_tokens, std::int64_t cached_tokens) {
  return m.PrefillSeconds(prompt_tokens - cached_tokens, cached_tokens);
}
inline double CallDecode(const ModelProfile& m, std::int64_t prompt_tokens, double output_tokens) {
  return output_tokens * m.DecodeStepSeconds(1, prompt_tokens);
}
inline double CallWork(const ModelProfile& m, std::int64_t prompt_tokens, std::int64_t cached_tokens,
                       double output_tokens) {
  return CallPrefill(m, prompt_tokens, cached_tokens) + CallDecode(m, prompt_tokens, output_tokens);
}

// Recomputing a prefix of `tokens` from scratch, and restoring it from host
// KV (H2D, one rank).
inline double Recompute(const ModelProfile& m, std::int64_t tokens) { return tokens > 0 ? m.PrefillSeconds(tokens) : 0.0; }
inline double Restore(const ModelProfile& m, std::int64_t tokens) { return m.KvRestoreSeconds(tokens); }

}  // namespace talaria::step_cost
