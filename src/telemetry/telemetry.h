// What an instance tells the router (DESIGN.md §4, paper §4.1): a versioned
// snapshot of residency, queues, round state, memory and measured costs,
// plus which sessions' prefixes it holds and where. The router plans against
// the latest snapshot it received plus its own in-flight overlay; the
// simulator delivers snapshots on a heartbeat period, so they are stale the
// way a real control plane's are.
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/strings.h"
#include "core/time.h"

namespace talaria {

enum class KvState : std::uint8_t { kMissing, kHost, kDevice };
const char* ToString(KvState s);

struct ModelTelemetry {
  std::string name;
  bool resident = false;  // opened here: a switch to it needs no full open
  bool active = false;    // its slot holds the GPUs now
  bool staged = false;    // the stager is filling its weights into KV tails
  double staged_coverage = 0;
  std::int32_t queued = 0;
  std::int32_t running = 0;
  double queued_work_s = 0;   // predicted prefill + decode of its queue
  double switch_in_s = 0;     // advertised switch cost into it (EWMA of measured)
  double full_open_s = 0;     // opening it from storage when not resident
  // Opening it here now would close a model with work (the instance keeps
  // at most max_resident open; its own choice of which closes): that
  // model's full_open_s, paid again at its next slot. 0 when it is open or
  // its open closes nothing busy.
  double forced_reopen_s = 0;
  // Predicted seconds from taken_at until a prefill phase of this model
  // could admit a new call: 0 while its P phase is open or next, else the
  // rest of the active slot (one in a fixed hold's at least to the hold's
  // end: the instance switches no sooner) and the slots of the models with
  // work ahead of it in round order (and their switches), not counting the
  // switch into it (switch_in_s). Always 0 on a hot instance.
  double admit_wait_s = 0;
  // Measured / profiled step time, EWMA over recent steps (1: as profiled).
  double prefill_scale = 1.0;
  double decode_scale = 1.0;
  std::int64_t weight_bytes_per_rank = 0;
};

struct CachedPrefix {
  std::string model;
  KvState state = KvState::kMissing;
  std::int64_t tokens = 0;
};

struct InstanceTelemetry {
  std::string instance;
  std::uint64_t version = 0;
  TimePoint taken_at;
  std::vector<ModelTelemetry> models;  // in the instance's catalogue order
  // Predicted round length R (Eq.3): for each model with work, its queued
  // prefill and protected decode (Eq.4), plus the switches between them.
  double round_estimate_s = 0;
  double round_bound_s = 0;            // gamma * T_TTFT (Eq.5)
  std::int64_t deadline_risk = 0;
  std::int64_t kv_free_bytes = 0;
  std::int64_t kv_total_bytes = 0;
  std::int64_t staging_slack_bytes = 0;
  // The host KV registry (HKVR): bytes held and its capacity, and blocks it
  // evicted so far (a count since start).
  std::int64_t host_kv_used_bytes = 0;
  std::int64_t host_kv_capacity_bytes = 0;
  std::int64_t host_kv_evicted_blocks = 0;
  double restore_bytes_per_s = 0;
  // A continuation of the active model with its prefix cached here enters
  // at the next decode boundary (session-prefill) instead of waiting for a
  // P phase.
  bool session_prefill = false;
  // Adaptive holds: the way back a return that missed its slot took, over
  // the queues' prediction of it (instance/wait_calibration.h), which the
  // hold scales its W by. 1 until enough ways back were measured, and
  // wherever holds are not adaptive.
  double hold_wait_scale = 1;
  // Its steps' share of time lately (core/stats.h BusyFraction: over its
  // last 64 steps, time held counting as idle), which adaptive holds read
  // for how long a delay keeps shifting the slots after it. 0 before two
  // steps have ended.
  double busy_fraction = 0;
  // Sessions whose prefix this instance holds, by session id. In a delta
  // snapshot (sessions_delta), only the sessions whose entry changed since
  // the snapshot numbered sessions_base, a kMissing entry meaning "no longer
  // held"; it applies only on top of that snapshot. A full snapshot lists
  // every held prefix. The simulator sends deltas (a cluster's sessions
  // change far more slowly than heartbeats come); the servers send full ones.
  std::unordered_map<std::string, CachedPrefix, StringHash, std::equal_to<>> sessions;
  bool sessions_delta = false;
  std::uint64_t sessions_base = 0;
};

}  // namespace talaria
