#include "server/realtime_instance.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>

#include "engine/sim_engine.h"
#include "instance/test_profiles.h"
#include "memory/block_hashes.h"

namespace talaria {
namespace {

InstanceConfig OneModel() { return testing::TinyInstance("rt", {"m"}); }

// The same scheduler, driven by a steady clock: a session's two calls run
// through the real-time driver (1,000x faster than real time), the second
// submitted from the first's completion callback, and reuses its KV on device.
TEST(RealtimeInstanceTest, ClosedLoopSessionCompletesWithDeviceHit) {
  ProfileSet profiles;
  profiles.Add(testing::TinyProfile("m"));
  RealtimeInstance rt(OneModel(), profiles, std::make_unique<SimEngine>(), /*time_scale=*/1000);
  rt.Start();

  std::mutex mu;
  std::condition_variable cv;
  std::vector<CallRecord> done;
  std::vector<std::int64_t> progress;  // call 0's token counts as they stream
  std::vector<PrefixHash> chain0, chain1;
  ExtendSessionChain(chain0, 0, 200 + 5, 64, 9, 0);
  chain1 = chain0;
  ExtendSessionChain(chain1, 205, 300 + 5, 64, 9, 1);

  std::function<void()> submit_next;
  std::function<void(int)> submit;
  submit = [&](int index) {
    CallRequest c;
    c.id = index;
    c.session_id = "s";
    c.continuation = index > 0;
    c.model = "m";
    c.prompt_tokens = index == 0 ? 200 : 300;
    c.prefix_tokens = index == 0 ? 0 : 205;
    c.output_tokens = 5;
    c.full_reuse = index == 1;
    c.chain = index == 0 ? chain0 : chain1;
    RealtimeInstance::Callbacks cb;
    if (index == 0) {
      cb.on_tokens = [&](std::int64_t generated, std::span<const std::int32_t>, TimePoint) {
        std::lock_guard<std::mutex> lock(mu);
        progress.push_back(generated);
      };
    }
    cb.on_finished = [&, index](const CallRecord& r) {
      {
        std::lock_guard<std::mutex> lock(mu);
        done.push_back(r);
      }
      cv.notify_all();
      if (index == 0) submit_next();
    };
    rt.Submit(c, cb);
  };
  submit_next = [&] { submit(1); };
  submit(0);
  std::unique_lock<std::mutex> lock(mu);
  ASSERT_TRUE(cv.wait_for(lock, std::chrono::seconds(10), [&] { return done.size() == 2; }));
  EXPECT_EQ(done[1].kv_source, KvSource::kDevice);
  // Decode steps one boundary at a time in real time: tokens 2..5 stream in.
  EXPECT_EQ(progress, (std::vector<std::int64_t>{2, 3, 4, 5}));
  EXPECT_EQ(done[1].reused_tokens, 192);  // three full 64-token blocks of the 205
  EXPECT_GT(done[1].first_token, done[0].finished);
  // Virtual durations follow the profile: 200 prefill tokens at 1 ms each.
  EXPECT_NEAR(ToSeconds(done[0].first_token - done[0].admitted), 0.2, 0.05);
  const InstanceTelemetry t = rt.Snapshot();
  EXPECT_EQ(t.sessions.at("s").state, KvState::kDevice);
  rt.Stop();
}

}  // namespace
}  // namespace talaria
