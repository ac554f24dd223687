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
#include <string>
#include <vector>

#include "config/cluster_config.h"
#include "driver/replay_result.h"
#include "profile/profile.h"
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

ReplayResult RunReplay(const std::string& config_name, const ClusterConfig& cluster,
                       const ProfileSet& profiles, const Trace& trace, const ReplayOptions& options);

}  // namespace talaria
