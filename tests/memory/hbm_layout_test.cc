#include "memory/hbm_layout.h"

#include <gtest/gtest.h>

#include "core/units.h"

namespace talaria {
namespace {

HbmLayout::Options Opts() {
  return {.arena_bytes = 140 * kGiB, .runtime_bytes = 4 * kGiB, .graph_pool_bytes = 2 * kGiB,
          .min_kv_bytes = 8 * kGiB};
}

TEST(HbmLayoutTest, StructuralAddressesIdenticalAcrossSwitchAndBack) {
  HbmLayout layout(Opts());
  ASSERT_TRUE(layout.AddModel("big", 55 * kGiB));
  ASSERT_TRUE(layout.AddModel("small", 28 * kGiB));
  const auto first = layout.Activate("big");
  EXPECT_TRUE(first.first);
  const LayoutBases at_big = layout.bases();
  const Region kv_big = layout.kv();

  EXPECT_FALSE(layout.Activate("small").bases_changed);  // m -> m'
  EXPECT_EQ(layout.bases(), at_big);
  EXPECT_EQ(layout.weights(), (Region{0, 28 * kGiB}));  // weight region resized
  EXPECT_EQ(layout.kv(), kv_big);                        // KV pool did not move

  const auto back = layout.Activate("big");  // m' -> m
  EXPECT_FALSE(back.first);
  EXPECT_FALSE(back.bases_changed);
  EXPECT_EQ(layout.bases(), at_big);
}

TEST(HbmLayoutTest, RegionsTileTheArenaInOrder) {
  HbmLayout layout(Opts());
  ASSERT_TRUE(layout.AddModel("m", 50 * kGiB));
  layout.Activate("m");
  EXPECT_EQ(layout.weights().end, 50 * kGiB);
  EXPECT_EQ(layout.kv().begin, 50 * kGiB);
  EXPECT_EQ(layout.kv().end, layout.graph_pool().begin);
  EXPECT_EQ(layout.graph_pool().end, layout.runtime().begin);
  EXPECT_EQ(layout.runtime().end, 140 * kGiB);
  EXPECT_EQ(layout.runtime().size(), 4 * kGiB);
}

TEST(HbmLayoutTest, HostingALargerModelMovesKvAndForcesRecapture) {
  HbmLayout layout(Opts());
  ASSERT_TRUE(layout.AddModel("a", 30 * kGiB));
  layout.Activate("a");
  ASSERT_TRUE(layout.AddModel("b", 60 * kGiB));  // kv_base moves up
  layout.Activate("b");
  const auto again = layout.Activate("a");
  EXPECT_TRUE(again.bases_changed);
  EXPECT_FALSE(layout.Activate("a").bases_changed);  // recaptured once
}

TEST(HbmLayoutTest, RejectsAModelThatLeavesTooLittleKv) {
  HbmLayout layout(Opts());
  EXPECT_FALSE(layout.AddModel("huge", 130 * kGiB));
  EXPECT_FALSE(layout.Hosts("huge"));
}

}  // namespace
}  // namespace talaria
