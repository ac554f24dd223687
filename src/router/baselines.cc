#include "router/baselines.h"

#include <limits>

namespace talaria {
namespace {

PolicyPick Baseline(const PlacementContext& ctx, std::int32_t pick) {
  PolicyPick p;
  p.instance = pick >= 0 ? pick : LeastPressure(ctx);
  if (p.instance >= 0) p.reason = RouteDecision::Reason::kBaseline;
  return p;
}

}  // namespace

std::int32_t LeastPressure(const PlacementContext& ctx) {
  std::int32_t best = -1;
  double best_load = std::numeric_limits<double>::infinity();
  for (std::int32_t i = 0; i < ctx.view.size(); ++i) {
    if (!ctx.view.Serves(i, ctx.model)) continue;
    if (!ctx.view.Fresh(i, ctx.now, ctx.options.stale_after_s)) {
      ++ctx.counters.stale_exclusions;
      continue;
    }
    const double load = ctx.view.Load(i, ctx.options.lease_unit_s);
    if (load < best_load) best = i, best_load = load;
  }
  return best;
}

PolicyPick LeastPressurePolicy::Place(const PlacementContext& ctx) { return Baseline(ctx, -1); }

PolicyPick SessionStickyPolicy::Place(const PlacementContext& ctx) {
  const std::int32_t pin = ctx.entry.first_instance;
  const bool pinned = pin >= 0 && ctx.view.status(pin).healthy && ctx.view.Serves(pin, ctx.model);
  return Baseline(ctx, pinned ? pin : -1);
}

PolicyPick RoundRobinPolicy::Place(const PlacementContext& ctx) {
  const std::int32_t n = ctx.view.size();
  std::int32_t pick = -1;
  for (std::int32_t k = 0; k < n && pick < 0; ++k) {
    const auto i = static_cast<std::int32_t>((next_ + static_cast<std::uint32_t>(k)) % static_cast<std::uint32_t>(n));
    if (ctx.view.Serves(i, ctx.model) && ctx.view.Fresh(i, ctx.now, ctx.options.stale_after_s)) {
      pick = i;
      next_ = static_cast<std::uint32_t>(i + 1);
    }
  }
  return Baseline(ctx, pick);
}

PolicyPick PrefixAwarePolicy::Place(const PlacementContext& ctx) {
  const std::int32_t least = LeastPressure(ctx);
  std::int32_t best = -1;
  std::int64_t best_tokens = 0;
  for (std::int32_t i = 0; i < ctx.view.size(); ++i) {
    if (!ctx.view.Serves(i, ctx.model) || !ctx.view.Fresh(i, ctx.now, ctx.options.stale_after_s)) continue;
    std::int64_t tokens = 0;
    if (CachedState(ctx.view, i, ctx.entry, ctx.model, tokens) != KvState::kMissing && tokens > best_tokens) {
      best = i, best_tokens = tokens;
    }
  }
  std::int32_t pick = least;
  if (best >= 0 && least >= 0) {
    const double lb = ctx.view.Load(best, ctx.options.lease_unit_s);
    const double ll = ctx.view.Load(least, ctx.options.lease_unit_s);
    if (lb <= ll * ctx.options.prefix_imbalance + ctx.options.prefix_imbalance_floor_s) pick = best;
  }
  return Baseline(ctx, pick);
}

}  // namespace talaria
