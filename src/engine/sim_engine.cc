#include "engine/sim_engine.h"

#include "core/error.h"
#include "profile/step_cost.h"

namespace talaria {

SwitchTiming SimEngine::SwitchTimes(const SwitchStep& step, double recapture_s) {
  TALARIA_CHECK(step.to != nullptr, "switch without a target model");
  const SwitchPhases& fixed = step.to->switch_phases.at(step.plan.path);
  SwitchTiming t;
  t.save_teardown_s = (step.from != nullptr ? fixed.save_teardown_s : 0.0) + ToSeconds(step.drain);
  t.open_weights_s = step.full_open_s + step.to->OpenWeightsSeconds(step.plan.d2d_bytes);
  t.kv_shell_s = fixed.kv_shell_s;
  t.runtime_graph_s = fixed.runtime_graph_s + (step.recapture ? recapture_s : 0.0);
  t.publish_s = fixed.publish_s;
  return t;
}

Duration SimEngine::Prefill(const PrefillStep& step) {
  return FromSeconds(step_cost::PrefillBatch(*step.model, step.items));
}

Duration SimEngine::Decode(const DecodeStep& step) {
  return FromSeconds(step_cost::Decode(*step.model, step.batch, step.mean_context_tokens, step.iterations));
}

SwitchTiming SimEngine::Switch(const SwitchStep& step) {
  return SwitchTimes(step, options_.recapture_s);
}

}  // namespace talaria
