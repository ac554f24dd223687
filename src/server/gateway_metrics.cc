// Gateway::RenderMetrics: the gateway's /metrics page (docs/serving.md
// "Metrics"): the call families, the routing families, every instance's
// families from its latest snapshot, and the shared-state families.
#include "server/gateway.h"
#include "server/instance_metrics.h"

namespace talaria {

std::string Gateway::RenderMetrics() {
  std::string out = metrics_.Render();
  route_s_.Render(out, "talaria_route_decision_seconds", "wall time of one routing decision at the gateway");
  FamilyHeader(out, "talaria_route_decisions_total", "counter",
               "routing decisions by outcome: lease, cost (an instance holding the model open), open (Eq.2 opened "
               "a new replica), baseline (a baseline router), last_resort (a wait ran out and the cheapest fresh "
               "instance took the call), wait, overload");
  for (std::size_t k = 0; k < decisions_.size(); ++k) {
    out += "talaria_route_decisions_total{outcome=\"" + std::string(kRouteOutcomes[k]) + "\"} " +
           std::to_string(decisions_[k].load(std::memory_order_relaxed)) + "\n";
  }
  std::vector<std::optional<InstanceTelemetry>> snapshots;
  std::vector<double> age_s;
  std::vector<bool> healthy;
  RouterCounters counters;
  std::size_t live = 0;
  std::vector<std::size_t> held(links_.size(), 0);
  {
    std::lock_guard<std::mutex> lock(mu_);
    // A scrape copies no session map (the metrics read only its size).
    snapshots.resize(last_.size());
    for (std::size_t i = 0; i < last_.size(); ++i) {
      if (!last_[i]) continue;
      held[i] = last_[i]->sessions.size();
      auto sessions = std::move(last_[i]->sessions);
      snapshots[i] = *last_[i];
      last_[i]->sessions = std::move(sessions);
    }
    counters = control_.counters();
    live = control_.router().live_leases();
    const TimePoint now = Now();
    for (std::size_t i = 0; i < links_.size(); ++i) {
      age_s.push_back(last_[i] ? ToSeconds(now - last_[i]->taken_at) : -1);
      healthy.push_back(control_.healthy(static_cast<std::int32_t>(i)));
    }
  }
  FamilyHeader(out, "talaria_leases_live", "gauge", "session leases installed and not yet consumed or expired");
  out += "talaria_leases_live " + std::to_string(live) + "\n";
  const std::pair<const char*, std::int64_t> lease_counts[] = {{"installed", counters.leases_installed},
                                                               {"consumed", counters.leases_consumed},
                                                               {"expired", counters.leases_expired},
                                                               {"discarded", counters.leases_discarded}};
  FamilyHeader(out, "talaria_leases_total", "counter",
               "session leases by fate: installed at a completion; consumed by the return; expired unused; "
               "discarded (live, but its instance was unhealthy or had lost the prefix)");
  for (const auto& [fate, n] : lease_counts) out += "talaria_leases_total{fate=\"" + std::string(fate) + "\"} " + std::to_string(n) + "\n";
  FamilyHeader(out, "talaria_telemetry_age_seconds", "gauge",
               "emulated seconds since the instance's latest snapshot was asked for (absent before the first)");
  for (std::size_t i = 0; i < links_.size(); ++i) {
    if (age_s[i] >= 0) {
      out += "talaria_telemetry_age_seconds{instance=\"" + links_[i]->name() + "\"} " + std::to_string(age_s[i]) + "\n";
    }
  }
  FamilyHeader(out, "talaria_instance_healthy", "gauge", "1 while the instance answers its heartbeats");
  for (std::size_t i = 0; i < links_.size(); ++i) {
    out += "talaria_instance_healthy{instance=\"" + links_[i]->name() + "\"} " + (healthy[i] ? "1" : "0") + "\n";
  }
  // Every instance's families; in-process instances add their counters.
  std::vector<InstanceCounters> local_counters(links_.size());
  std::vector<StepFidelity> local_fidelity(links_.size());
  std::vector<InstanceSample> samples(links_.size());
  for (std::size_t i = 0; i < links_.size(); ++i) {
    samples[i].name = links_[i]->name();
    samples[i].sessions_cached = held[i];
    if (snapshots[i]) samples[i].snapshot = &*snapshots[i];
    if (auto* local = dynamic_cast<LocalInstanceLink*>(links_[i].get())) {
      local_counters[i] = local->service().Counters();
      samples[i].counters = &local_counters[i];
      samples[i].histograms = &local->service().histograms();
      local_fidelity[i] = local->service().Fidelity();
      samples[i].fidelity = &local_fidelity[i];
    }
  }
  RenderInstanceMetrics(out, samples);
  shared_->RenderMetrics(out);
  return out;
}

}  // namespace talaria
