#include "sim/event_queue.h"

#include <gtest/gtest.h>

#include <random>
#include <set>
#include <utility>
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

// The heap against a reference: under random pushes (many ties) and pops,
// every pop is the earliest event, the earliest pushed among equal times.
TEST(EventQueueTest, EveryPopIsTheEarliestEventPending) {
  std::mt19937_64 rng(11);
  EventQueue<int> q;
  std::set<std::pair<TimePoint, int>> pending;  // (time, push order)
  int next = 0;
  for (int op = 0; op < 20000; ++op) {
    if (rng() % 5 < 3) {
      const TimePoint at = AtSeconds(static_cast<double>(rng() % 50));
      q.Push(at, next);
      pending.emplace(at, next++);
    } else if (!pending.empty()) {
      ASSERT_EQ(q.size(), pending.size());
      const auto e = q.Pop();
      ASSERT_EQ(std::make_pair(e.at, e.payload), *pending.begin());
      pending.erase(pending.begin());
    }
  }
  for (; !pending.empty(); pending.erase(pending.begin())) ASSERT_EQ(q.Pop().payload, pending.begin()->second);
  EXPECT_TRUE(q.empty());
}

// Events pushed in bulk (PushMany) come out in exactly the order they would
// had each been pushed alone at that point, interleaved with single pushes
// and pops, ties in time included.
TEST(EventQueueTest, BulkPushesKeepTheOrderOfSinglePushes) {
  std::mt19937_64 rng(7);
  for (int round = 0; round < 50; ++round) {
    EventQueue<int> bulk;
    EventQueue<int> single;
    std::vector<int> bulk_order;
    std::vector<int> single_order;
    int next = 0;
    for (int op = 0; op < 200; ++op) {
      const auto kind = rng() % 4;
      if (kind == 0) {  // a batch, times from a few values so many tie
        std::vector<std::pair<TimePoint, int>> batch;
        const auto n = rng() % 20;
        for (std::uint64_t k = 0; k < n; ++k) batch.emplace_back(AtSeconds(static_cast<double>(rng() % 8)), next++);
        bulk.PushMany(batch);
        for (const auto& [at, payload] : batch) single.Push(at, payload);
      } else if (kind == 1) {
        const TimePoint at = AtSeconds(static_cast<double>(rng() % 8));
        bulk.Push(at, next);
        single.Push(at, next++);
      } else if (!single.empty()) {
        ASSERT_EQ(bulk.size(), single.size());
        ASSERT_EQ(bulk.NextTime(), single.NextTime());
        ASSERT_EQ(bulk.Top().payload, single.Top().payload);
        bulk_order.push_back(bulk.Pop().payload);
        single_order.push_back(single.Pop().payload);
      }
    }
    while (!single.empty()) {
      ASSERT_FALSE(bulk.empty());
      bulk_order.push_back(bulk.Pop().payload);
      single_order.push_back(single.Pop().payload);
    }
    EXPECT_TRUE(bulk.empty());
    EXPECT_EQ(bulk_order, single_order);
  }
}

}  // namespace
}  // namespace talaria
