#include "driver/control_plane.h"

#include "core/error.h"

namespace talaria {
namespace {

std::vector<std::string> Names(const ClusterConfig& c) {
  std::vector<std::string> out;
  for (const auto& i : c.instances) out.push_back(i.name);
  return out;
}

std::vector<std::int32_t> Tps(const ClusterConfig& c) {
  std::vector<std::int32_t> out;
  for (const auto& i : c.instances) out.push_back(i.tp);
  return out;
}

}  // namespace

const char* ToString(ControlPlane::Placement::Outcome o) {
  switch (o) {
    case ControlPlane::Placement::Outcome::kPlaced: return "placed";
    case ControlPlane::Placement::Outcome::kWait: return "wait";
    case ControlPlane::Placement::Outcome::kRejected: return "rejected";
  }
  return "?";
}

ControlPlane::ControlPlane(const ClusterConfig& cluster, const ProfileSet& profiles)
    : router_(cluster.router, Names(cluster), Tps(cluster), profiles),
      heartbeat_s_(cluster.heartbeat_s),
      overload_max_wait_s_(cluster.overload_max_wait_s) {
  if (!(heartbeat_s_ > 0)) throw InputError(cluster.source, "[router] heartbeat_s must be greater than 0");
}

void ControlPlane::StartHeartbeat(Timer& timer, TimePoint now, std::function<void(std::int32_t)> poll,
                                  std::function<bool()> keep_going) {
  poll_ = std::move(poll);
  keep_going_ = std::move(keep_going);
  Beat(timer, now);
}

void ControlPlane::Beat(Timer& timer, TimePoint now) {
  for (std::size_t i = 0; i < instances(); ++i) poll_(static_cast<std::int32_t>(i));
  const TimePoint next = now + FromSeconds(heartbeat_s_);
  timer.At(next, [this, &timer, next] {
    if (keep_going_()) Beat(timer, next);
  });
}

void ControlPlane::OnTelemetry(std::int32_t instance, const InstanceTelemetry& snapshot, TimePoint now) {
  router_.SetHealthy(instance, true);
  router_.OnTelemetry(instance, snapshot, now);
}

void ControlPlane::OnUnreachable(std::int32_t instance) {
  router_.SetHealthy(instance, false);
}

ControlPlane::Placement ControlPlane::Place(const RouteRequest& request, TimePoint arrived, TimePoint now,
                                            bool may_wait) {
  Placement p;
  p.decision = router_.Route(request, now);
  if (p.decision.instance >= 0) {
    p.outcome = Placement::Outcome::kPlaced;
    return p;
  }
  const double waited_s = ToSeconds(now - arrived);
  // The next try, one heartbeat from now, must stay within the bound.
  if (may_wait && p.decision.overload != RouteDecision::Overload::kNoInstance &&
      waited_s + heartbeat_s_ <= overload_max_wait_s_) {
    p.outcome = Placement::Outcome::kWait;
    p.retry_at = now + FromSeconds(heartbeat_s_);
    return p;
  }
  // Fresh instances could take it, but none passed admission in time: the
  // cheapest of them takes it rather than the call being lost.
  if (p.decision.overload == RouteDecision::Overload::kAdmission) {
    RouteRequest last = request;
    last.last_resort = true;
    const RouteDecision d = router_.Route(last, now);
    if (d.instance >= 0) {
      p.decision = d;
      p.outcome = Placement::Outcome::kPlaced;
      p.last_resort = true;
      return p;
    }
  }
  p.outcome = Placement::Outcome::kRejected;
  p.waited_s = waited_s;
  return p;
}

}  // namespace talaria
