#include "router/full_router_policy.h"

namespace talaria {

PolicyPick FullRouterPolicy::Place(const PlacementContext& ctx) {
  PolicyPick pick;
  // Algorithm 1, lines 1-9: a live lease for this session and model.
  SessionEntry& entry = ctx.entry;
  if (entry.lease.id != 0) {
    const Lease lease = entry.lease;
    std::int64_t tokens = 0;
    const bool live = lease.expires > ctx.now && lease.model == ctx.model;
    const bool restorable = live && ctx.view.status(lease.instance).healthy &&
                            CachedState(ctx.view, lease.instance, entry, ctx.model, tokens) != KvState::kMissing;
    leases_.Drop(entry);  // consumed or discarded: routing never refreshes it
    if (restorable) {
      ++ctx.counters.leases_consumed;
      pick.instance = lease.instance;
      pick.reason = RouteDecision::Reason::kLease;
      pick.lease_hit = true;
      return pick;
    }
    if (lease.expires > ctx.now) {
      ++ctx.counters.leases_discarded;  // wrong model, unhealthy or lost prefix
    } else {
      ++ctx.counters.leases_expired;
    }
  }
  // Lines 10-25: cost placement.
  const CostRanking::Result ranked = ranking_.Rank(ctx);
  pick.instance = ranked.instance;
  pick.fresh_candidate_seen = ranked.any_fresh;
  if (ranked.instance >= 0) {
    pick.reason = RouteDecision::Reason::kCost;
    pick.cost_s = ranked.cost_s;
    pick.opens_replica = ranked.opens_replica;
    pick.own_work_s = ranked.own_work_s;
  }
  return pick;
}

}  // namespace talaria
