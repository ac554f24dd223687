#include "router/placement_policy.h"

#include "router/baselines.h"
#include "router/full_router_policy.h"
#include "profile/step_cost.h"

namespace talaria {

std::unique_ptr<PlacementPolicy> MakePlacementPolicy(RouterPolicy policy, LeaseBook& leases) {
  switch (policy) {
    case RouterPolicy::kFull: return std::make_unique<FullRouterPolicy>(leases);
    case RouterPolicy::kLeastPressure: return std::make_unique<LeastPressurePolicy>();
    case RouterPolicy::kSessionSticky: return std::make_unique<SessionStickyPolicy>();
    case RouterPolicy::kRoundRobin: return std::make_unique<RoundRobinPolicy>();
    case RouterPolicy::kPrefixAware: return std::make_unique<PrefixAwarePolicy>();
  }
  return nullptr;
}

double OwnWork(const PlacementContext& ctx, std::int32_t i, std::int64_t cached) {
  const ModelProfile* p = ctx.view.ProfileOf(i, ctx.model);
  if (p == nullptr) return 0.0;
  return step_cost::CallWork(*p, ctx.request.prompt_tokens, cached, ctx.output_tokens);
}

}  // namespace talaria
