// SimEngine: a model of a GPU, not a GPU. It executes nothing; every step's
// duration is the step-cost model's (profile/step_cost.h, the one the
// scheduler and the router predict with) over the model profile
// (measured-point tables, interpolated): prefill by new and cached tokens,
// HKVR restores at the profile's H2D rate, decode by batch and context, and switch phases from the
// profile's per-path fixed phases plus weight bytes over the D2D and H2D
// rates of the gather plan. The same step always takes the same time, so
// simulated runs are exactly reproducible.
#pragma once

#include "engine/engine.h"

namespace talaria {

class SimEngine final : public Engine {
 public:
  struct Options {
    // Re-capturing CUDA graphs and re-initialising attention backends after
    // the pointer check fails. Assumption: the paper gives no figure; graph
    // capture over a serving batch-size ladder takes seconds.
    double recapture_s = 3.0;
  };

  SimEngine() = default;
  explicit SimEngine(Options options) : options_(options) {}

  Duration Prefill(const PrefillStep& step) override;
  Duration Decode(const DecodeStep& step) override;
  SwitchTiming Switch(const SwitchStep& step) override;

  // A switch's phases from its gather plan and the profile's fixed phases.
  static SwitchTiming SwitchTimes(const SwitchStep& step, double recapture_s);

 private:
  Options options_;
};

}  // namespace talaria
