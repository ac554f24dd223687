// What the gateway does when an instance fails a call, on a manual clock
// with two scripted instances: a call whose instance was unreachable or hung
// before the first token goes to the other; a call whose instance died after
// taking it fails with 502 and is never placed again (its request may be a
// poison that would kill the next instance too: it used to be retried, so
// one bad request took down every instance), and the dead instance gets no
// new placements until a heartbeat is answered. Nothing here sleeps.
#include "server/gateway.h"

#include <gtest/gtest.h>

#include "driver/timer.h"
#include "instance/test_profiles.h"
#include "server/scripted_link.h"

namespace talaria {
namespace {

using testing::RecordingSink;
using testing::ScriptedLink;

class GatewayFailoverTest : public ::testing::Test {
 protected:
  void SetUp() override {
    profiles_.Add(testing::TinyProfile("m"));
    ClusterConfig c = testing::TwoTinyInstances();
    c.router.stale_after_s = 1.5;
    gateway_ = std::make_unique<Gateway>(c, profiles_, testing::ScriptedLinks(c, profiles_, links_), clock_, timer_);
    gateway_->Start();
  }

  // Submits a call and returns the link it was placed on.
  int Submit(const std::shared_ptr<RecordingSink>& sink) {
    CompletionRequest r;
    r.model = "m";
    r.messages.push_back(ChatMessage{"user", "hello"});
    r.max_tokens = 4;
    const std::size_t before = Placements(0);
    EXPECT_GE(gateway_->Submit(r, "", sink), 0);
    return Placements(0) > before ? 0 : 1;
  }
  std::size_t Placements(int i) const { return links_[i]->placed.size(); }
  bool Healthy(int i) { return gateway_->Telemetry()["instances"][i]["healthy"].get<bool>(); }

  ManualClock clock_;
  ManualTimer timer_{clock_};
  ProfileSet profiles_;
  ScriptedLink* links_[2] = {nullptr, nullptr};
  std::unique_ptr<Gateway> gateway_;
};

TEST_F(GatewayFailoverTest, ACallWhoseInstanceDiedWithItIsNeverPlacedAgain) {
  auto sink = std::make_shared<RecordingSink>();
  const int first = Submit(sink);
  links_[first]->placed[0].sink->OnError(InstanceFailedError(links_[first]->name(), "the connection broke"));
  EXPECT_EQ(Placements(1 - first), 0u);  // not retried on the other
  ASSERT_EQ(sink->outcome(), "error");
  EXPECT_EQ(sink->error().status, 502);
  EXPECT_EQ(sink->error().code, kInstanceFailedCode);
  EXPECT_FALSE(Healthy(first));
  EXPECT_EQ(gateway_->metrics().accepted.load(), 1u);
  EXPECT_EQ(gateway_->metrics().failed.load(), 1u);
  EXPECT_EQ(gateway_->metrics().retries.load(), 0u);

  auto next = std::make_shared<RecordingSink>();
  EXPECT_EQ(Submit(next), 1 - first);  // the dead one gets nothing new
  EXPECT_EQ(Placements(first), 1u);
}

TEST_F(GatewayFailoverTest, ACallWhoseInstanceHungBeforeItsFirstTokenGoesToTheOther) {
  auto sink = std::make_shared<RecordingSink>();
  const int first = Submit(sink);
  links_[first]->placed[0].sink->OnError(UnreachableError(links_[first]->name(), "no answer for 5 s (hung?)"));
  ASSERT_EQ(Placements(1 - first), 1u);
  EXPECT_EQ(sink->outcome(), "");
  Usage usage;
  usage.completion_tokens = 4;
  links_[1 - first]->placed[0].sink->OnDone(usage, "length");
  EXPECT_EQ(sink->outcome(), "done");
  EXPECT_EQ(gateway_->metrics().retries.load(), 1u);
  EXPECT_EQ(gateway_->metrics().completed.load(), 1u);
}

TEST_F(GatewayFailoverTest, ACallThatHungAfterItsFirstTokenEndsWithTheError) {
  auto sink = std::make_shared<RecordingSink>();
  const int first = Submit(sink);
  links_[first]->placed[0].sink->OnDelta("tok");
  links_[first]->placed[0].sink->OnError(UnreachableError(links_[first]->name(), "no byte for 5 s mid-call"));
  EXPECT_EQ(Placements(1 - first), 0u);  // the client has seen output: it cannot start over
  ASSERT_EQ(sink->outcome(), "error");
  EXPECT_EQ(sink->error().code, kUnreachableCode);
  EXPECT_EQ(gateway_->metrics().failed.load(), 1u);
}

// The session-end hint (an agent's last call): the completion installs no
// lease, so no slot is held for a return that will not come; without the
// hint the same completion leaves one live lease.
TEST_F(GatewayFailoverTest, TheSessionEndHintLeavesNoLease) {
  for (const bool end : {false, true}) {
    SCOPED_TRACE(end);
    CompletionRequest r;
    r.model = "m";
    r.session_id = end ? "ending" : "going-on";
    r.session_end = end;
    r.messages.push_back(ChatMessage{"user", "last step"});
    r.max_tokens = 4;
    auto sink = std::make_shared<RecordingSink>();
    const std::size_t before0 = Placements(0);
    ASSERT_GE(gateway_->Submit(r, "", sink), 0);
    ScriptedLink& link = *links_[Placements(0) > before0 ? 0 : 1];
    Usage usage;
    usage.completion_tokens = 4;
    link.placed.back().sink->OnDone(usage, "length");
    ASSERT_EQ(sink->outcome(), "done");
  }
  // One live lease: the session that goes on; the ending one left none.
  EXPECT_NE(gateway_->RenderMetrics().find("\ntalaria_leases_live 1\n"), std::string::npos);
}

}  // namespace
}  // namespace talaria
