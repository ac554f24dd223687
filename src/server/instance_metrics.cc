#include "server/instance_metrics.h"

#include <cstdio>
#include <functional>

namespace talaria {
namespace {

std::string Number(double x) { return MetricNumber(x); }

std::string Label(const char* name, const std::string& value) { return std::string(name) + "=\"" + value + "\""; }

// One family with a sample per instance (and per model, with `per_model`).
// `value` returns false where the instance has nothing to report.
void Family(std::string& out, std::span<const InstanceSample> instances, const char* name, const char* type,
            const char* help, const std::function<bool(const InstanceSample&, double&)>& value) {
  FamilyHeader(out, name, type, help);
  for (const InstanceSample& i : instances) {
    double v = 0;
    if (value(i, v)) out += std::string(name) + "{" + Label("instance", i.name) + "} " + Number(v) + "\n";
  }
}

void ModelFamily(std::string& out, std::span<const InstanceSample> instances, const char* name, const char* help,
                 const std::function<double(const ModelTelemetry&)>& value) {
  FamilyHeader(out, name, "gauge", help);
  for (const InstanceSample& i : instances) {
    if (i.snapshot == nullptr) continue;
    for (const ModelTelemetry& m : i.snapshot->models) {
      out += std::string(name) + "{" + Label("instance", i.name) + "," + Label("model", m.name) + "} " +
             Number(value(m)) + "\n";
    }
  }
}

// A counter family read from each instance's scheduler counters.
void CounterFamily(std::string& out, std::span<const InstanceSample> instances, const char* name, const char* help,
                   std::int64_t InstanceCounters::*field) {
  Family(out, instances, name, "counter", help, [field](const InstanceSample& i, double& v) {
    if (i.counters == nullptr) return false;
    v = static_cast<double>(i.counters->*field);
    return true;
  });
}

// A gauge family read from each instance's snapshot.
void SnapshotFamily(std::string& out, std::span<const InstanceSample> instances, const char* name, const char* type,
                    const char* help, const std::function<double(const InstanceTelemetry&)>& value) {
  Family(out, instances, name, type, help, [&value](const InstanceSample& i, double& v) {
    if (i.snapshot == nullptr) return false;
    v = value(*i.snapshot);
    return true;
  });
}

void HbmFamily(std::string& out, std::span<const InstanceSample> instances) {
  FamilyHeader(out, "talaria_hbm_bytes", "gauge",
               "device memory per rank by region: weights of the resident models, KV in use and free in the "
               "KV pool, and weights staged into free KV for the next switch");
  for (const InstanceSample& i : instances) {
    if (i.snapshot == nullptr) continue;
    const InstanceTelemetry& t = *i.snapshot;
    double weights = 0, staged = 0;
    for (const ModelTelemetry& m : t.models) {
      if (m.resident) weights += static_cast<double>(m.weight_bytes_per_rank);
      if (m.staged) staged += m.staged_coverage * static_cast<double>(m.weight_bytes_per_rank);
    }
    const std::pair<const char*, double> regions[] = {
        {"weights", weights},
        {"kv_used", static_cast<double>(t.kv_total_bytes - t.kv_free_bytes)},
        {"kv_free", static_cast<double>(t.kv_free_bytes)},
        {"staged", staged}};
    for (const auto& [region, bytes] : regions) {
      out += "talaria_hbm_bytes{" + Label("instance", i.name) + "," + Label("region", region) + "} " + Number(bytes) +
             "\n";
    }
  }
}

void PhaseFamily(std::string& out, std::span<const InstanceSample> instances) {
  FamilyHeader(out, "talaria_phase_seconds_total", "counter",
               "emulated seconds the instance spent in each phase: prefill (queued-prefill P steps, restores "
               "included), session_prefill (SP steps) and decode (D1, D and Dfin)");
  for (const InstanceSample& i : instances) {
    if (i.counters == nullptr) continue;
    const std::pair<const char*, double> phases[] = {
        {"prefill", i.counters->prefill_s - i.counters->session_prefill_s},
        {"session_prefill", i.counters->session_prefill_s},
        {"decode", i.counters->decode_s}};
    for (const auto& [phase, seconds] : phases) {
      out += "talaria_phase_seconds_total{" + Label("instance", i.name) + "," + Label("phase", phase) + "} " +
             Number(seconds) + "\n";
    }
  }
}

// A computing engine's step time against the profile model's for the same
// steps, and the driver's time between steps (driver/step_fidelity.h).
void FidelityFamilies(std::string& out, std::span<const InstanceSample> instances) {
  // One sample per instance and phase; `extra` labels follow the phase.
  const auto per_phase = [&](const char* name, const char* extra, double (*value)(const StepFidelity::Totals&)) {
    for (const InstanceSample& i : instances) {
      if (i.fidelity == nullptr) continue;
      for (int p = 0; p < StepFidelity::kPhases; ++p) {
        out += std::string(name) + "{" + Label("instance", i.name) + "," +
               Label("phase", StepFidelity::kPhaseNames[p]) + extra + "} " + Number(value(i.fidelity->phases[p])) +
               "\n";
      }
    }
  };
  FamilyHeader(out, "talaria_engine_step_seconds_total", "counter",
               "seconds a computing engine's steps took (source=\"measured\") and what the profile model, the sim "
               "engine's, charges for the same steps (source=\"model\"), by phase; zero for an emulated engine");
  per_phase("talaria_engine_step_seconds_total", ",source=\"measured\"",
            [](const StepFidelity::Totals& t) { return t.measured_s; });
  per_phase("talaria_engine_step_seconds_total", ",source=\"model\"",
            [](const StepFidelity::Totals& t) { return t.model_s; });
  FamilyHeader(out, "talaria_engine_steps_total", "counter", "steps a computing engine ran, by phase");
  per_phase("talaria_engine_steps_total", "",
            [](const StepFidelity::Totals& t) { return static_cast<double>(t.steps); });
  Family(out, instances, "talaria_driver_boundary_seconds_total", "counter",
         "the real-time driver's own time from a step's end to the next step's start while work waited "
         "(delivering events, intake, planning; emulated seconds); the simulator charges none",
         [](const InstanceSample& i, double& v) {
           if (i.fidelity == nullptr) return false;
           v = i.fidelity->boundary_s;
           return true;
         });
  Family(out, instances, "talaria_driver_boundaries_total", "counter",
         "step boundaries the real-time driver crossed without waiting idle", [](const InstanceSample& i, double& v) {
           if (i.fidelity == nullptr) return false;
           v = static_cast<double>(i.fidelity->boundaries);
           return true;
         });
}

void HistogramFamilies(std::string& out, std::span<const InstanceSample> instances) {
  FamilyHeader(out, "talaria_switch_seconds", "histogram",
               "model switch duration by path: d2d (weights staged on device), partial, h2d (emulated seconds)");
  for (const InstanceSample& i : instances) {
    if (i.histograms != nullptr) i.histograms->switch_s.RenderSamples(out, "talaria_switch_seconds", Label("instance", i.name), "path");
  }
  FamilyHeader(out, "talaria_round_seconds", "histogram",
               "round length: every slot's steps plus the switches between them (emulated seconds)");
  for (const InstanceSample& i : instances) {
    if (i.histograms != nullptr) i.histograms->round_s.RenderSamples(out, "talaria_round_seconds", Label("instance", i.name));
  }
}

}  // namespace

InstanceHistograms::InstanceHistograms()
    : switch_s({0.1, 0.25, 0.5, 1, 2, 5, 10, 20, 60}), round_s({0.5, 1, 2, 5, 10, 20, 40, 80, 160}) {}

void InstanceHistograms::OnSwitch(const SwitchRecord& r) { switch_s.Observe(ToString(r.path), r.timing.total_s()); }

void InstanceHistograms::OnRound(const RoundRecord& r) { round_s.Observe(r.active_s + r.switch_s); }

void RenderInstanceMetrics(std::string& out, std::span<const InstanceSample> instances) {
  ModelFamily(out, instances, "talaria_model_resident", "1 where the model is open on the instance (a switch to it needs no full open)",
              [](const ModelTelemetry& m) { return m.resident ? 1.0 : 0.0; });
  ModelFamily(out, instances, "talaria_model_active", "1 where the model's slot holds the instance's GPUs now",
              [](const ModelTelemetry& m) { return m.active ? 1.0 : 0.0; });
  ModelFamily(out, instances, "talaria_calls_queued", "calls queued for the model on the instance",
              [](const ModelTelemetry& m) { return static_cast<double>(m.queued); });
  ModelFamily(out, instances, "talaria_calls_running", "calls of the model in a step or decode batch",
              [](const ModelTelemetry& m) { return static_cast<double>(m.running); });
  ModelFamily(out, instances, "talaria_queued_work_seconds", "predicted prefill and decode of the model's queue (emulated seconds)",
              [](const ModelTelemetry& m) { return m.queued_work_s; });
  ModelFamily(out, instances, "talaria_admit_wait_seconds",
              "predicted wait until the model's next prefill phase could admit a call (emulated seconds)",
              [](const ModelTelemetry& m) { return m.admit_wait_s; });
  SnapshotFamily(out, instances, "talaria_round_estimate_seconds", "gauge",
                 "predicted round length R (Eq.3; emulated seconds)",
                 [](const InstanceTelemetry& t) { return t.round_estimate_s; });
  SnapshotFamily(out, instances, "talaria_round_bound_seconds", "gauge",
                 "the round's admission bound gamma * T_TTFT (Eq.5; emulated seconds)",
                 [](const InstanceTelemetry& t) { return t.round_bound_s; });
  SnapshotFamily(out, instances, "talaria_hold_wait_scale", "gauge",
                 "adaptive holds: a missed return's measured way back over the queues' prediction, which scales "
                 "the hold's W (1 until measured, or where holds are fixed)",
                 [](const InstanceTelemetry& t) { return t.hold_wait_scale; });
  SnapshotFamily(out, instances, "talaria_busy_fraction", "gauge",
                 "the instance's steps' share of time over its last 64 steps (time held counts as idle); adaptive "
                 "holds charge first calls over the rest of the busy period, W / (1 - it)",
                 [](const InstanceTelemetry& t) { return t.busy_fraction; });
  HbmFamily(out, instances);
  SnapshotFamily(out, instances, "talaria_host_kv_used_bytes", "gauge", "bytes of session KV in the host KV registry",
                 [](const InstanceTelemetry& t) { return static_cast<double>(t.host_kv_used_bytes); });
  SnapshotFamily(out, instances, "talaria_host_kv_capacity_bytes", "gauge", "the host KV registry's capacity",
                 [](const InstanceTelemetry& t) { return static_cast<double>(t.host_kv_capacity_bytes); });
  SnapshotFamily(out, instances, "talaria_host_kv_evicted_blocks_total", "counter",
                 "KV blocks the host KV registry evicted to make room",
                 [](const InstanceTelemetry& t) { return static_cast<double>(t.host_kv_evicted_blocks); });
  Family(out, instances, "talaria_sessions_cached", "gauge",
         "sessions whose prefix the instance holds on device or in host KV", [](const InstanceSample& i, double& v) {
           v = static_cast<double>(i.sessions_cached);
           return i.snapshot != nullptr;
         });
  CounterFamily(out, instances, "talaria_sp_admitted_total", "continuations admitted mid-slot by session-prefill",
                &InstanceCounters::sp_admitted);
  CounterFamily(out, instances, "talaria_sp_deferred_total",
                "eligible continuations left for a later SP opportunity or slot (once per slot)",
                &InstanceCounters::sp_deferred);
  CounterFamily(out, instances, "talaria_slot_holds_total", "slots held open for a returning session",
                &InstanceCounters::holds);
  CounterFamily(out, instances, "talaria_slot_hold_hits_total", "held slots a returning session then entered",
                &InstanceCounters::hold_hits);
  CounterFamily(out, instances, "talaria_restore_skips_total",
                "calls recomputed although a cached prefix existed (hybrid state rules declined it)",
                &InstanceCounters::restore_skips);
  CounterFamily(out, instances, "talaria_host_kv_capacity_misses_total", "checkpoints that found no host KV room",
                &InstanceCounters::host_capacity_misses);
  CounterFamily(out, instances, "talaria_model_opens_total", "full opens of a model that was not resident",
                &InstanceCounters::model_opens);
  CounterFamily(out, instances, "talaria_model_closes_total", "resident models closed to make room",
                &InstanceCounters::model_closes);
  CounterFamily(out, instances, "talaria_preemptions_total", "running calls swapped out at a slot end",
                &InstanceCounters::preemptions);
  CounterFamily(out, instances, "talaria_rounds_total", "rounds completed", &InstanceCounters::rounds);
  PhaseFamily(out, instances);
  FidelityFamilies(out, instances);
  HistogramFamilies(out, instances);
}

}  // namespace talaria
