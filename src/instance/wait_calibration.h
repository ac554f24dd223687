// What a return that misses its slot waits (W), measured: adaptive holds
// (config.h) predict W from the queues (Eq.3's terms for the other models'
// slots and the switch back), and that prediction runs short, because the
// other models' slots often run to their budget, past their protected
// decode (docs/policy-matrix.md "Third stop"). Each time a model switches out
// with work, the instance records W as predicted then; when the model's
// next slot opens, how long its way back took. Scale() is the ratio of the
// two means, which the hold multiplies its W by.
//
// Policy code: it sees only the seconds it is given.
#pragma once

#include <cstdint>

#include "core/stats.h"

namespace talaria {

class WaitCalibration {
 public:
  static constexpr std::int64_t kWindow = 64;     // WindowedMean's
  static constexpr std::int64_t kMinSamples = 8;  // before, W is used as predicted

  // One way back: W as predicted at the switch out, and as it took.
  // Predictions of 0 (no other model had work) carry no ratio: ignored.
  void Observe(double predicted_s, double measured_s) {
    if (predicted_s <= 0 || measured_s < 0) return;
    predicted_s_.Add(predicted_s, kWindow);
    measured_s_.Add(measured_s, kWindow);
  }
  // Measured over predicted: 1 until kMinSamples ways back are known.
  double Scale() const {
    if (measured_s_.samples < kMinSamples || predicted_s_.value <= 0) return 1;
    return measured_s_.value / predicted_s_.value;
  }
  std::int64_t samples() const { return measured_s_.samples; }

 private:
  WindowedMean predicted_s_;
  WindowedMean measured_s_;
};

}  // namespace talaria
