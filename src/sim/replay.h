// The closed-loop replay (DESIGN.md §7, paper §5.1) over a simulated
// cluster in virtual time.
//
// Per session the calls go in trace order with the recorded bodies and
// completion lengths; call k+1 is released when call k has finished and its
// tool gap (capped, 10 s by default) has elapsed, so global interleaving
// depends on the configuration while each session's path does not. Every
// call's intended enqueue time is recorded, so TTFT is schedule-aware: it
// includes any wait for admission.
//
// Every call is placed by the router (router/router.h; settings from the
// cluster config's [router] table), which sees each
// instance only through telemetry snapshots delivered on a heartbeat period,
// so its view is as stale as a real control plane's; its in-flight overlay
// counts what it forwarded since. A call no instance can take waits at the
// gateway, retried each heartbeat, and is rejected after overload_max_wait_s.
// Time is virtual (an EventQueue); the router, the instances and the sim
// engine are the same objects the servers will drive.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/stats.h"
#include "instance/instance.h"
#include "profile/profile.h"
#include "router/router.h"
#include "sim/cluster_config.h"
#include "trace/trace.h"

namespace talaria {

struct ReplayOptions {
  double gap_cap_s = 10.0;  // paper §5.1: recorded gaps capped at 10 s
  // When set, per-call, per-round and per-switch records are written as
  // JSON Lines to <records_dir>/calls.jsonl, rounds.jsonl, switches.jsonl.
  std::string records_dir;
  // Called about once per simulated minute with (calls done, calls total).
  std::function<void(std::int64_t, std::int64_t)> progress;
  double start_scale = 1.0;  // multiplies session start offsets (offered load)
};

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
  std::int64_t continuations = 0;
  std::int64_t same_instance_returns = 0;
  std::int64_t residency_hits = 0;   // placed where the model was already open
  std::int64_t avoidable_opens = 0;  // placed where it was not, though another instance had it
  std::int64_t rejected = 0;
  std::map<std::string, std::int64_t> rejected_by_reason;  // no-instance, stale, admission
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

ReplayResult RunReplay(const std::string& config_name, const ClusterConfig& cluster,
                       const ProfileSet& profiles, const Trace& trace, const ReplayOptions& options);

}  // namespace talaria
