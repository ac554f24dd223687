// Cost placement (paper §3.3, Algorithm 1 lines 10-25): over instances with
// fresh telemetry, minimise
//   Cost = dR (own queue [+ wait for the model's next P phase on a cold
//             instance, unless session-prefill admits it] + prefill + decode)
//        + C_kv (0 / restore / recompute)
//        + C_act (0 / advertised switch / full open)          (Eq.1)
// keeping only candidates whose predicted round fits gamma * T_TTFT (Eq.5)
// and whose KV fits, and, where the model would need a new replica, only if
//   gain > T_swap + mu_j * dW_m + nu_m                        (Eq.2).
// One pass computes Eq.1 for every candidate and keeps the cheapest resident
// one; candidates that would need a new replica are set aside with their
// cost, and Eq.2 (which needs the best resident cost) decides among them
// afterwards. A candidate dearer than the cheapest resident one so far is
// dropped before its admission checks (it cannot be picked). The pass reads
// the model's dense RankRows (router/cluster_view.h), whose
// request-independent sums are formed when telemetry or a placement changes
// them. Scratch is kept between decisions: a decision allocates nothing once
// warm.
//
// Policy code: takes `now` through the context, no clock, no I/O.
#pragma once

#include <cstdint>
#include <vector>

#include "core/time.h"
#include "router/placement_policy.h"

namespace talaria {

class CostRanking {
 public:
  struct Result {
    std::int32_t instance = -1;  // -1: no candidate passed the checks
    double cost_s = 0;
    bool any_fresh = false;  // some candidate had fresh telemetry
    bool opens_replica = false;  // the pick does not hold the model open: Eq.2 admitted a new replica
    // The pick's own work as the overlay counts it (OwnWork: unscaled, its
    // prefill past the tokens it reuses there, and its decode).
    double own_work_s = 0;
  };
  // `round_exempt`: an instance Eq.5 does not turn the call away from (a
  // ranked lease's, whose held admission unit was this call's); -1: none.
  Result Rank(const PlacementContext& ctx, std::int32_t round_exempt = -1);

 private:
  // Profile-dependent cost terms of the current request, computed once per
  // distinct profile per decision (a cluster has few).
  struct ProfileTerms {
    const ModelProfile* profile = nullptr;
    double extend_s = 0;     // prefill of the tokens past the reusable prefix
    double recompute_s = 0;  // prefill of the reusable prefix itself
    double decode_s = 0;     // the call's own decode, at batch 1
    double kv_bytes = 0;     // KV the call needs per rank (prompt + expected output)
  };
  // A candidate that would need a new replica of the model.
  struct ReplicaCandidate {
    std::int32_t instance;
    double cost_s;
    double cost_without_activation_s;
    double replica_threshold_s;  // Eq.2's right-hand side there
    double prefill_s;  // unscaled, past the reused tokens (0 reused: the whole prompt's, found after the pass)
    bool reuses;
  };
  const ProfileTerms& TermsFor(const ModelProfile* p, const RouteRequest& r, double output_tokens);

  std::vector<ReplicaCandidate> replicas_;  // fresh, admissible, not resident
  std::vector<std::int32_t> holders_;       // instances holding the session's prefix
  std::vector<ProfileTerms> terms_;
  double stale_after_s_ = -1;  // RouterOptions::stale_after_s, as stale_after_
  Duration stale_after_{};
};

}  // namespace talaria
