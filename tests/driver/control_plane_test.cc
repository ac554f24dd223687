#include "driver/control_plane.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "instance/instance.h"
#include "instance/test_profiles.h"

namespace talaria {
namespace {

using Outcome = ControlPlane::Placement::Outcome;

class ControlPlaneTest : public ::testing::Test {
 protected:
  ControlPlaneTest() {
    profiles_.Add(testing::TinyProfile("m"));
    cluster_.source = "test";
    cluster_.instances.push_back(testing::TinyInstance("i0", {"m"}));
    cluster_.instances.push_back(testing::TinyInstance("i1", {"m"}));
    cluster_.heartbeat_s = 1;
    cluster_.router.stale_after_s = 1.5;
  }

  // A real instance's snapshot, as a heartbeat would bring it.
  InstanceTelemetry Snapshot(std::size_t i, TimePoint now) {
    Instance instance(cluster_.instances[i], profiles_);
    instance.Warmup("m", TimePoint{});
    InstanceTelemetry t;
    instance.Snapshot(now, t);
    return t;
  }

  RouteRequest Request() const {
    RouteRequest r;
    r.session_id = "s";
    r.model = "m";
    r.prompt_tokens = 100;
    return r;
  }

  ProfileSet profiles_;
  ClusterConfig cluster_;
};

TEST_F(ControlPlaneTest, TheHeartbeatPollsEveryInstanceEachPeriodWhileItShouldGoOn) {
  ControlPlane control(cluster_, profiles_);
  ManualClock clock;
  ManualTimer timer(clock);
  std::vector<std::pair<double, std::int32_t>> polls;
  bool go_on = true;
  control.StartHeartbeat(
      timer, clock.Now(), [&](std::int32_t i) { polls.emplace_back(ToSeconds(clock.Now()), i); },
      [&] { return go_on; });
  timer.Advance(FromSeconds(2.5));
  EXPECT_EQ(polls, (std::vector<std::pair<double, std::int32_t>>{{0, 0}, {0, 1}, {1, 0}, {1, 1}, {2, 0}, {2, 1}}));
  go_on = false;
  timer.Advance(FromSeconds(5));
  EXPECT_EQ(polls.size(), 6u);
  EXPECT_EQ(timer.pending(), 0u);  // the beat that found it should stop scheduled nothing more
}

// The overload wait, as a table: when the router cannot place, a call
// waits one heartbeat if that next try stays within the bound of its
// arrival, and is rejected otherwise, with how long it waited.
TEST_F(ControlPlaneTest, TheOverloadWaitIsBoundedByTheNextHeartbeat) {
  struct Row {
    double max_wait_s;
    double waited_s;  // now - arrived
    bool may_wait;
    Outcome outcome;
  };
  const Row rows[] = {
      {10, 0, true, Outcome::kWait},       // the next try at 1 s
      {10, 9, true, Outcome::kWait},       // the next try at 10 s: still within
      {10, 9.5, true, Outcome::kRejected}, // the next try would be at 10.5 s
      {0, 0, true, Outcome::kRejected},    // no waiting at all
      {0.5, 0, true, Outcome::kRejected},  // the next heartbeat comes past the bound
      {10, 0, false, Outcome::kRejected},  // the driver says no (stopping, or a re-placement)
  };
  for (const Row& row : rows) {
    cluster_.overload_max_wait_s = row.max_wait_s;
    ControlPlane control(cluster_, profiles_);
    control.OnTelemetry(0, Snapshot(0, TimePoint{}), TimePoint{});  // stale by now
    control.OnTelemetry(1, Snapshot(1, TimePoint{}), TimePoint{});
    control.OnUnreachable(1);
    const TimePoint now = AtSeconds(20);
    const TimePoint arrived = now - FromSeconds(row.waited_s);
    const ControlPlane::Placement p = control.Place(Request(), arrived, now, row.may_wait);
    SCOPED_TRACE("max_wait " + std::to_string(row.max_wait_s) + ", waited " + std::to_string(row.waited_s));
    EXPECT_EQ(p.outcome, row.outcome) << ToString(p.outcome);
    EXPECT_EQ(p.decision.instance, -1);
    EXPECT_EQ(p.decision.overload, RouteDecision::Overload::kStale);
    if (p.outcome == Outcome::kWait) {
      EXPECT_EQ(p.retry_at, now + FromSeconds(1));
    }
    if (p.outcome == Outcome::kRejected) {
      EXPECT_DOUBLE_EQ(p.waited_s, row.waited_s);
    }
  }
}

// Fresh instances that all fail round admission (Eq.5): the call waits
// while a next try stays within the bound; when its wait runs out, the
// cheapest of them takes it rather than the call being rejected.
TEST_F(ControlPlaneTest, AtTheBoundAnAdmissionOverloadIsPlacedNotRejected) {
  cluster_.overload_max_wait_s = 10;
  ControlPlane control(cluster_, profiles_);
  const TimePoint now = AtSeconds(20);
  for (std::int32_t i = 0; i < 2; ++i) {
    InstanceTelemetry t = Snapshot(static_cast<std::size_t>(i), now);
    t.round_bound_s = 1;  // a round already far past gamma * T_TTFT
    t.round_estimate_s = 5 + i;
    control.OnTelemetry(i, t, now);
  }
  const ControlPlane::Placement waits = control.Place(Request(), now, now);
  EXPECT_EQ(waits.outcome, Outcome::kWait);
  EXPECT_EQ(waits.decision.overload, RouteDecision::Overload::kAdmission);
  const ControlPlane::Placement placed = control.Place(Request(), now - FromSeconds(9.5), now);
  ASSERT_EQ(placed.outcome, Outcome::kPlaced) << ToString(placed.outcome);
  EXPECT_EQ(placed.decision.instance, 0);  // equal costs: the lowest index
  // A stale cluster has no fresh instance to fall back on: rejected.
  const ControlPlane::Placement stale = control.Place(Request(), now - FromSeconds(9.5), now + FromSeconds(5));
  EXPECT_EQ(stale.outcome, Outcome::kRejected);
  EXPECT_EQ(stale.decision.overload, RouteDecision::Overload::kStale);
}

TEST_F(ControlPlaneTest, AModelNoInstanceServesIsRejectedWithoutWaiting) {
  ControlPlane control(cluster_, profiles_);
  RouteRequest r = Request();
  r.model = "nobody-serves-this";
  const ControlPlane::Placement p = control.Place(r, TimePoint{}, TimePoint{});
  EXPECT_EQ(p.outcome, Outcome::kRejected);
  EXPECT_EQ(p.decision.overload, RouteDecision::Overload::kNoInstance);
}

TEST_F(ControlPlaneTest, ASnapshotMakesAnUnreachableInstanceHealthyAndPlaceable) {
  ControlPlane control(cluster_, profiles_);
  control.OnUnreachable(0);
  control.OnUnreachable(1);
  EXPECT_FALSE(control.healthy(0));
  const TimePoint now = AtSeconds(1);
  control.OnTelemetry(1, Snapshot(1, now), now);
  EXPECT_TRUE(control.healthy(1));
  EXPECT_FALSE(control.healthy(0));
  const ControlPlane::Placement p = control.Place(Request(), now, now);
  ASSERT_EQ(p.outcome, Outcome::kPlaced);
  EXPECT_EQ(p.decision.instance, 1);
}

TEST_F(ControlPlaneTest, TheCompletionHookInstallsTheSessionsLease) {
  ControlPlane control(cluster_, profiles_);
  const TimePoint now = AtSeconds(1);
  control.OnTelemetry(0, Snapshot(0, now), now);
  control.OnTelemetry(1, Snapshot(1, now), now);
  const ControlPlane::Placement p = control.Place(Request(), now, now);
  ASSERT_EQ(p.outcome, Outcome::kPlaced);
  EXPECT_EQ(control.router().LeaseOf("s", now), -1);  // routing installs no lease
  control.OnCompleted("s", "m", p.decision.instance, 150, 50, now + FromSeconds(2));
  EXPECT_EQ(control.router().LeaseOf("s", now + FromSeconds(2.5)), p.decision.instance);
  EXPECT_EQ(control.router().LeaseOf("s", now + FromSeconds(3.5)), -1);  // tau = 1 s
  EXPECT_EQ(control.counters().leases_installed, 1);
}

TEST_F(ControlPlaneTest, ACallIsPlacedAgainAfterAnUnreachableInstanceAtMostOncePerInstance) {
  ControlPlane control(cluster_, profiles_);
  EXPECT_TRUE(control.MayPlaceAgain(1));
  EXPECT_FALSE(control.MayPlaceAgain(2));
}

}  // namespace
}  // namespace talaria
