// Where a returning call lands when cost placement decides: a continuation
// session-prefill admits mid-slot waits for no queue (Eq.1's dR), and a
// lease honoured by rank (RouterOptions::lease_honour) reserves admission
// without fixing the instance.
#include <gtest/gtest.h>

#include "router/router_fixture.h"

namespace talaria {
namespace {

// i0 runs m with session-prefill on, `queued_s` of m's work queued and s's
// prefix on device; i1 runs m idle and holds nothing of s.
class ReturnPlacementTest : public RouterTest {
 protected:
  int RouteS(const RouterOptions& o, bool session_prefill, double queued_s) {
    auto r = Make(o);
    InstanceTelemetry holder = Snap(++version_, 0, queued_s);
    holder.session_prefill = session_prefill;
    holder.sessions["s"] = CachedPrefix{"m", KvState::kDevice, 960};
    InstanceTelemetry idle = Snap(++version_, 0);
    idle.session_prefill = session_prefill;
    r->OnTelemetry(0, holder, AtSeconds(0));
    r->OnTelemetry(1, idle, AtSeconds(0));
    return r->Route(Req("s"), AtSeconds(0.1)).instance;
  }
};

// SP passes over the calls queued for the model's next slot start, so a
// deep queue at the holder does not push the continuation off its prefix.
// Without SP it waits behind that queue; with slot_wait off, dR keeps the
// queued work (the router before the round-aware dR).
TEST_F(ReturnPlacementTest, SessionPrefillEntryWaitsForNoQueue) {
  RouterOptions o;
  EXPECT_EQ(RouteS(o, /*session_prefill=*/true, /*queued_s=*/10), 0);
  EXPECT_EQ(RouteS(o, /*session_prefill=*/false, /*queued_s=*/10), 1);
  o.slot_wait = false;
  EXPECT_EQ(RouteS(o, /*session_prefill=*/true, /*queued_s=*/10), 1);
  // A short queue leaves it on its prefix either way.
  EXPECT_EQ(RouteS(o, /*session_prefill=*/true, /*queued_s=*/0.01), 0);
}

// s was served on i1, which has since rotated to n: m is resident there,
// s's prefix in host KV, and m's next prefill phase 8 s away. i0 runs m,
// idle. Routed by its lease the return goes back to i1 and waits; ranked,
// the lease reserves i1 but Eq.1 prefers recomputing the prefix on i0.
TEST_F(ReturnPlacementTest, RankedLeaseLetsCostPlacementLeaveARotatedHolder) {
  for (const LeaseHonour honour : {LeaseHonour::kRoute, LeaseHonour::kRank}) {
    SCOPED_TRACE(ToString(honour));
    RouterOptions o;
    o.lease_honour = honour;
    auto r = Make(o);
    Feed(*r, 2, 0);
    r->Route(Req("s", false), AtSeconds(0.1));
    r->OnCompleted("s", "m", 1, 1000, 10, AtSeconds(1.0));
    ASSERT_EQ(r->LeaseOf("s", AtSeconds(1.0)), 1);
    r->OnTelemetry(0, Snap(++version_, 1.1), AtSeconds(1.1));
    InstanceTelemetry rotated = Snap(++version_, 1.1);
    rotated.models[0].active = false;
    rotated.models[0].admit_wait_s = 8;
    rotated.models[1].active = true;
    rotated.models[1].queued_work_s = 4;
    rotated.sessions["s"] = CachedPrefix{"m", KvState::kHost, 960};
    r->OnTelemetry(1, rotated, AtSeconds(1.1));
    const RouteDecision d = r->Route(Req("s"), AtSeconds(1.2));
    const bool routed = honour == LeaseHonour::kRoute;
    EXPECT_EQ(d.instance, routed ? 1 : 0);
    EXPECT_EQ(d.lease_hit, routed);
    EXPECT_EQ(d.reason, routed ? RouteDecision::Reason::kLease : RouteDecision::Reason::kCost);
    EXPECT_EQ(r->counters().leases_consumed, routed ? 1 : 0);
    EXPECT_EQ(r->counters().leases_discarded, routed ? 0 : 1);
  }
}

// i1 serves s and its round is at Eq.5's bound. A ranked lease's return
// still lands there (the lease's unit was its admission) and counts as the
// lease's hit; once the lease has expired, Eq.5 turns the same call away.
TEST_F(ReturnPlacementTest, RankedLeaseWaivesRoundAdmissionAtItsInstance) {
  RouterOptions o;
  o.lease_honour = LeaseHonour::kRank;
  auto r = Make(o);
  Feed(*r, 2, 0);
  r->Route(Req("s", false), AtSeconds(0.1));
  r->OnCompleted("s", "m", 1, 1000, 10, AtSeconds(1.0));
  auto feed_full = [&](double at_s) {
    r->OnTelemetry(0, Snap(++version_, at_s), AtSeconds(at_s));
    InstanceTelemetry full = Snap(++version_, at_s);
    full.round_estimate_s = 18;  // at the bound
    full.session_prefill = true;
    full.sessions["s"] = CachedPrefix{"m", KvState::kDevice, 960};
    r->OnTelemetry(1, full, AtSeconds(at_s));
  };
  feed_full(1.1);
  const RouteDecision leased = r->Route(Req("s"), AtSeconds(1.2));
  EXPECT_EQ(leased.instance, 1);
  EXPECT_TRUE(leased.lease_hit);
  EXPECT_EQ(leased.reason, RouteDecision::Reason::kLease);
  EXPECT_EQ(r->counters().leases_consumed, 1);
  // The successor lease expires unused; the next return meets Eq.5 at i1.
  r->OnCompleted("s", "m", 1, 1100, 10, AtSeconds(2.0));
  feed_full(5.0);
  const RouteDecision late = r->Route(Req("s"), AtSeconds(5.1));
  EXPECT_EQ(late.instance, 0);
  EXPECT_FALSE(late.lease_hit);
  EXPECT_EQ(r->counters().leases_expired, 1);
}

}  // namespace
}  // namespace talaria
