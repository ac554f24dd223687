#include "router/router.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "router/router_fixture.h"

namespace talaria {
namespace {

TEST_F(RouterTest, LeaseExpiresAtExactlyTau) {
  auto r = Make({});
  Feed(*r, 2, 0);
  ASSERT_EQ(r->Route(Req("s", false), AtSeconds(0.1)).instance, 0);
  r->OnCompleted("s", "m", 1, 1000, 10, AtSeconds(10));  // served on i1
  EXPECT_EQ(r->LeaseOf("s", AtSeconds(10.999)), 1);
  EXPECT_EQ(r->LeaseOf("s", AtSeconds(11.0)), -1);
  Feed(*r, 2, 11.0);
  const RouteDecision d = r->Route(Req("s"), AtSeconds(11.0));
  EXPECT_FALSE(d.lease_hit);
  EXPECT_EQ(d.reason, RouteDecision::Reason::kCost);
  EXPECT_EQ(r->counters().leases_expired, 1);
  EXPECT_EQ(r->counters().leases_consumed, 0);
}

TEST_F(RouterTest, LiveLeaseRoutesBackAndSuccessorOnlyAfterCompletion) {
  RouterOptions o;
  o.lease_honour = LeaseHonour::kRoute;  // the paper's Algorithm 1
  auto r = Make(o);
  Feed(*r, 2, 0);
  r->Route(Req("s", false), AtSeconds(0.1));
  r->OnCompleted("s", "m", 1, 1000, 10, AtSeconds(1.0));
  const RouteDecision d = r->Route(Req("s"), AtSeconds(1.4));
  EXPECT_TRUE(d.lease_hit);
  EXPECT_EQ(d.instance, 1);
  EXPECT_EQ(d.reason, RouteDecision::Reason::kLease);
  EXPECT_EQ(r->LeaseOf("s", AtSeconds(1.5)), -1);  // consumed; routing never refreshes it
  r->OnCompleted("s", "m", 1, 1100, 10, AtSeconds(2.0));
  EXPECT_EQ(r->LeaseOf("s", AtSeconds(2.5)), 1);  // the successor
  EXPECT_EQ(r->counters().leases_installed, 2);
  EXPECT_EQ(r->counters().leases_consumed, 1);
}

TEST_F(RouterTest, UnhealthyInstanceDiscardsTheLease) {
  auto r = Make({});
  Feed(*r, 2, 0);
  r->Route(Req("s", false), AtSeconds(0.1));
  r->OnCompleted("s", "m", 1, 1000, 10, AtSeconds(1.0));
  r->OnTelemetry(0, Snap(++version_, 1.1), AtSeconds(1.1));
  InstanceTelemetry holds = Snap(++version_, 1.1);
  holds.sessions["s"] = CachedPrefix{"m", KvState::kDevice, 1000};  // the prefix is there
  r->OnTelemetry(1, holds, AtSeconds(1.1));
  r->SetHealthy(1, false);
  const RouteDecision d = r->Route(Req("s"), AtSeconds(1.2));
  EXPECT_FALSE(d.lease_hit);
  EXPECT_EQ(d.instance, 0);
  EXPECT_EQ(r->counters().leases_discarded, 1);
}

TEST_F(RouterTest, MissingPrefixDiscardsTheLease) {
  auto r = Make({});
  Feed(*r, 2, 0);
  r->Route(Req("s", false), AtSeconds(0.1));
  r->OnCompleted("s", "m", 1, 1000, 10, AtSeconds(1.0));
  // A snapshot taken after the completion that no longer lists the session.
  r->OnTelemetry(1, Snap(++version_, 1.1), AtSeconds(1.1));
  const RouteDecision d = r->Route(Req("s"), AtSeconds(1.2));
  EXPECT_FALSE(d.lease_hit);
  EXPECT_EQ(r->counters().leases_discarded, 1);
  // And one that lists it host-restorable keeps the lease usable.
  r->Route(Req("t", false), AtSeconds(1.3));
  r->OnCompleted("t", "m", 1, 1000, 10, AtSeconds(1.4));
  InstanceTelemetry snap = Snap(++version_, 1.5);
  snap.sessions["t"] = CachedPrefix{"m", KvState::kHost, 960};
  r->OnTelemetry(1, snap, AtSeconds(1.5));
  EXPECT_TRUE(r->Route(Req("t"), AtSeconds(1.6)).lease_hit);
}

// lease_replica_check: a lease to an instance where its model is closed
// and has no work would open the model there for this call alone; when that
// open closes a model with work (forced_reopen_s > 0) it is a new replica,
// which Eq.2 decides: the lease is discarded and cost placement picks. With
// work of its own there (the model opens at its slot anyway), an open that
// closes nothing busy, or the check off (Algorithm 1), the lease holds.
TEST_F(RouterTest, ALeaseThatWouldOpenItsModelForItAloneGoesToCostPlacement) {
  struct Case {
    bool check;
    double forced_reopen_s;
    double m_work_s;
    bool hit;
  };
  for (const Case c : {Case{true, 10, 0, false}, Case{true, 0, 0, true}, Case{true, 10, 3, true},
                       Case{false, 10, 0, true}}) {
    SCOPED_TRACE(::testing::Message() << "check " << c.check << ", forced " << c.forced_reopen_s << ", m's work "
                                      << c.m_work_s);
    RouterOptions o;
    o.lease_honour = LeaseHonour::kRoute;  // the paper's Algorithm 1, which the check amends
    o.lease_replica_check = c.check;
    auto r = Make(o);
    Feed(*r, 2, 0);
    r->Route(Req("s", false), AtSeconds(0.1));
    r->OnCompleted("s", "m", 1, 1000, 10, AtSeconds(1.0));
    r->OnTelemetry(0, Snap(++version_, 1.1), AtSeconds(1.1));
    InstanceTelemetry closed = Snap(++version_, 1.1, c.m_work_s, /*m_resident=*/false);
    closed.models[0].forced_reopen_s = c.forced_reopen_s;
    closed.models[1].queued_work_s = 5;  // n, open, has work
    closed.sessions["s"] = CachedPrefix{"m", KvState::kHost, 960};
    r->OnTelemetry(1, closed, AtSeconds(1.1));
    const RouteDecision d = r->Route(Req("s"), AtSeconds(1.2));
    EXPECT_EQ(d.lease_hit, c.hit);
    EXPECT_EQ(d.reason, c.hit ? RouteDecision::Reason::kLease : RouteDecision::Reason::kCost);
    EXPECT_EQ(r->counters().leases_discarded, c.hit ? 0 : 1);
  }
}

// Delta snapshots name only what changed; a session they do not name keeps
// its place in the index, and a kMissing entry removes it.
TEST_F(RouterTest, DeltaSnapshotsUpdateOnlyTheSessionsTheyName) {
  RouterOptions o;
  o.policy = RouterPolicy::kPrefixAware;  // follows a held prefix, else the lower index
  auto r = Make(o);
  Feed(*r, 2, 0);
  EXPECT_FALSE(r->WantsFullSnapshot(1));
  InstanceTelemetry full = Snap(++version_, 0.5);
  full.sessions["s"] = CachedPrefix{"m", KvState::kDevice, 900};
  full.sessions["t"] = CachedPrefix{"m", KvState::kHost, 900};
  r->OnTelemetry(1, full, AtSeconds(0.5));
  InstanceTelemetry delta = Snap(++version_, 0.6);
  delta.sessions_delta = true;
  delta.sessions_base = full.version;
  delta.sessions["t"] = CachedPrefix{"", KvState::kMissing, 0};
  r->OnTelemetry(1, delta, AtSeconds(0.6));
  EXPECT_FALSE(r->WantsFullSnapshot(1));
  // "s" is still held on instance 1 (not named), "t" no longer.
  EXPECT_EQ(r->Route(Req("s"), AtSeconds(0.7)).instance, 1);
  EXPECT_EQ(r->Route(Req("t"), AtSeconds(0.7)).instance, 0);
}

// A delta that does not follow the last snapshot received (one was lost)
// cannot be applied: the index keeps the old entries and the router asks
// for a full snapshot.
TEST_F(RouterTest, ADeltaThatDoesNotFollowAsksForAFullSnapshot) {
  RouterOptions o;
  o.policy = RouterPolicy::kPrefixAware;
  auto r = Make(o);
  Feed(*r, 2, 0);
  InstanceTelemetry full = Snap(++version_, 0.5);
  full.sessions["s"] = CachedPrefix{"m", KvState::kDevice, 900};
  r->OnTelemetry(1, full, AtSeconds(0.5));
  ++version_;  // lost on the way
  InstanceTelemetry delta = Snap(++version_, 0.7);
  delta.sessions_delta = true;
  delta.sessions_base = version_ - 1;
  delta.sessions["s"] = CachedPrefix{"", KvState::kMissing, 0};
  r->OnTelemetry(1, delta, AtSeconds(0.7));
  EXPECT_TRUE(r->WantsFullSnapshot(1));
  EXPECT_EQ(r->Route(Req("s"), AtSeconds(0.8)).instance, 1);  // not applied
  r->OnTelemetry(0, Snap(++version_, 0.9), AtSeconds(0.9));
  r->OnTelemetry(1, Snap(++version_, 0.9), AtSeconds(0.9));  // full, without "s"
  EXPECT_FALSE(r->WantsFullSnapshot(1));
  EXPECT_EQ(r->Route(Req("s"), AtSeconds(1.0)).instance, 0);
}

TEST_F(RouterTest, StaleSnapshotExcludesInstanceFromNewPlacements) {
  RouterOptions o;
  o.stale_after_s = 1.0;
  auto r = Make(o);
  r->OnTelemetry(0, Snap(++version_, 0.0), AtSeconds(0));
  r->OnTelemetry(1, Snap(++version_, 2.0, /*queued_m_s=*/5.0), AtSeconds(2.0));
  // At t=2.5, i0's snapshot is 2.5 s old: only i1 is a candidate, though busier.
  EXPECT_EQ(r->Route(Req("a", false), AtSeconds(2.5)).instance, 1);
  EXPECT_GT(r->counters().stale_exclusions, 0);
  // No fresh instance at all: the overload policy, with its reason.
  const RouteDecision none = r->Route(Req("b", false), AtSeconds(10));
  EXPECT_EQ(none.instance, -1);
  EXPECT_EQ(none.overload, RouteDecision::Overload::kStale);
  EXPECT_EQ(r->counters().overloads, 1);
  EXPECT_EQ(r->Route(Req("c", false, "unknown-model"), AtSeconds(10)).overload,
            RouteDecision::Overload::kNoInstance);
}

TEST_F(RouterTest, OverlayChargesCountBeforeTheNextSnapshot) {
  auto r = Make({});
  Feed(*r, 2, 0);
  EXPECT_EQ(r->Route(Req("a", false), AtSeconds(0.1)).instance, 0);  // tie: lowest index
  EXPECT_EQ(r->Route(Req("b", false), AtSeconds(0.1)).instance, 1);  // a's work counts on i0
  EXPECT_EQ(r->Route(Req("c", false), AtSeconds(0.1)).instance, 0);
  // A snapshot taken after the forwards replaces the overlay.
  Feed(*r, 2, 0.2);
  EXPECT_EQ(r->Route(Req("d", false), AtSeconds(0.3)).instance, 0);
}

// A live lease holds one admission unit (lease_unit_s, 0.5 s) in its
// model's next slot on its instance: new calls for that model see it ahead
// of them there, calls for another model do not, but it lengthens the round
// Eq.5 checks for every model.
TEST_F(RouterTest, ALeaseChargesItsModelsSlotAndLengthensTheRound) {
  auto r = Make({});
  Feed(*r, 2, 0);
  ASSERT_EQ(r->Route(Req("s", false), AtSeconds(0.1)).instance, 0);
  Feed(*r, 2, 0.2);                                       // s's forward is in the snapshot
  r->OnCompleted("s", "m", 0, 1000, 10, AtSeconds(0.5));  // s's lease: m on i0
  EXPECT_EQ(r->Route(Req("y", false, "n"), AtSeconds(0.6)).instance, 0);  // n: a tie, lowest index
  EXPECT_EQ(r->Route(Req("x", false, "m"), AtSeconds(0.6)).instance, 1);  // m: the unit counts on i0

  auto busy = Make({});
  Feed(*busy, 2, 0);
  ASSERT_EQ(busy->Route(Req("s", false), AtSeconds(0.1)).instance, 0);
  for (int i = 0; i < 2; ++i) {
    InstanceTelemetry t = Snap(++version_, 0.2);
    t.round_estimate_s = 15.3;  // bound 18 s; n's own work 2 s and its switch 0.5 s
    busy->OnTelemetry(i, t, AtSeconds(0.2));
  }
  busy->OnCompleted("s", "m", 0, 1000, 10, AtSeconds(0.5));
  EXPECT_EQ(busy->Route(Req("y", false, "n"), AtSeconds(0.6)).instance, 1);  // i0's round: 18.3 s
}

TEST_F(RouterTest, TiesBreakToTheLowestIndex) {
  auto r = Make({}, 4);
  Feed(*r, 4, 0);
  for (int k = 0; k < 3; ++k) {
    auto again = Make({}, 4);
    Feed(*again, 4, 0);
    EXPECT_EQ(again->Route(Req("x", false), AtSeconds(0.1)).instance, 0);
  }
}

// Eq.2: a new replica of m on i1 only when the gain (what placing on i0, the
// only instance with m open, would cost extra) beats T_swap + mu*dW + nu.
TEST_F(RouterTest, ReplicaRuleAcceptsAndRejectsAroundItsThreshold) {
  RouterOptions o;
  o.replica_penalty_s = 2.0;
  o.hbm_price_s_per_gib = 0.0;  // threshold = full open 10 s + nu 2 s = 12 s
  for (double queue : {11.5, 12.5}) {
    SCOPED_TRACE(queue);
    auto r = Make(o);
    r->OnTelemetry(0, Snap(++version_, 0, queue, /*m_resident=*/true), AtSeconds(0));
    r->OnTelemetry(1, Snap(++version_, 0, 0, /*m_resident=*/false), AtSeconds(0));
    const RouteDecision d = r->Route(Req("s", false), AtSeconds(0.1));
    EXPECT_EQ(d.instance, queue > 12.0 ? 1 : 0);
    EXPECT_EQ(d.opens_replica, queue > 12.0);  // the decisions metric's "open"
  }
}


// Eq.2 on a full instance: i1 has n open and says opening m there would
// close n while n has work (forced_reopen_s, n's full open: 10 s), so the
// replica's threshold gains it: 12 s becomes 22 s. With nothing busy to
// close (0), it stays 12 s.
TEST_F(RouterTest, AReplicaThatClosesABusyModelPaysItsReopen) {
  RouterOptions o;
  o.replica_penalty_s = 2.0;
  o.hbm_price_s_per_gib = 0.0;
  for (const double n_work : {0.0, 3.0}) {
    for (const double queue : {12.5, 22.5}) {
      SCOPED_TRACE(::testing::Message() << "n's work " << n_work << ", queue " << queue);
      auto r = Make(o);
      r->OnTelemetry(0, Snap(++version_, 0, queue, /*m_resident=*/true), AtSeconds(0));
      InstanceTelemetry full = Snap(++version_, 0, 0, /*m_resident=*/false, /*n_resident=*/true);
      full.models[1].queued_work_s = n_work;
      full.models[0].forced_reopen_s = n_work > 0 ? 10.0 : 0.0;
      r->OnTelemetry(1, full, AtSeconds(0));
      const bool opens = queue > (n_work > 0 ? 22.0 : 12.0);
      const RouteDecision d = r->Route(Req("s", false), AtSeconds(0.1));
      EXPECT_EQ(d.instance, opens ? 1 : 0);
      EXPECT_EQ(d.opens_replica, opens);
    }
  }
}

// A new replica on i0 that costs exactly what the resident i1 does wins the
// tie by its lower index, as resident candidates do among themselves (Eq.2
// is decided after the cheapest resident one is known, so the two kinds of
// candidate are compared apart).
TEST_F(RouterTest, AReplicaTiesWithAResidentCandidateByIndex) {
  RouterOptions o;
  o.replica_penalty_s = 0.0;
  o.hbm_price_s_per_gib = 0.0;  // threshold = full open 10 s; gain = 10.5 s
  // i0 would open m (10 s) and switch into it (0.5 s); i1 has m active
  // behind a queue of 10.5 s (10.4 s: i1 is cheaper).
  for (double queue : {10.5, 10.4}) {
    SCOPED_TRACE(queue);
    auto r = Make(o);
    r->OnTelemetry(0, Snap(++version_, 0, 0, /*m_resident=*/false), AtSeconds(0));
    r->OnTelemetry(1, Snap(++version_, 0, queue, /*m_resident=*/true), AtSeconds(0));
    const RouteDecision d = r->Route(Req("s", false), AtSeconds(0.1));
    EXPECT_EQ(d.instance, queue == 10.5 ? 0 : 1);
    EXPECT_EQ(d.opens_replica, queue == 10.5);
  }
}
TEST_F(RouterTest, BaselinesPickAsScripted) {
  {
    RouterOptions o;
    o.policy = RouterPolicy::kLeastPressure;
    auto r = Make(o, 3);
    r->OnTelemetry(0, Snap(++version_, 0, 3.0), AtSeconds(0));
    r->OnTelemetry(1, Snap(++version_, 0, 1.0), AtSeconds(0));
    r->OnTelemetry(2, Snap(++version_, 0, 2.0), AtSeconds(0));
    EXPECT_EQ(r->Route(Req("a", false), AtSeconds(0.1)).instance, 1);
  }
  {
    RouterOptions o;
    o.policy = RouterPolicy::kSessionSticky;
    auto r = Make(o, 2);
    Feed(*r, 2, 0, 0, 5);
    EXPECT_EQ(r->Route(Req("a", false), AtSeconds(0.1)).instance, 0);
    Feed(*r, 2, 0.2, 50, 0);  // i0 is now much busier: sticky stays
    EXPECT_EQ(r->Route(Req("a"), AtSeconds(0.3)).instance, 0);
  }
  {
    RouterOptions o;
    o.policy = RouterPolicy::kRoundRobin;
    auto r = Make(o, 3);
    Feed(*r, 3, 0);
    std::vector<int> picks;
    for (int k = 0; k < 4; ++k) picks.push_back(r->Route(Req("s" + std::to_string(k), false), AtSeconds(0.1)).instance);
    EXPECT_EQ(picks, (std::vector<int>{0, 1, 2, 0}));
  }
  {
    RouterOptions o;
    o.policy = RouterPolicy::kPrefixAware;
    o.prefix_imbalance = 1.5;
    o.prefix_imbalance_floor_s = 1.0;
    auto r = Make(o, 2);
    InstanceTelemetry with_prefix = Snap(++version_, 0, 2.0);
    with_prefix.sessions["s"] = CachedPrefix{"m", KvState::kDevice, 896};
    r->OnTelemetry(0, Snap(++version_, 0, 1.0), AtSeconds(0));
    r->OnTelemetry(1, with_prefix, AtSeconds(0));
    EXPECT_EQ(r->Route(Req("s"), AtSeconds(0.1)).instance, 1);  // 2 <= 1 * 1.5 + 1
    InstanceTelemetry busy = Snap(++version_, 0.2, 9.0);
    busy.sessions["s"] = CachedPrefix{"m", KvState::kDevice, 896};
    r->OnTelemetry(0, Snap(++version_, 0.2, 1.0), AtSeconds(0.2));
    r->OnTelemetry(1, busy, AtSeconds(0.2));
    EXPECT_EQ(r->Route(Req("s"), AtSeconds(0.3)).instance, 0);  // too imbalanced
  }
}

// Eq.5: a candidate whose predicted round would pass gamma * T_TTFT is
// filtered; with none left the overload policy says why.
TEST_F(RouterTest, RoundAdmissionFiltersAndReportsAdmissionOverload) {
  auto r = Make({}, 1);
  InstanceTelemetry busy = Snap(++version_, 0);
  busy.round_estimate_s = 17.5;  // bound 18 s; the call's own work is 2 s
  r->OnTelemetry(0, busy, AtSeconds(0));
  const RouteDecision d = r->Route(Req("a", false), AtSeconds(0.1));
  EXPECT_EQ(d.instance, -1);
  EXPECT_EQ(d.overload, RouteDecision::Overload::kAdmission);
  RouterOptions off;
  off.admission_control = false;
  auto open = Make(off, 1);
  open->OnTelemetry(0, busy, AtSeconds(0));
  EXPECT_EQ(open->Route(Req("a", false), AtSeconds(0.1)).instance, 0);
}

// A cold instance admits a new call at the model's next P phase: with
// slot_wait the router counts the advertised wait (less the time since the
// snapshot); a continuation whose prefix is cached on the active model
// enters mid-slot by session-prefill and does not wait.
TEST_F(RouterTest, SlotWaitSteersNewCallsButNotSessionPrefill) {
  auto snaps = [&](double wait0_s, double at_s) {
    InstanceTelemetry a = Snap(++version_, at_s);
    a.models[0].admit_wait_s = wait0_s;
    a.session_prefill = true;
    a.sessions["s"] = CachedPrefix{"m", KvState::kDevice, 960};
    InstanceTelemetry b = Snap(++version_, at_s);
    b.session_prefill = true;
    return std::pair{a, b};
  };
  for (bool slot_wait : {true, false}) {
    SCOPED_TRACE(slot_wait);
    RouterOptions o;
    o.slot_wait = slot_wait;
    auto route = [&](const RouteRequest& req) {
      auto r = Make(o);
      auto [a, b] = snaps(5.0, 0);
      r->OnTelemetry(0, a, AtSeconds(0));
      r->OnTelemetry(1, b, AtSeconds(0));
      return r->Route(req, AtSeconds(0.1)).instance;
    };
    // A new session: i0 would make it wait 5 s for m's next P phase.
    EXPECT_EQ(route(Req("new", false)), slot_wait ? 1 : 0);
    // s's prefix is on i0's device: it enters there mid-slot either way.
    EXPECT_EQ(route(Req("s")), 0);
  }
  // The wait counts down from the snapshot: 0.4 s advertised, 0.5 s ago.
  RouterOptions o;
  auto r = Make(o);
  auto [a, b] = snaps(0.4, 0);
  r->OnTelemetry(0, a, AtSeconds(0));
  r->OnTelemetry(1, b, AtSeconds(0));
  EXPECT_EQ(r->Route(Req("late", false), AtSeconds(0.5)).instance, 0);
  auto fresh = Make(o);
  fresh->OnTelemetry(0, a, AtSeconds(0));
  fresh->OnTelemetry(1, b, AtSeconds(0));
  EXPECT_EQ(fresh->Route(Req("early", false), AtSeconds(0.1)).instance, 1);
}

// The router scales profile predictions by what each instance measured.
TEST_F(RouterTest, MeasuredSlowdownSteersPlacement) {
  auto r = Make({});
  InstanceTelemetry slow = Snap(++version_, 0);
  slow.models[0].prefill_scale = 3.0;  // i0's prefills run 3x slower than profiled
  r->OnTelemetry(0, slow, AtSeconds(0));
  r->OnTelemetry(1, Snap(++version_, 0, /*queued_m_s=*/0.5), AtSeconds(0));
  EXPECT_EQ(r->Route(Req("a", false), AtSeconds(0.1)).instance, 1);
}

TEST_F(RouterTest, SessionTableIsBounded) {
  RouterOptions o;
  o.session_table_size = 100;
  auto r = Make(o);
  Feed(*r, 2, 0);
  for (int k = 0; k < 1000; ++k) r->Route(Req("s" + std::to_string(k), false), AtSeconds(0.1));
  EXPECT_LE(r->sessions(), 100u);
}

// Leases sized from the tool-time hint (issue 18): none when the hinted
// return falls past tau, twice the hint within [0.1 tau, tau] otherwise,
// tau without a hint; a hostile hint never gets more than tau.
TEST_F(RouterTest, ALeaseIsSizedFromTheToolTimeHint) {
  RouterOptions o;
  o.lease_tau_s = 2;
  auto r = Make(o);
  EXPECT_EQ(r->LeaseSeconds(-1), 2);
  EXPECT_EQ(r->LeaseSeconds(0.5), 1);
  EXPECT_EQ(r->LeaseSeconds(0), 0.2);
  EXPECT_EQ(r->LeaseSeconds(1.5), 2);
  EXPECT_EQ(r->LeaseSeconds(3), 0);
  EXPECT_EQ(r->LeaseSeconds(1e9), 0);
  Feed(*r, 2, 0);
  r->Route(Req("far", false), AtSeconds(0.1));
  r->OnCompleted("far", "m", 0, 100, 10, AtSeconds(0.2), /*expected_tool_s=*/30);
  EXPECT_EQ(r->LeaseOf("far", AtSeconds(0.3)), -1);  // back in 30 s: no lease holds a slot for it
  EXPECT_EQ(r->counters().leases_declined, 1);
  r->Route(Req("near", false), AtSeconds(0.1));
  r->OnCompleted("near", "m", 1, 100, 10, AtSeconds(0.2), /*expected_tool_s=*/0.3);
  EXPECT_EQ(r->LeaseOf("near", AtSeconds(0.7)), 1);   // live for 2 x 0.3 s
  EXPECT_EQ(r->LeaseOf("near", AtSeconds(0.85)), -1);
}

// A call that says it ends its session (issue 18's session-end hint)
// leaves no lease and no entry, under either lease policy, and its lease
// is counted as neither installed nor declined.
TEST_F(RouterTest, ASessionEndHintLeavesNoLeaseAndNoEntry) {
  for (const LeasePolicy policy : {LeasePolicy::kAdaptive, LeasePolicy::kFixed}) {
    SCOPED_TRACE(ToString(policy));
    auto r = MakeFed(policy, /*tau_s=*/2);
    r->Route(Req("done", false), AtSeconds(0.1));
    r->Route(Req("more", false), AtSeconds(0.1));
    EXPECT_EQ(r->OnCompleted("done", "m", 1, 100, 10, AtSeconds(0.2), -1, /*session_end=*/true), 0);
    r->OnCompleted("more", "m", 1, 100, 10, AtSeconds(0.2));
    EXPECT_EQ(r->LeaseOf("done", AtSeconds(0.3)), -1);
    if (policy == LeasePolicy::kFixed) {
      EXPECT_EQ(r->LeaseOf("more", AtSeconds(0.3)), 1);
    }
    EXPECT_EQ(r->sessions(), 1u);
    EXPECT_EQ(r->counters().leases_installed + r->counters().leases_declined, 1);  // "more" alone
  }
}

// Adaptive leases (issue 18): the router learns each session's gaps from
// completion to its next call. A session that comes back within 0.2 s gets
// a lease shorter than tau that still covers its return; one that takes
// 30 s gets none (declined); fixed leases give both tau. A lease holds Eq.5
// admission by its chance of being used: a fixed one a whole unit, the
// quick session's about the 7 in 8 completions a return followed, times
// the 95% of returns the lease waits for.
TEST_F(RouterTest, AnAdaptiveLeaseFollowsTheSessionsReturns) {
  for (const LeasePolicy policy : {LeasePolicy::kAdaptive, LeasePolicy::kFixed}) {
    SCOPED_TRACE(ToString(policy));
    auto r = MakeFed(policy, /*tau_s=*/5);
    // Eight calls each: "quick" comes back 0.2 s after each completion,
    // then "slow" 30 s after each.
    auto run = [&](const char* session, std::int32_t instance, double gap_s, double& t) {
      double lease = 0;
      for (int k = 0; k < 8; ++k) {
        r->Route(Req(session, k > 0), AtSeconds(t));
        lease = r->OnCompleted(session, "m", instance, 100, 10, AtSeconds(t + 1));
        t += 1 + gap_s;
      }
      return lease;
    };
    double t = 0;
    const double quick_lease = run("quick", 0, 0.2, t);
    const auto leases = r->LiveLeases(AtSeconds(t - 0.19));
    ASSERT_EQ(leases.size(), 1u);
    const double quick_units = leases[0].units;
    const double slow_lease = run("slow", 1, 30, t);
    if (policy == LeasePolicy::kFixed) {
      EXPECT_EQ(quick_units, 1);
      EXPECT_EQ(quick_lease, 5);
      EXPECT_EQ(slow_lease, 5);
      continue;
    }
    EXPECT_GT(quick_lease, 0.2);
    EXPECT_LT(quick_lease, 5);
    EXPECT_GT(quick_units, 0.75);
    EXPECT_LT(quick_units, 0.85);
    EXPECT_EQ(slow_lease, 0);
    EXPECT_GT(r->counters().leases_declined, 0);
  }
}

// An adaptive lease that ages without its return holds less: by half its
// length, only the chance that the return still comes in the half left.
// The routing decisions that sweep expiries lower it; a fixed lease keeps
// its whole unit.
TEST_F(RouterTest, AnAdaptiveLeaseHoldsLessAsItAgesUnused) {
  for (const LeasePolicy policy : {LeasePolicy::kAdaptive, LeasePolicy::kFixed}) {
    SCOPED_TRACE(ToString(policy));
    auto r = MakeFed(policy, /*tau_s=*/5);
    // Gaps of 0.3 s and 3 s in turn: a wide spread, so the lease is long
    // and much of its chance of use lies in its second half.
    double t = 0;
    double lease_s = 0;
    for (int k = 0; k < 9; ++k) {
      r->Route(Req("s", k > 0), AtSeconds(t));
      lease_s = r->OnCompleted("s", "m", 0, 100, 10, AtSeconds(t + 1));
      t += 1 + (k % 2 == 0 ? 0.3 : 3);
    }
    const double done = t - 0.3;  // the last completion (k = 8 was followed by 0.3 s)
    ASSERT_GT(lease_s, 1);
    const double fresh = r->LiveLeases(AtSeconds(done))[0].units;
    r->Route(Req("other", false), AtSeconds(done + 0.55 * lease_s));  // sweeps
    const auto aged = r->LiveLeases(AtSeconds(done + 0.55 * lease_s));
    ASSERT_EQ(aged.size(), 1u);
    if (policy == LeasePolicy::kFixed) {
      EXPECT_EQ(fresh, 1);
      EXPECT_EQ(aged[0].units, 1);
      continue;
    }
    EXPECT_GT(fresh, 0.25);
    EXPECT_LT(aged[0].units, 0.8 * fresh);
    EXPECT_GT(aged[0].units, 0);
  }
}

// The view charges fractional lease units to the model's queue and the
// instance's round and load, and a model with no lease left holds exactly
// none (sums of fractions do not leave a residue).
TEST_F(RouterTest, FractionalLeaseUnitsAreChargedAndFullyReleased) {
  ClusterView view(profiles_, {"i0", "i1"}, {1, 1}, /*lease_unit_s=*/0.5);
  const std::int32_t m = view.ModelId("m");
  view.ChargeLease(0, m, +1, 0.3);
  view.ChargeLease(0, m, +1, 0.1);
  EXPECT_NEAR(view.Load(0, 0.5), 0.2, 1e-12);
  EXPECT_NEAR(view.Candidates(m)[0].lease_units, 0.4, 1e-12);
  EXPECT_EQ(view.Load(1, 0.5), 0);
  view.ChargeLease(0, m, -1, -0.1);
  EXPECT_NEAR(view.Load(0, 0.5), 0.15, 1e-12);
  view.ChargeLease(0, m, -1, -0.3);
  EXPECT_EQ(view.Candidates(m)[0].lease_units, 0);
  EXPECT_EQ(view.status(0).lease_units, 0);
  EXPECT_EQ(view.Load(0, 0.5), 0);
}

TEST(RouterPolicyTest, NamesRoundTrip) {
  for (const char* name : {"full", "least-pressure", "session-sticky", "round-robin", "prefix-aware"}) {
    RouterPolicy p;
    ASSERT_TRUE(ParseRouterPolicy(name, p));
    EXPECT_STREQ(ToString(p), name);
  }
  RouterPolicy p;
  EXPECT_FALSE(ParseRouterPolicy("random", p));
}

// Adaptive leases behind gateway replicas: a session's first call goes
// through replica a, its second, 0.2 s after the first completed, through
// b, which heard of that completion only through the shared store. b still
// learns the gap, so after its own completion it installs a lease; having
// seen no return at all it would decline one.
TEST_F(RouterTest, AReplicaLearnsTheGapAfterACompletionItAdopted) {
  RouterOptions o;
  o.lease_tau_s = 5;
  o.lease = LeasePolicy::kAdaptive;
  auto a = Make(o);
  auto b = Make(o);
  Feed(*a, 2, 0);
  Feed(*b, 2, 0);
  a->Route(Req("s", false), AtSeconds(0));
  a->OnCompleted("s", "m", 0, 100, 10, AtSeconds(1));
  b->AdoptSession("s", Record(0, 100, 1), AtSeconds(1.2));
  b->Route(Req("s", true), AtSeconds(1.2));
  EXPECT_GT(b->OnCompleted("s", "m", 0, 200, 10, AtSeconds(2)), 0);
}

// Gateway replicas: a record another replica wrote, with the lease it
// handed over, routes the return back; the lease expires at its own time.
TEST_F(RouterTest, AnAdoptedLeaseRoutesBackUntilItsOwnExpiry) {
  auto r = Make({});
  Feed(*r, 2, 0);
  // Done after instance 1's snapshot: on device there.
  r->AdoptSession("s", Record(1, 1000, 0.5, 0.8), AtSeconds(0.6));
  EXPECT_EQ(r->LeaseOf("s", AtSeconds(0.79)), 1);
  EXPECT_EQ(r->LeaseOf("s", AtSeconds(0.8)), -1);
  const RouteDecision d = r->Route(Req("s"), AtSeconds(0.7));
  EXPECT_TRUE(d.lease_hit);
  EXPECT_EQ(d.instance, 1);
}

// The store is authoritative for leases: a record without one (another
// replica took it) drops the lease this router installed itself, so no
// lease is honoured twice.
TEST_F(RouterTest, ARecordWithoutALeaseDropsTheLocalOne) {
  auto r = Make({});
  Feed(*r, 2, 0);
  r->Route(Req("s", false), AtSeconds(0.1));
  r->OnCompleted("s", "m", 1, 1000, 10, AtSeconds(0.5));
  ASSERT_EQ(r->LeaseOf("s", AtSeconds(0.6)), 1);
  r->AdoptSession("s", Record(1, 1000, 0.5), AtSeconds(0.6));
  EXPECT_EQ(r->LeaseOf("s", AtSeconds(0.6)), -1);
  EXPECT_EQ(r->live_leases(), 0u);
  EXPECT_FALSE(r->Route(Req("s"), AtSeconds(0.7)).lease_hit);
}

// Leases expire in expiry order, not install order: an adopted lease with
// little left is swept before an older local one with more.
TEST_F(RouterTest, LeasesAreSweptInExpiryOrder) {
  auto r = Make({});
  Feed(*r, 2, 0);
  r->Route(Req("a", false), AtSeconds(0.1));
  r->OnCompleted("a", "m", 0, 1000, 10, AtSeconds(0.2));  // expires at 1.2
  r->AdoptSession("b", Record(1, 0, 0.25, 0.4), AtSeconds(0.3));
  EXPECT_EQ(r->live_leases(), 2u);
  r->Route(Req("c", false), AtSeconds(0.5));  // a decision sweeps expired leases
  EXPECT_EQ(r->live_leases(), 1u);
  EXPECT_EQ(r->LeaseOf("a", AtSeconds(0.5)), 0);
}

// Other replicas' live leases count against the instance they hold slots
// on: a new session goes elsewhere while they are charged.
TEST_F(RouterTest, SharedLeaseCountsChargeTheirInstance) {
  auto r = Make({});
  Feed(*r, 2, 0);
  EXPECT_EQ(r->Route(Req("x", false), AtSeconds(0.1)).instance, 0);
  Feed(*r, 2, 0.2);  // the overlay of x's placement is gone
  r->SetSharedLeases(0, "m", 20);
  EXPECT_EQ(r->Route(Req("y", false), AtSeconds(0.3)).instance, 1);
  Feed(*r, 2, 0.4);
  r->SetSharedLeases(0, "m", 0);
  EXPECT_EQ(r->Route(Req("z", false), AtSeconds(0.5)).instance, 0);
}

}  // namespace
}  // namespace talaria
