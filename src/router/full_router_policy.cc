#include "router/full_router_policy.h"

namespace talaria {

namespace {

// Honouring a lease to `instance` would open the call's model there for it
// alone (closed, no work of its own there) and close a model with work.
bool OpensAReplica(const PlacementContext& ctx, std::int32_t instance) {
  const auto i = static_cast<std::size_t>(instance);
  const Candidate& c = ctx.view.Candidates(ctx.model)[i];
  return !ctx.view.Rows(ctx.model)[i].resident && c.forced_reopen_s > 0 && c.queued_work_s <= 0;
}

}  // namespace

PolicyPick FullRouterPolicy::Place(const PlacementContext& ctx) {
  PolicyPick pick;
  // Algorithm 1, lines 1-9: a live lease for this session and model.
  SessionEntry& entry = ctx.entry;
  if (entry.lease.id != 0) {
    const Lease lease = entry.lease;
    std::int64_t tokens = 0;
    const bool live = lease.expires > ctx.now && lease.model == ctx.model;
    const bool honoured = live && ctx.view.status(lease.instance).healthy &&
                            CachedState(ctx.view, lease.instance, entry, ctx.model, tokens) != KvState::kMissing &&
                            !(ctx.options.lease_replica_check && OpensAReplica(ctx, lease.instance));
    leases_.Drop(entry);  // consumed or discarded: routing never refreshes it
    if (honoured) {
      if (ctx.options.lease_honour == LeaseHonour::kRank) {
        // The lease reserved admission: cost placement decides, with the
        // lease's instance exempt from Eq.5 (its unit, dropped above, was
        // this call's).
        pick = RankByCost(ctx, lease.instance);
        if (pick.instance != lease.instance) {
          ++ctx.counters.leases_discarded;  // Eq.1 found a cheaper place (or none)
          return pick;
        }
      }
      ++ctx.counters.leases_consumed;
      pick.instance = lease.instance;
      pick.reason = RouteDecision::Reason::kLease;
      pick.lease_hit = true;
      return pick;
    }
    if (lease.expires > ctx.now) {
      ++ctx.counters.leases_discarded;  // wrong model, unhealthy, lost prefix or a replica open
    } else {
      ++ctx.counters.leases_expired;
    }
  }
  // Lines 10-25: cost placement.
  return RankByCost(ctx);
}

PolicyPick FullRouterPolicy::RankByCost(const PlacementContext& ctx, std::int32_t round_exempt) {
  PolicyPick pick;
  const CostRanking::Result ranked = ranking_.Rank(ctx, round_exempt);
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
