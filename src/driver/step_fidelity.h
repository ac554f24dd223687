// What a computing engine's steps took against what the profile model
// charges for the same steps: the simulator's fidelity, measured step by
// step while a real instance serves (docs/fidelity.md). The model is the sim
// engine's (profile/step_cost.h over the instance's profiles), so a ratio
// far from 1 in one phase names the table a re-measured profile would fix.
//
// The driver's own time between steps is counted too: from one step's end
// to the next one's start while work was waiting (delivering the commit's
// events to the servers, taking in arrivals, planning). The sim charges
// none of it.
//
// Plain counters; the driver that owns one synchronizes access.
#pragma once

#include <array>
#include <cstdint>

namespace talaria {

struct StepFidelity {
  enum Phase : std::uint8_t { kPrefill, kSessionPrefill, kDecode, kSwitch, kPhases };
  static constexpr std::array<const char*, kPhases> kPhaseNames = {"prefill", "session_prefill", "decode", "switch"};

  struct Totals {
    std::int64_t steps = 0;
    double measured_s = 0;  // what the engine measured while the step ran
    double model_s = 0;     // what the sim engine charges for the same step
  };
  // By phase; only an engine that computes (not emulated) adds to them.
  std::array<Totals, kPhases> phases{};
  // Driver time between steps with work waiting, and how many such gaps.
  std::int64_t boundaries = 0;
  double boundary_s = 0;
};

}  // namespace talaria
