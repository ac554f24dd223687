// The full router's placement (paper §3.3, Algorithm 1): a returning call
// with a live lease for its model goes back to the lease's instance if that
// instance is healthy and still holds the prefix on device or in host KV;
// the lease is consumed, or else discarded (routing never refreshes one).
// With RouterOptions::lease_replica_check (off by default), a refinement: a
// lease whose model is closed at its instance and has no work there would
// open the model for this call alone, and on a full instance close a model
// that has work, which then opens again: that is a new replica, which Eq.2
// decides, so the lease is discarded and cost placement (where the held
// prefix still counts in Eq.1) picks the instance. Otherwise the call is
// placed by cost (cost_ranking.h). With RouterOptions::lease_honour = kRank
// a live lease is an admission reservation rather than a route: the return
// is placed by cost with Eq.5 waived at the lease's instance, and the lease
// counts as consumed where the return lands there. Its completions install
// the session's successor lease.
#pragma once

#include "router/cost_ranking.h"
#include "router/lease_book.h"
#include "router/placement_policy.h"

namespace talaria {

class FullRouterPolicy final : public PlacementPolicy {
 public:
  // `leases` must outlive the policy.
  explicit FullRouterPolicy(LeaseBook& leases) : leases_(leases) {}
  PolicyPick Place(const PlacementContext& ctx) override;
  bool InstallsLeases() const override { return true; }

 private:
  // Lines 10-25 of Algorithm 1; `round_exempt` as CostRanking::Rank's.
  PolicyPick RankByCost(const PlacementContext& ctx, std::int32_t round_exempt = -1);

  LeaseBook& leases_;
  CostRanking ranking_;
};

}  // namespace talaria
