// The gateway's overload policy on a manual clock: a call no instance can
// take waits at the gateway, routed again one heartbeat period after each
// failed try, bounded by overload_max_wait_s, then is rejected with 429.
// The gateway runs on a ManualClock and its ManualTimer, so heartbeats and
// retries happen exactly when the test advances time; its one instance is a
// scripted link (answers its telemetry polls or not; the test finishes the
// calls placed on it). Nothing here sleeps.
#include "server/gateway.h"

#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <vector>

#include "driver/timer.h"
#include "instance/instance.h"
#include "instance/test_profiles.h"
#include "server/openai_api.h"
#include "server/scripted_link.h"

namespace talaria {
namespace {

using testing::RecordingSink;
using testing::ScriptedLink;

class GatewayWaitTest : public ::testing::Test {
 protected:
  // Heartbeats every second; a snapshot is stale after 1.5 s.
  void StartGateway(double max_wait_s, double heartbeat_s = 1.0) {
    profiles_.Add(testing::TinyProfile("m"));
    ClusterConfig c;
    c.source = "test";
    c.instances.push_back(testing::TinyInstance("i0", {"m"}));
    c.heartbeat_s = heartbeat_s;
    c.router.stale_after_s = 1.5;
    c.overload_max_wait_s = max_wait_s;
    auto link = std::make_unique<ScriptedLink>(c.instances[0], profiles_);
    link_ = link.get();
    std::vector<std::unique_ptr<InstanceLink>> links;
    links.push_back(std::move(link));
    gateway_ = std::make_unique<Gateway>(c, profiles_, std::move(links), clock_, timer_);
    gateway_->Start();  // the first heartbeat, at t = 0
  }

  // The instance stops answering; the next heartbeat (at t = 1) marks it
  // unhealthy: the router has nowhere to place.
  void GoDown() {
    link_->answers = false;
    timer_.Advance(FromSeconds(1));
  }

  std::int64_t Submit(const std::shared_ptr<RecordingSink>& sink) {
    CompletionRequest r;
    r.model = "m";
    r.messages.push_back(ChatMessage{"user", "hello"});
    r.max_tokens = 4;
    return gateway_->Submit(r, "", sink);
  }

  ManualClock clock_;
  ManualTimer timer_{clock_};
  ProfileSet profiles_;
  ScriptedLink* link_ = nullptr;
  std::unique_ptr<Gateway> gateway_;
};

TEST_F(GatewayWaitTest, AWaitingCallIsPlacedOnceAnInstanceCanTakeIt) {
  StartGateway(/*max_wait_s=*/10);
  GoDown();
  auto sink = std::make_shared<RecordingSink>();
  ASSERT_GE(Submit(sink), 0);  // at t = 1
  EXPECT_EQ(gateway_->waiting(), 1u);
  timer_.Advance(FromSeconds(1));  // t = 2: the heartbeat fails again, then the retry
  EXPECT_EQ(sink->outcome(), "");
  EXPECT_EQ(gateway_->waiting(), 1u);
  EXPECT_TRUE(link_->placed.empty());
  EXPECT_EQ(gateway_->metrics().accepted.load(), 0u);

  link_->answers = true;
  timer_.Advance(FromSeconds(1));  // t = 3: a fresh snapshot, then the retry places the call
  ASSERT_EQ(link_->placed.size(), 1u);
  EXPECT_EQ(gateway_->waiting(), 0u);
  Usage usage;
  usage.completion_tokens = 4;
  link_->placed[0].sink->OnDone(usage, "length");
  EXPECT_EQ(sink->outcome(), "done");
  EXPECT_EQ(gateway_->metrics().waited.load(), 1u);  // once, however many tries
  EXPECT_EQ(gateway_->metrics().accepted.load(), 1u);
  EXPECT_EQ(gateway_->metrics().completed.load(), 1u);
}

TEST_F(GatewayWaitTest, PastTheBoundTheCallIsRejectedWithTheReason) {
  StartGateway(/*max_wait_s=*/5);
  GoDown();
  auto sink = std::make_shared<RecordingSink>();
  ASSERT_GE(Submit(sink), 0);      // at t = 1
  timer_.Advance(FromSeconds(4));  // tries at 2 .. 5: each next one still within 5 s of arrival
  EXPECT_EQ(sink->outcome(), "");
  EXPECT_EQ(gateway_->waiting(), 1u);
  timer_.Advance(FromSeconds(1));  // t = 6: waited 5 s; a next try would pass the bound
  ASSERT_EQ(sink->outcome(), "error");
  const ApiError e = sink->error();
  EXPECT_EQ(e.status, 429);
  EXPECT_EQ(e.code, "no_capacity");
  EXPECT_NE(e.message.find("(stale) after waiting 5 s"), std::string::npos) << e.message;
  EXPECT_EQ(gateway_->waiting(), 0u);
  EXPECT_EQ(gateway_->metrics().accepted.load(), 0u);
  EXPECT_NE(gateway_->metrics().Render().find("talaria_calls_rejected_total{reason=\"stale\"} 1"), std::string::npos);
}

TEST_F(GatewayWaitTest, WithoutAWaitTheOverloadIsRejectedAtOnce) {
  StartGateway(/*max_wait_s=*/0);
  GoDown();
  auto sink = std::make_shared<RecordingSink>();
  EXPECT_EQ(Submit(sink), -1);
  EXPECT_EQ(sink->outcome(), "error");
  EXPECT_EQ(sink->error().status, 429);
  EXPECT_EQ(gateway_->metrics().waited.load(), 0u);
}

// A call waits only for a heartbeat that can come within the bound.
TEST_F(GatewayWaitTest, NoWaitWhenTheNextHeartbeatComesPastTheBound) {
  StartGateway(/*max_wait_s=*/5, /*heartbeat_s=*/10);
  link_->answers = false;
  timer_.Advance(FromSeconds(10));  // the heartbeat at 10 s finds it down
  auto sink = std::make_shared<RecordingSink>();
  EXPECT_EQ(Submit(sink), -1);
  EXPECT_EQ(sink->error().status, 429);
  EXPECT_EQ(sink->error().message.find("after waiting"), std::string::npos) << sink->error().message;
}

TEST_F(GatewayWaitTest, ACancelledWaitingCallIsNeverPlaced) {
  StartGateway(/*max_wait_s=*/10);
  GoDown();
  auto sink = std::make_shared<RecordingSink>();
  const std::int64_t id = Submit(sink);
  ASSERT_GE(id, 0);
  EXPECT_TRUE(gateway_->Cancel(id));
  EXPECT_FALSE(gateway_->Cancel(id));
  EXPECT_EQ(gateway_->waiting(), 0u);
  link_->answers = true;
  timer_.Advance(FromSeconds(3));  // heartbeats and the cancelled call's retry time pass
  EXPECT_TRUE(link_->placed.empty());
  EXPECT_EQ(sink->outcome(), "");
  EXPECT_EQ(gateway_->metrics().accepted.load(), 0u);
  EXPECT_EQ(gateway_->metrics().failed.load(), 0u);  // never accepted
}

TEST_F(GatewayWaitTest, StoppingAnswersEveryWaitingCall) {
  StartGateway(/*max_wait_s=*/10);
  GoDown();
  auto sink = std::make_shared<RecordingSink>();
  ASSERT_GE(Submit(sink), 0);
  gateway_->Stop();
  ASSERT_EQ(sink->outcome(), "error");
  EXPECT_EQ(sink->error().status, 503);
  EXPECT_EQ(sink->error().code, "shutting_down");
  EXPECT_EQ(gateway_->waiting(), 0u);
  link_->answers = true;
  timer_.Advance(FromSeconds(3));  // the retry's time passes: nothing more happens
  EXPECT_TRUE(link_->placed.empty());
}

}  // namespace
}  // namespace talaria
