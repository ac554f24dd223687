// The control plane both drivers run (paper §3.3, §4.1): the router, the
// instances' health, the heartbeat that feeds it telemetry, the bounded
// overload wait, the rule for placing a call again after its instance
// proved unreachable, and the completion hook that installs leases. The
// simulator drives it in virtual time, the gateway in the servers' time;
// neither has a copy of these rules.
//
// The heartbeat: every heartbeat_s the driver's poll is asked for each
// instance's snapshot (the simulator takes it at once; the gateway polls an
// instance server and answers when the reply comes or the poll fails). A
// snapshot marks its instance healthy; a failed poll or an unreachable
// instance marks it unhealthy until its next snapshot.
//
// The overload policy: a call the router cannot place now (stale snapshots,
// or every candidate failed round admission, KV or Eq.2) waits at the
// gateway and is routed again one heartbeat period after each failed try,
// as long as that next try stays within overload_max_wait_s of its arrival.
// When its wait runs out and fresh instances serve its model but failed only
// admission (Eq.5, KV, Eq.2), the cheapest of them takes it without round
// admission (a last resort: a call the cluster could serve is never lost);
// with no fresh instance it is rejected with the router's reason. A model no
// instance serves is rejected at once, as is every overload when
// overload_max_wait_s is 0 and no fresh instance could take it.
//
// Takes `now` and a Timer from the driver; never reads a clock, sleeps or
// does I/O. Not synchronized: the driver serializes calls (the gateway
// under its lock).
#pragma once

#include <cstdint>
#include <functional>
#include <string_view>
#include <vector>

#include "config/cluster_config.h"
#include "driver/timer.h"
#include "profile/profile.h"
#include "router/router.h"

namespace talaria {

class ControlPlane {
 public:
  // `profiles` must outlive the control plane.
  ControlPlane(const ClusterConfig& cluster, const ProfileSet& profiles);
  ControlPlane(const ControlPlane&) = delete;
  ControlPlane& operator=(const ControlPlane&) = delete;

  std::size_t instances() const { return router_.instances(); }

  // --- The heartbeat.
  // Polls every instance now (`poll(i)`), then again every heartbeat_s on
  // `timer` for as long as `keep_going()` holds when a beat is due. `timer`,
  // `poll` and `keep_going` must stay valid until the timer stops or
  // keep_going() is false.
  void StartHeartbeat(Timer& timer, TimePoint now, std::function<void(std::int32_t)> poll,
                      std::function<bool()> keep_going);
  // Instance `instance` answered its poll with `snapshot`.
  void OnTelemetry(std::int32_t instance, const InstanceTelemetry& snapshot, TimePoint now);
  // Instance `instance` did not answer its poll, or failed a call: no new
  // placements there until its next snapshot.
  void OnUnreachable(std::int32_t instance);
  bool healthy(std::int32_t instance) const { return router_.Healthy(instance); }
  // Whether the instance's next snapshot must list all its sessions.
  bool WantsFullSnapshot(std::int32_t instance) const { return router_.WantsFullSnapshot(instance); }

  // --- Placement.
  struct Placement {
    enum class Outcome : std::uint8_t { kPlaced, kWait, kRejected };
    Outcome outcome = Outcome::kRejected;
    RouteDecision decision;  // the instance (kPlaced), or the overload reason
    TimePoint retry_at;      // kWait: route the call again then
    double waited_s = 0;     // kRejected: how long it waited at the gateway
    bool last_resort = false;  // kPlaced after its wait ran out, without round admission
  };
  // Routes a call that reached the gateway at `arrived` (now, or earlier
  // when it has been waiting). `may_wait`: false when the call must not wait
  // (the gateway is stopping): an overload is then rejected at once.
  Placement Place(const RouteRequest& request, TimePoint arrived, TimePoint now, bool may_wait = true);
  // A call whose instance proved unreachable before it streamed anything,
  // after `attempts` placements: whether to place it again elsewhere.
  bool MayPlaceAgain(std::size_t attempts) const { return attempts < instances(); }

  // --- The completion hook: the session table and the successor lease.
  // Returns the successor lease's length (Router::OnCompleted; a call that
  // said it ends its session ends it here, and installs none).
  double OnCompleted(std::string_view session_id, std::string_view model, std::int32_t instance,
                     std::int64_t kv_tokens, std::int64_t output_tokens, TimePoint now, double expected_tool_s = -1,
                     bool session_end = false) {
    return router_.OnCompleted(session_id, model, instance, kv_tokens, output_tokens, now, expected_tool_s,
                               session_end);
  }

  // --- Shared state (gateway replicas): Router::AdoptSession and
  // Router::SetSharedLeases.
  void AdoptSession(std::string_view session_id, const SharedSession& shared, TimePoint now) {
    router_.AdoptSession(session_id, shared, now);
  }
  void SetSharedLeases(std::int32_t instance, std::string_view model, std::int32_t total) {
    router_.SetSharedLeases(instance, model, total);
  }

  const Router& router() const { return router_; }
  const RouterCounters& counters() const { return router_.counters(); }

 private:
  void Beat(Timer& timer, TimePoint now);

  Router router_;
  double heartbeat_s_;
  double overload_max_wait_s_;
  std::function<void(std::int32_t)> poll_;
  std::function<bool()> keep_going_;
};

const char* ToString(ControlPlane::Placement::Outcome o);

}  // namespace talaria
