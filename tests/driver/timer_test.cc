#include "driver/timer.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace talaria {
namespace {

TEST(ManualTimerTest, FiresInTimeThenSchedulingOrderAtEachCallbacksOwnTime) {
  ManualClock clock;
  ManualTimer timer(clock);
  std::vector<std::string> fired;
  auto note = [&](std::string name) { fired.push_back(name + "@" + std::to_string(ToSeconds(clock.Now()))); };
  timer.At(AtSeconds(2), [&] { note("b"); });
  timer.At(AtSeconds(1), [&] { note("a"); });
  timer.At(AtSeconds(2), [&] {
    note("c");
    timer.At(AtSeconds(2.5), [&] { note("d"); });  // scheduled by a callback, due within the advance
    timer.At(AtSeconds(9), [&] { note("late"); });
  });
  timer.Advance(FromSeconds(3));
  EXPECT_EQ(fired, (std::vector<std::string>{"a@1.000000", "b@2.000000", "c@2.000000", "d@2.500000"}));
  EXPECT_EQ(clock.Now(), AtSeconds(3));
  EXPECT_EQ(timer.pending(), 1u);
}

TEST(ManualTimerTest, APastTimeFiresAtTheNextAdvanceWithoutMovingTimeBack) {
  ManualClock clock(AtSeconds(5));
  ManualTimer timer(clock);
  double at = -1;
  timer.At(AtSeconds(1), [&] { at = ToSeconds(clock.Now()); });
  timer.Advance(Duration::zero());
  EXPECT_EQ(at, 5);
}

}  // namespace
}  // namespace talaria
