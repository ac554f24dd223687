#include "server/asio_timer.h"

#include <gtest/gtest.h>

#include <chrono>
#include <future>
#include <memory>
#include <thread>

namespace talaria {
namespace {

// The servers' timer on a scaled clock: a callback due 5 emulated seconds
// ahead fires after ~5 ms of wall time at scale 1,000, on the timer's thread.
TEST(AsioTimerTest, FiresOnItsThreadWhenTheScaledClockReachesTheTime) {
  auto clock = std::make_shared<const ScaledClock>(std::make_shared<const SteadyClock>(), 1000);
  AsioTimer timer(clock, 1000);
  timer.Start();
  std::promise<std::pair<TimePoint, std::thread::id>> fired;
  const TimePoint due = clock->Now() + FromSeconds(5);
  timer.At(due, [&] { fired.set_value({clock->Now(), std::this_thread::get_id()}); });
  auto f = fired.get_future();
  ASSERT_EQ(f.wait_for(std::chrono::seconds(10)), std::future_status::ready);
  const auto [at, thread] = f.get();
  EXPECT_GE(at, due);
  EXPECT_TRUE(thread != std::this_thread::get_id());
  timer.Stop();
}

}  // namespace
}  // namespace talaria
