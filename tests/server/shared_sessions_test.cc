// SharedSessions on its store threads (the in-process store double): every
// operation's callback runs exactly once, off the caller's thread, queued
// operations share round trips, and Stop runs what is queued before it
// returns. Waits are on the callbacks themselves (a latch), never sleeps.
#include "server/shared_sessions.h"

#include <gtest/gtest.h>

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "server/http_client.h"
#include "server/memory_session_store.h"

namespace talaria {
namespace {

using testing::MemorySessionStore;
using testing::MetricValue;

// Holds each call on the store until released, so operations queue behind it.
class GatedStore final : public SessionStore {
 public:
  explicit GatedStore(MemorySessionStore& s) : s_(s) {}
  Status Run(std::span<StoreOp> ops) override {
    std::unique_lock<std::mutex> lock(mu_);
    ++batches;
    ops_in_batches += static_cast<int>(ops.size());
    cv_.wait(lock, [&] { return open_; });
    lock.unlock();
    return s_.Run(ops);
  }
  Status CountLeases(std::vector<LeaseCount>& p) override { return s_.CountLeases(p); }
  Status Ping() override { return s_.Ping(); }
  std::string Describe() const override { return "gated"; }
  void Open() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      open_ = true;
    }
    cv_.notify_all();
  }
  std::atomic<int> batches{0};
  std::atomic<int> ops_in_batches{0};

 private:
  MemorySessionStore& s_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool open_ = false;
};

SessionRecord Record() {
  SessionRecord r;
  r.instance = "i0";
  r.model = "m";
  r.kv_tokens = 100;
  return r;
}

TEST(SharedSessionsTest, QueuedOperationsShareRoundTripsAndEachCallbackRunsOnce) {
  ManualClock clock;
  MemorySessionStore memory(clock);
  auto gated = std::make_unique<GatedStore>(memory);
  GatedStore& store = *gated;
  SharedSessions shared(std::move(gated), /*lease_tau_s=*/1, /*keep_s=*/60, /*threads=*/1);
  constexpr int kCalls = 40;
  std::atomic<int> done{0};
  std::atomic<int> off_thread{0};
  const auto caller = std::this_thread::get_id();
  for (int i = 0; i < kCalls; ++i) {
    shared.CompleteAsync("s" + std::to_string(i), Record(), clock.Now(), [&] {
      if (std::this_thread::get_id() != caller) ++off_thread;
      ++done;
    });
  }
  // The first batch holds the store; the rest queue behind it.
  ASSERT_TRUE(testing::Eventually([&] { return store.batches.load() >= 1; }));
  store.Open();
  ASSERT_TRUE(testing::Eventually([&] { return done.load() == kCalls; }));
  EXPECT_EQ(off_thread.load(), kCalls);
  EXPECT_EQ(store.ops_in_batches.load(), kCalls);
  EXPECT_LT(store.batches.load(), kCalls);  // batched: fewer round trips than calls
  std::atomic<int> leases{0};
  std::atomic<int> taken{0};
  for (int i = 0; i < kCalls; ++i) {
    shared.TakeAsync("s" + std::to_string(i), [&](std::optional<SessionRecord> r) {
      if (r && r->lease) ++leases;
      ++taken;
    });
  }
  ASSERT_TRUE(testing::Eventually([&] { return taken.load() == kCalls; }));
  EXPECT_EQ(leases.load(), kCalls);
  std::string m;
  shared.RenderMetrics(m);
  EXPECT_EQ(MetricValue(m, "talaria_state_operations_total{op=\"complete\",result=\"ok\"}"), 40u);
  EXPECT_EQ(MetricValue(m, "talaria_state_leases_taken_total"), 40u);
}

TEST(SharedSessionsTest, StopRunsWhatIsQueued) {
  ManualClock clock;
  MemorySessionStore memory(clock);
  auto gated = std::make_unique<GatedStore>(memory);
  GatedStore& store = *gated;
  SharedSessions shared(std::move(gated), 1, 60, /*threads=*/2);
  std::atomic<int> done{0};
  for (int i = 0; i < 10; ++i) shared.CompleteAsync("s" + std::to_string(i), Record(), clock.Now(), [&] { ++done; });
  std::thread opener([&] {
    EXPECT_TRUE(testing::Eventually([&] { return store.batches.load() >= 1; }));
    store.Open();
  });
  shared.Stop();  // returns once every queued completion was written and answered
  opener.join();
  EXPECT_EQ(done.load(), 10);
  EXPECT_TRUE(memory.Has("s9"));
  // After Stop, operations run on the caller's thread.
  bool inline_done = false;
  shared.CompleteAsync("late", Record(), clock.Now(), [&] { inline_done = true; });
  EXPECT_TRUE(inline_done);
}

}  // namespace
}  // namespace talaria
