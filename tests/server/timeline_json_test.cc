#include "server/timeline_json.h"

#include <gtest/gtest.h>

namespace talaria {
namespace {

using nlohmann::json;

TEST(TimelineCursorsTest, ReadsTheAfterParameterAmongOthers) {
  std::vector<std::uint64_t> after;
  std::string error;
  EXPECT_TRUE(ParseTimelineCursors("", 3, after, error));
  EXPECT_TRUE(after.empty());
  EXPECT_TRUE(ParseTimelineCursors("x=1&after=4,0,17&y", 3, after, error)) << error;
  EXPECT_EQ(after, (std::vector<std::uint64_t>{4, 0, 17}));
  for (const char* bad : {"after=", "after=1,,2", "after=+1", "after=1.5", "after=1,2,3,4", "after=18446744073709551616"}) {
    EXPECT_FALSE(ParseTimelineCursors(bad, 3, after, error)) << bad;
    EXPECT_NE(error.find("'after'"), std::string::npos) << error;
  }
}

json Entry(double now_s, std::vector<std::uint64_t> seqs, bool open) {
  json segments = json::array();
  for (auto seq : seqs) segments.push_back({{"seq", seq}, {"phase", "decode"}});
  return {{"instance", "w"}, {"now_s", now_s}, {"segments", segments},
          {"open", open ? json{{"seq", seqs.empty() ? 1 : seqs.back() + 1}} : json(nullptr)}};
}

// A gateway's copy of a remote instance's timeline: polled only while
// someone watches; segments kept once each, in order; a viewer's cursor
// selects the newer ones; a malformed answer changes nothing.
TEST(TimelineCacheTest, KeepsSegmentsOnceAndPollsOnlyWhileWatched) {
  TimelineCache cache;
  const auto t0 = std::chrono::steady_clock::time_point{} + std::chrono::hours(1);
  std::uint64_t after = 99;
  EXPECT_FALSE(cache.Wanted(t0, after));
  EXPECT_EQ(after, 0u);
  cache.Want(t0);
  EXPECT_TRUE(cache.Wanted(t0 + std::chrono::seconds(9), after));
  EXPECT_FALSE(cache.Wanted(t0 + TimelineCache::kWatchFor, after));

  ASSERT_TRUE(cache.Merge(Entry(10, {1, 2, 3}, true), t0));
  ASSERT_TRUE(cache.Merge(Entry(11, {3, 4}, false), t0));  // 3 again: kept once
  EXPECT_TRUE(cache.Wanted(t0, after));
  EXPECT_EQ(after, 4u);
  const json view = cache.View("w", 2, t0 + std::chrono::milliseconds(500));
  ASSERT_EQ(view["segments"].size(), 2u);
  EXPECT_EQ(view["segments"][0]["seq"], 3);
  EXPECT_EQ(view["segments"][1]["seq"], 4);
  EXPECT_TRUE(view["open"].is_null());
  EXPECT_DOUBLE_EQ(view["now_s"].get<double>(), 11.5);  // moved on by the wall time since the poll

  for (const json& bad : {json(nullptr), json{{"now_s", "x"}, {"segments", json::array()}, {"open", nullptr}},
                          json{{"now_s", 1}, {"segments", json::array({json{{"seq", -1}}})}, {"open", nullptr}},
                          json{{"now_s", 1}, {"segments", json::array()}, {"open", 3}}}) {
    EXPECT_FALSE(cache.Merge(bad, t0)) << bad.dump();
  }
  EXPECT_EQ(cache.View("w", 0, t0)["segments"].size(), 4u);
}

TEST(TimelineCacheTest, KeepsOnlyTheNewest) {
  TimelineCache cache;
  std::vector<std::uint64_t> seqs;
  for (std::uint64_t s = 1; s <= TimelineCache::kKept + 10; ++s) seqs.push_back(s);
  ASSERT_TRUE(cache.Merge(Entry(1, seqs, false), {}));
  const json view = cache.View("w", 0, {});
  ASSERT_EQ(view["segments"].size(), TimelineCache::kKept);
  EXPECT_EQ(view["segments"][0]["seq"], 11);
}

}  // namespace
}  // namespace talaria
