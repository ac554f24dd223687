// The gateway's overload policy: a call no instance can take waits at the
// gateway, bounded by overload_max_wait_s, then is rejected with 429. One
// in-process instance, emulated 1,000x faster than the wall; heartbeats are
// left to the test (Gateway::Heartbeat), and a snapshot is stale after one
// emulated second (1 ms of wall time), so "no instance can take it" is
// scripted by letting the only snapshot go stale.
#include "server/gateway.h"

#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <optional>
#include <thread>

#include "instance/test_profiles.h"
#include "server/openai_api.h"

namespace talaria {
namespace {

class RecordingSink final : public CompletionSink {
 public:
  void OnDelta(const std::string&) override {}
  void OnDone(const Usage&, const std::string&) override { Settle("done", std::nullopt); }
  void OnError(const ApiError& error) override { Settle("error", error); }

  // Waits up to `timeout` for the outcome; "" if none came.
  std::string Await(std::chrono::milliseconds timeout) {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait_for(lock, timeout, [&] { return !outcome_.empty(); });
    return outcome_;
  }
  std::string outcome() {
    std::lock_guard<std::mutex> lock(mu_);
    return outcome_;
  }
  ApiError error() {
    std::lock_guard<std::mutex> lock(mu_);
    return error_.value_or(ApiError{});
  }

 private:
  void Settle(const char* outcome, std::optional<ApiError> error) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      EXPECT_TRUE(outcome_.empty()) << "a second outcome: " << outcome;
      outcome_ = outcome;
      error_ = std::move(error);
    }
    cv_.notify_all();
  }
  std::mutex mu_;
  std::condition_variable cv_;
  std::string outcome_;
  std::optional<ApiError> error_;
};

class GatewayWaitTest : public ::testing::Test {
 protected:
  void StartGateway(double max_wait_s) {
    profiles_.Add(testing::TinyProfile("m"));
    ClusterConfig c;
    c.source = "test";
    c.instances.push_back(testing::TinyInstance("i0", {"m"}));
    c.serve.time_scale = 1000;
    c.heartbeat_s = 1e6;           // no automatic heartbeat within a test
    c.router.stale_after_s = 1.0;  // 1 ms of wall time
    c.overload_max_wait_s = max_wait_s;
    gateway_ = std::make_unique<Gateway>(c, profiles_);
    gateway_->Start();
  }

  // Lets the only snapshot go stale: the router has nowhere to place.
  static void GoStale() { std::this_thread::sleep_for(std::chrono::milliseconds(20)); }

  std::int64_t Submit(const std::shared_ptr<RecordingSink>& sink) {
    CompletionRequest r;
    r.model = "m";
    r.messages.push_back(ChatMessage{"user", "hello"});
    r.max_tokens = 4;
    return gateway_->Submit(r, "", sink);
  }

  ProfileSet profiles_;
  std::unique_ptr<Gateway> gateway_;
};

TEST_F(GatewayWaitTest, AWaitingCallIsPlacedOnceAnInstanceCanTakeIt) {
  StartGateway(/*max_wait_s=*/1e6);
  GoStale();
  auto sink = std::make_shared<RecordingSink>();
  ASSERT_GE(Submit(sink), 0);
  EXPECT_EQ(gateway_->waiting(), 1u);
  // Retried (by the heartbeat thread too) while every snapshot is stale.
  EXPECT_EQ(sink->Await(std::chrono::milliseconds(120)), "");
  EXPECT_EQ(gateway_->metrics().accepted.load(), 0u);
  // A fresh snapshot: the heartbeat routes the waiting call again and it is
  // placed and runs. (A snapshot is fresh for only 1 ms of wall time, so a
  // loaded machine may need another heartbeat.)
  std::string outcome;
  for (int k = 0; k < 500 && outcome.empty(); ++k) {
    gateway_->Heartbeat();
    outcome = sink->Await(std::chrono::milliseconds(20));
  }
  EXPECT_EQ(outcome, "done");
  EXPECT_EQ(gateway_->waiting(), 0u);
  EXPECT_EQ(gateway_->metrics().waited.load(), 1u);
  EXPECT_EQ(gateway_->metrics().accepted.load(), 1u);
  EXPECT_EQ(gateway_->metrics().completed.load(), 1u);
}

TEST_F(GatewayWaitTest, PastTheBoundTheCallIsRejectedWithTheReason) {
  StartGateway(/*max_wait_s=*/5);  // 5 ms of wall time
  GoStale();
  auto sink = std::make_shared<RecordingSink>();
  ASSERT_GE(Submit(sink), 0);
  // The heartbeat thread's next wake (at most 50 ms away) finds it expired.
  ASSERT_EQ(sink->Await(std::chrono::seconds(10)), "error");
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
  GoStale();
  auto sink = std::make_shared<RecordingSink>();
  EXPECT_EQ(Submit(sink), -1);
  EXPECT_EQ(sink->outcome(), "error");
  EXPECT_EQ(sink->error().status, 429);
  EXPECT_EQ(gateway_->metrics().waited.load(), 0u);
}

TEST_F(GatewayWaitTest, ACancelledWaitingCallIsNeverPlaced) {
  StartGateway(/*max_wait_s=*/1e6);
  GoStale();
  auto sink = std::make_shared<RecordingSink>();
  const std::int64_t id = Submit(sink);
  ASSERT_GE(id, 0);
  EXPECT_TRUE(gateway_->Cancel(id));
  EXPECT_FALSE(gateway_->Cancel(id));
  EXPECT_EQ(gateway_->waiting(), 0u);
  gateway_->Heartbeat();
  EXPECT_EQ(sink->Await(std::chrono::milliseconds(100)), "");
  EXPECT_EQ(gateway_->metrics().accepted.load(), 0u);
  EXPECT_EQ(gateway_->metrics().failed.load(), 0u);  // never accepted
}

TEST_F(GatewayWaitTest, StoppingAnswersEveryWaitingCall) {
  StartGateway(/*max_wait_s=*/1e6);
  GoStale();
  auto sink = std::make_shared<RecordingSink>();
  ASSERT_GE(Submit(sink), 0);
  gateway_->Stop();
  ASSERT_EQ(sink->outcome(), "error");
  EXPECT_EQ(sink->error().status, 503);
  EXPECT_EQ(sink->error().code, "shutting_down");
  EXPECT_EQ(gateway_->waiting(), 0u);
}

}  // namespace
}  // namespace talaria
