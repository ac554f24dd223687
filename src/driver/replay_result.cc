#include "driver/replay_result.h"

#include <filesystem>

#include "core/error.h"
#include "core/units.h"

namespace talaria {

nlohmann::ordered_json ReplayResult::ToJson() const {
  auto pct = [](const Sample& s, double q) { return s.empty() ? 0.0 : s.Percentile(q); };
  nlohmann::ordered_json j;
  j["config"] = config;
  j["calls_total"] = calls_total;
  j["calls_completed"] = calls_completed;
  j["sessions"] = sessions;
  j["sct_p50_s"] = pct(sct_s, 50);
  j["sct_p95_s"] = pct(sct_s, 95);
  j["ttft_p50_s"] = pct(ttft_s, 50);
  j["ttft_p95_s"] = pct(ttft_s, 95);
  j["switch_p50_ms"] = pct(switch_ms, 50);
  j["switch_p95_ms"] = pct(switch_ms, 95);
  j["switches"] = static_cast<std::int64_t>(switch_ms.count());
  nlohmann::ordered_json paths;
  for (const char* p : {"d2d", "partial", "h2d"}) {
    auto it = switch_paths.find(p);
    paths[p] = it == switch_paths.end() ? 0 : it->second;
  }
  j["switch_paths"] = paths;
  j["switch_share"] = switch_share();
  j["active_s"] = active_s;
  j["prefill_s"] = counters.prefill_s;
  j["decode_s"] = counters.decode_s;
  j["switch_s"] = switch_s;
  j["rounds"] = rounds;
  j["hbm_peak_gib"] = ToGiB(hbm_peak_bytes);
  j["hbm_cap_gib"] = ToGiB(hbm_cap_bytes);
  j["sp_admitted"] = counters.sp_admitted;
  j["sp_deferred"] = counters.sp_deferred;
  j["host_capacity_misses"] = counters.host_capacity_misses;
  j["restore_skips"] = counters.restore_skips;
  j["deadline_risk"] = counters.deadline_risk;
  j["preemptions"] = counters.preemptions;
  j["slot_holds"] = counters.holds;
  j["slot_hold_hits"] = counters.hold_hits;
  nlohmann::ordered_json sources;
  for (const char* s : {"device", "host", "recompute"}) {
    auto it = kv_sources.find(s);
    sources[s] = it == kv_sources.end() ? 0 : it->second;
  }
  j["kv_sources"] = sources;
  j["makespan_s"] = makespan_s;
  j["router"] = router;
  j["load"] = load;
  j["tau_s"] = tau_s;
  j["lease"] = lease;
  j["lease_honour"] = lease_honour;
  j["avoidable_opens"] = avoidable_opens;
  j["model_opens"] = counters.model_opens;
  j["same_instance_return_rate"] = same_instance_return_rate();
  j["residency_hit_rate"] = residency_hit_rate();
  j["returning_ttft_p50_s"] = pct(returning_ttft_s, 50);
  j["returning_ttft_p95_s"] = pct(returning_ttft_s, 95);
  j["unused_lease_proxy"] = unused_lease_proxy();
  j["leases_installed"] = router_counters.leases_installed;
  j["leases_consumed"] = router_counters.leases_consumed;
  j["leases_declined"] = router_counters.leases_declined;
  j["rejected"] = rejected;
  nlohmann::ordered_json reasons = nlohmann::ordered_json::object();
  for (const auto& [reason, n] : rejected_by_reason) reasons[reason] = n;
  j["rejected_by_reason"] = reasons;
  j["gateway_waited_calls"] = static_cast<std::int64_t>(gateway_wait_s.count());
  j["gateway_wait_p95_s"] = pct(gateway_wait_s, 95);
  j["gateway_wait_max_s"] = gateway_wait_s.empty() ? 0.0 : gateway_wait_s.Percentile(100);
  j["last_resort_placements"] = last_resort_placements;
  // The distributions behind the percentiles (talaria report plots them):
  // the 0th, 1st, ..., 100th percentile; empty when there are no samples.
  const auto quantiles = [](const Sample& s) {
    nlohmann::ordered_json q = nlohmann::ordered_json::array();
    if (!s.empty()) {
      for (int p = 0; p <= 100; ++p) q.push_back(s.Percentile(p));
    }
    return q;
  };
  j["sct_quantiles_s"] = quantiles(sct_s);
  j["ttft_quantiles_s"] = quantiles(ttft_s);
  return j;
}

std::ofstream OpenRecordsFile(const std::string& dir, const std::string& name) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) throw InputError(dir, "cannot create the records directory: " + ec.message());
  std::ofstream out(dir + "/" + name);
  if (!out) throw InputError(dir + "/" + name, "cannot write replay records");
  return out;
}

}  // namespace talaria
