// A replay's summary, the same for the simulated replay (sim/replay.h) and
// the replay against a live server (server/http_replay.h): completions,
// SCT and TTFT samples, the instances' mechanism counters and the placement
// figures of the routing experiments. Its JSON form keeps the key names
// docs/replay.md lists, since scripts read them.
#pragma once

#include <cstdint>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>

#include "core/stats.h"
#include "instance/instance.h"
#include "router/router.h"

namespace talaria {

struct ReplayResult {
  std::string config;
  std::int64_t calls_total = 0;
  std::int64_t calls_completed = 0;
  std::int64_t sessions = 0;
  Sample sct_s;
  Sample ttft_s;
  Sample switch_ms;
  std::map<std::string, std::int64_t> switch_paths;  // d2d, partial, h2d
  std::map<std::string, std::int64_t> kv_sources;    // device, host, recompute
  std::map<std::string, std::int64_t> admit_paths;   // P, SP, continuous
  double active_s = 0;
  double switch_s = 0;
  std::int64_t rounds = 0;
  std::int64_t hbm_peak_bytes = 0;
  std::int64_t hbm_cap_bytes = 0;
  InstanceCounters counters;  // summed over instances (peak: max)
  double makespan_s = 0;

  // Placement (router experiments).
  std::string router;
  std::string load;
  double tau_s = 0;
  std::string lease = "fixed";  // the router's LeasePolicy
  std::string lease_honour = "rank";  // the router's LeaseHonour
  std::int64_t continuations = 0;
  std::int64_t same_instance_returns = 0;
  std::int64_t residency_hits = 0;   // placed where the model was already open
  // Opens of a model while another instance had it open (at placement or
  // forced later, when a model closed with work queued opens again).
  std::int64_t avoidable_opens = 0;
  std::int64_t rejected = 0;
  std::map<std::string, std::int64_t> rejected_by_reason;  // no-instance, stale, admission
  // Placed calls that waited at the gateway first (every candidate failed
  // admission or was stale), how long, and those placed by the last resort.
  Sample gateway_wait_s;
  std::int64_t last_resort_placements = 0;
  Sample returning_ttft_s;
  RouterCounters router_counters;
  double same_instance_return_rate() const {
    return continuations > 0 ? static_cast<double>(same_instance_returns) / static_cast<double>(continuations) : 0;
  }
  double residency_hit_rate() const {
    return calls_total > 0 ? static_cast<double>(residency_hits) / static_cast<double>(calls_total) : 0;
  }
  // Leases installed that no return consumed on their instance in time.
  double unused_lease_proxy() const {
    return router_counters.leases_installed > 0
               ? 1.0 - static_cast<double>(router_counters.leases_consumed) /
                           static_cast<double>(router_counters.leases_installed)
               : 0;
  }

  double switch_share() const {
    return active_s + switch_s > 0 ? switch_s / (active_s + switch_s) : 0;
  }
  // The summary object; keys documented in docs/replay.md.
  nlohmann::ordered_json ToJson() const;
};

// Opens DIR/NAME for a replay's JSON Lines records (--records), creating
// DIR. Throws InputError naming the directory or the file when it cannot.
std::ofstream OpenRecordsFile(const std::string& dir, const std::string& name);

}  // namespace talaria
