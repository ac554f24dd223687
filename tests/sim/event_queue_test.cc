#include "sim/event_queue.h"

#include <gtest/gtest.h>

#include <vector>

namespace talaria {
namespace {

TEST(EventQueueTest, OrdersByTimeThenInsertion) {
  EventQueue<int> q;
  q.Push(AtSeconds(2), 1);
  q.Push(AtSeconds(1), 2);
  q.Push(AtSeconds(2), 3);
  q.Push(AtSeconds(1), 4);
  EXPECT_EQ(q.NextTime(), AtSeconds(1));
  std::vector<int> order;
  while (!q.empty()) order.push_back(q.Pop().payload);
  EXPECT_EQ(order, (std::vector<int>{2, 4, 1, 3}));
  EXPECT_EQ(q.NextTime(), TimePoint::max());
}

}  // namespace
}  // namespace talaria
