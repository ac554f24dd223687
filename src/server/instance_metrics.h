// The per-instance metric families an operator reads to see why a session
// waited (docs/serving.md lists them): what each instance's latest snapshot
// says (gauges: which model is open and active, queues and running calls by
// model, the round against its Eq.5 bound, HBM by region, host KV), what its
// scheduler counted (SP admitted and deferred, slot holds and hits, restore
// skips, opens, phase time), what its server observed (switch latency by
// path, round length), and how a computing engine's steps compared with the
// profile model (driver/step_fidelity.h). Labels are instance, model, path,
// phase, source and region: bounded by the configuration, never a session
// id.
#pragma once

#include <span>
#include <string>

#include "driver/step_fidelity.h"
#include "instance/instance.h"
#include "server/metrics.h"
#include "telemetry/telemetry.h"

namespace talaria {

// What an instance's server observes of its scheduler's events.
struct InstanceHistograms {
  InstanceHistograms();
  void OnSwitch(const SwitchRecord& r);
  void OnRound(const RoundRecord& r);
  LabeledHistogram switch_s;  // a switch's duration (emulated seconds), by path
  Histogram round_s;          // a round's wall length, active plus switches (emulated seconds)
};

// One instance as the metrics see it. `counters` and `histograms` are null
// where the renderer does not run the instance (a gateway in front of
// instance servers has only their snapshots).
struct InstanceSample {
  const InstanceTelemetry* snapshot = nullptr;  // null: none received yet
  std::string name;
  const InstanceCounters* counters = nullptr;
  const InstanceHistograms* histograms = nullptr;
  std::size_t sessions_cached = 0;  // the snapshot's held prefixes (its map may be left out)
  const StepFidelity* fidelity = nullptr;  // null where the renderer does not run the instance
};

// Appends every family, each with the samples of all `instances`.
void RenderInstanceMetrics(std::string& out, std::span<const InstanceSample> instances);

}  // namespace talaria
