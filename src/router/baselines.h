// The baselines the full router is compared with (paper §5.3, DESIGN.md
// §3): they share the session table, telemetry and overlay, but keep no
// leases and rank by load, a session pin, rotation or cached prefix.
//   least-pressure  the fresh instance serving the model with the least
//                   load (queued work, overlay, lease units); ties go to the
//                   lowest index;
//   session-sticky  a session stays on the instance of its first call while
//                   that is healthy and serves the model;
//   round-robin     fresh serving instances in turn;
//   prefix-aware    the instance holding the most of the session's prefix,
//                   unless its load exceeds the least loaded one's by more
//                   than prefix_imbalance times plus prefix_imbalance_floor_s
//                   (as today's KV-aware gateways do).
// Each falls back to least-pressure when its own choice finds none.
#pragma once

#include <cstdint>

#include "router/placement_policy.h"

namespace talaria {

class LeastPressurePolicy final : public PlacementPolicy {
 public:
  PolicyPick Place(const PlacementContext& ctx) override;
};

class SessionStickyPolicy final : public PlacementPolicy {
 public:
  PolicyPick Place(const PlacementContext& ctx) override;
};

class RoundRobinPolicy final : public PlacementPolicy {
 public:
  PolicyPick Place(const PlacementContext& ctx) override;

 private:
  std::uint32_t next_ = 0;
};

class PrefixAwarePolicy final : public PlacementPolicy {
 public:
  PolicyPick Place(const PlacementContext& ctx) override;
};

// The least loaded fresh instance serving the call's model (lowest index on
// ties), or -1; counts the stale ones it passes over.
std::int32_t LeastPressure(const PlacementContext& ctx);

}  // namespace talaria
