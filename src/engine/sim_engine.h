// SimEngine: a model of a GPU, not a GPU. It executes nothing; every step's
// duration is computed from the model profile (measured-point tables,
// interpolated): prefill by new and cached tokens, HKVR restores at the
// profile's H2D rate, decode by batch and context, and switch phases from the
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

  // The same formulas, for schedulers that predict before they ask.
  static double PrefillSeconds(const ModelProfile& m, std::span<const PrefillItem> items);
  static double DecodeSeconds(const ModelProfile& m, std::int32_t batch,
                              std::int64_t mean_context_tokens, std::int32_t iterations);
  static SwitchTiming SwitchTimes(const SwitchStep& step, double recapture_s);

 private:
  Options options_;
};

}  // namespace talaria
