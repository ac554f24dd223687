// Two gateway replicas sharing session state through one store (an
// in-process double of the Redis store, on the replicas' manual clock), each
// in front of its own scripted links to instances i0 and i1. A return that
// reaches the other replica follows the lease the first installed; a lease
// is honoured once; a store that stops answering leaves each replica on its
// own state and, when it answers again, gets what was completed meanwhile.
// Nothing here sleeps.
#include <gtest/gtest.h>

#include "driver/timer.h"
#include "instance/test_profiles.h"
#include "server/gateway.h"
#include "server/http_client.h"
#include "server/memory_session_store.h"
#include "server/openai_api.h"
#include "server/scripted_link.h"

namespace talaria {
namespace {

using testing::MemorySessionStore;
using testing::MetricValue;
using testing::RecordingSink;
using testing::ScriptedLink;

class GatewayReplicasTest : public ::testing::Test {
 protected:
  void SetUp() override {
    profiles_.Add(testing::TinyProfile("m"));
    ClusterConfig c = testing::TwoTinyInstances();
    c.router.stale_after_s = 100;
    c.router.lease_tau_s = 2;
    for (int g = 0; g < 2; ++g) {
      gateways_[g] =
          std::make_unique<Gateway>(c, profiles_, testing::ScriptedLinks(c, profiles_, links_[g]), clock_, timer_);
      auto store = std::make_unique<SharedView>(store_);
      gateways_[g]->UseSessionStore(std::move(store));
      gateways_[g]->Start();
    }
  }

  // Submits session `session`'s call to replica `g`; returns the instance it
  // was placed on (-1: none) and the sink.
  int Submit(int g, const std::string& session, const std::shared_ptr<RecordingSink>& sink,
             const std::string& content = "hello") {
    CompletionRequest r;
    r.model = "m";
    r.session_id = session;
    r.messages.push_back(ChatMessage{"user", content});
    r.max_tokens = 4;
    const std::size_t before[2] = {links_[g][0]->placed.size(), links_[g][1]->placed.size()};
    EXPECT_GE(gateways_[g]->Submit(r, "", sink), 0);
    for (int i = 0; i < 2; ++i) {
      if (links_[g][i]->placed.size() > before[i]) return i;
    }
    return -1;
  }
  // Finishes the last call placed on replica g's instance i, a moment
  // after the replicas' last snapshots (the scripted instances never list
  // a session: the completion is what says its KV is there).
  void Finish(int g, int i) {
    timer_.Advance(FromSeconds(0.1));
    Usage u;
    u.prompt_tokens = 10;
    u.completion_tokens = 4;
    links_[g][i]->placed.back().sink->OnDone(u, "stop");
  }
  std::string Metrics(int g) { return gateways_[g]->RenderMetrics(); }

  // Every replica holds its own handle on the one store.
  class SharedView final : public SessionStore {
   public:
    explicit SharedView(MemorySessionStore& s) : s_(s) {}
    Status Run(std::span<StoreOp> ops) override { return s_.Run(ops); }
    Status CountLeases(std::vector<LeaseCount>& p) override { return s_.CountLeases(p); }
    Status Ping() override { return s_.Ping(); }
    std::string Describe() const override { return s_.Describe(); }

   private:
    MemorySessionStore& s_;
  };

  ManualClock clock_;
  ManualTimer timer_{clock_};
  ProfileSet profiles_;
  MemorySessionStore store_{clock_};
  ScriptedLink* links_[2][2] = {};
  std::unique_ptr<Gateway> gateways_[2];
};

TEST_F(GatewayReplicasTest, AReturnThroughTheOtherReplicaFollowsTheLease) {
  // Load on i0 in replica 1's view, so without the lease it would pick i1.
  auto busy = std::make_shared<RecordingSink>();
  ASSERT_EQ(Submit(1, "other", busy), 0);
  auto first = std::make_shared<RecordingSink>();
  const int served = Submit(0, "agent", first);
  ASSERT_GE(served, 0);
  Finish(0, served);
  ASSERT_EQ(first->outcome(), "done");
  EXPECT_TRUE(store_.Has(ScopedSessionId("", "agent")));

  timer_.Advance(FromSeconds(0.5));
  auto second = std::make_shared<RecordingSink>();
  EXPECT_EQ(Submit(1, "agent", second, "hello again"), served);
  const std::string m = Metrics(1);
  EXPECT_EQ(MetricValue(m, "talaria_route_decisions_total{outcome=\"lease\"}"), 1u);
  EXPECT_EQ(MetricValue(m, "talaria_lease_hits_total"), 1u);
  EXPECT_EQ(MetricValue(m, "talaria_state_leases_taken_total"), 1u);
}

TEST_F(GatewayReplicasTest, ALeaseIsHonouredByOneReplicaOnly) {
  auto first = std::make_shared<RecordingSink>();
  const int served = Submit(0, "agent", first);
  Finish(0, served);
  // Replica 1 takes the lease; a parallel call of the session at replica 0,
  // which installed the lease itself, no longer finds it.
  auto a = std::make_shared<RecordingSink>();
  Submit(1, "agent", a);
  auto b = std::make_shared<RecordingSink>();
  Submit(0, "agent", b);
  EXPECT_EQ(MetricValue(Metrics(1), "talaria_route_decisions_total{outcome=\"lease\"}"), 1u);
  EXPECT_EQ(MetricValue(Metrics(0), "talaria_route_decisions_total{outcome=\"lease\"}"), 0u);
}

TEST_F(GatewayReplicasTest, AStoreThatStopsAnsweringIsBridgedAndResynchronised) {
  store_.down = true;
  auto first = std::make_shared<RecordingSink>();
  const int served = Submit(0, "agent", first);
  ASSERT_GE(served, 0);  // routed on local state
  Finish(0, served);
  EXPECT_EQ(first->outcome(), "done");
  std::string m = Metrics(0);
  EXPECT_EQ(MetricValue(m, "talaria_state_up"), 0u);
  EXPECT_EQ(MetricValue(m, "talaria_state_operations_total{op=\"take\",result=\"failed\"}"), 1u);
  EXPECT_EQ(MetricValue(m, "talaria_state_operations_total{op=\"complete\",result=\"skipped\"}"), 1u);
  EXPECT_EQ(MetricValue(m, "talaria_state_pending_sessions"), 1u);
  EXPECT_FALSE(store_.Has(ScopedSessionId("", "agent")));

  // Back: the next heartbeat writes what was kept, lease and all.
  store_.down = false;
  timer_.Advance(FromSeconds(0.5));
  gateways_[0]->Heartbeat();
  m = Metrics(0);
  EXPECT_EQ(MetricValue(m, "talaria_state_up"), 1u);
  EXPECT_EQ(MetricValue(m, "talaria_state_resynced_sessions_total"), 1u);
  EXPECT_TRUE(store_.Has(ScopedSessionId("", "agent")));
  auto second = std::make_shared<RecordingSink>();
  EXPECT_EQ(Submit(1, "agent", second), served);
  EXPECT_EQ(MetricValue(Metrics(1), "talaria_route_decisions_total{outcome=\"lease\"}"), 1u);
}

TEST_F(GatewayReplicasTest, ASessionEndHintRemovesTheSharedRecord) {
  auto first = std::make_shared<RecordingSink>();
  const int served = Submit(0, "agent", first);
  Finish(0, served);
  ASSERT_TRUE(store_.Has(ScopedSessionId("", "agent")));
  CompletionRequest r;
  r.model = "m";
  r.session_id = "agent";
  r.session_end = true;
  r.messages.push_back(ChatMessage{"user", "bye"});
  r.max_tokens = 4;
  auto last = std::make_shared<RecordingSink>();
  ASSERT_GE(gateways_[1]->Submit(r, "", last), 0);
  Finish(1, links_[1][0]->placed.empty() ? 1 : 0);
  EXPECT_FALSE(store_.Has(ScopedSessionId("", "agent")));
}

}  // namespace
}  // namespace talaria
