// The placement-policy interface: given a call, its session's entry and the
// cluster view, pick an instance (or none: the overload policy). The full
// router (lease, then cost ranking; full_router_policy.h) and the baselines
// it is compared with (baselines.h) are each one class behind it; the Router
// owns the session table, leases and view they share, and records the pick
// (overlay, session entry). Adding a baseline is adding one small class and
// a RouterPolicy name.
//
// Policy code: takes `now` through the context, no clock, no I/O.
#pragma once

#include <cstdint>
#include <memory>

#include "core/time.h"
#include "router/cluster_view.h"
#include "router/router.h"
#include "router/session_table.h"

namespace talaria {

class LeaseBook;

// What a policy may read and count while placing one call.
struct PlacementContext {
  ClusterView& view;
  SessionEntry& entry;  // the call's session, already in the table
  const RouteRequest& request;
  std::int32_t model;    // the request's model, as a catalogue id
  double output_tokens;  // expected output of the call
  TimePoint now;
  const RouterOptions& options;
  RouterCounters& counters;
};

struct PolicyPick {
  std::int32_t instance = -1;  // -1: no instance can take the call
  RouteDecision::Reason reason = RouteDecision::Reason::kOverload;
  bool lease_hit = false;
  double cost_s = 0;  // Eq.1 cost of the pick (cost ranking only)
  bool opens_replica = false;  // cost ranking: the pick opens the model there (Eq.2)
  // OwnWork at the pick when the policy computed it on the way; < 0: the
  // router computes it.
  double own_work_s = -1;
  // No pick: whether some fresh candidate was seen (and failed admission).
  bool fresh_candidate_seen = false;
};

class PlacementPolicy {
 public:
  virtual ~PlacementPolicy() = default;
  virtual PolicyPick Place(const PlacementContext& ctx) = 0;
  // Whether completions install leases for this policy's returns.
  virtual bool InstallsLeases() const { return false; }
};

// The policy `policy` names; `leases` must outlive it.
std::unique_ptr<PlacementPolicy> MakePlacementPolicy(RouterPolicy policy, LeaseBook& leases);

// The own work of the call at instance i (its prefill past `cached` reused
// tokens and its decode, from the profile): what the overlay counts.
double OwnWork(const PlacementContext& ctx, std::int32_t i, std::int64_t cached);

}  // namespace talaria
