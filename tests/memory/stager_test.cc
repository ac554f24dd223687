#include "memory/stager.h"

#include <gtest/gtest.h>

namespace talaria {
namespace {

// A 1000-byte KV region of 10-byte blocks; 100-byte chunks copied at
// 100 B/s, so one chunk per second.
class StagerTest : public ::testing::Test {
 protected:
  void SetUp() override { pool.Format({0, 1000}, 10); }
  KvPool pool;
  Stager stager{100, 100.0};
};

TEST_F(StagerTest, FullyStagedCleanChunksGatherDeviceToDevice) {
  stager.Begin("next", 300, AtSeconds(0), pool);
  stager.AdvanceTo(AtSeconds(3), pool);
  const GatherPlan plan = stager.Plan("next", 300);
  EXPECT_EQ(plan.path, SwitchPath::kD2d);
  EXPECT_EQ(plan.d2d_bytes, 300);
  EXPECT_EQ(stager.CleanBytes(), 300);
  EXPECT_EQ(plan.h2d_bytes, 0);
  EXPECT_EQ(stager.ChunkRange(0), (Region{900, 1000}));  // chunk 0 at the top
}

TEST_F(StagerTest, UnfinishedStagingIsPartialAndOtherModelsAreH2d) {
  stager.Begin("next", 300, AtSeconds(0), pool);
  stager.AdvanceTo(AtSeconds(1.5), pool);  // one chunk done, one writing
  const GatherPlan plan = stager.Plan("next", 300);
  EXPECT_EQ(plan.path, SwitchPath::kPartial);
  EXPECT_EQ(plan.d2d_bytes, 100);
  EXPECT_EQ(stager.CleanBytes(), 100);  // the chunk being written does not count
  EXPECT_EQ(stager.StagedBytes(), 200);
  EXPECT_EQ(plan.h2d_bytes, 200);
  EXPECT_EQ(stager.Plan("other", 300).path, SwitchPath::kH2d);
}

// What staging still copies, at its rate: the weights not yet clean, as far
// as the region's free top (and the chunk in flight) reach.
TEST_F(StagerTest, SecondsToStageCountsWhatTheFreeTopStillTakes) {
  stager.Begin("next", 300, AtSeconds(0), pool);
  stager.AdvanceTo(AtSeconds(1.5), pool);  // chunk 0 clean, chunk 1 writing
  EXPECT_DOUBLE_EQ(stager.SecondsToStage("next", 300, pool), 2.0);
  EXPECT_EQ(stager.SecondsToStage("other", 300, pool), 0);
  EXPECT_EQ(stager.SecondsToStage("next", 400, pool), 0);  // another size: not this staging
  stager.AdvanceTo(AtSeconds(3), pool);
  EXPECT_EQ(stager.SecondsToStage("next", 300, pool), 0);

  KvPool tight;
  tight.Format({0, 1000}, 10);
  std::vector<BlockId> blocks;
  ASSERT_TRUE(tight.Allocate(75, blocks));  // rows up to 750: chunk 2 [700, 800) cannot be written
  Stager partial{100, 100.0};
  partial.Begin("next", 300, AtSeconds(0), tight);
  partial.AdvanceTo(AtSeconds(1.5), tight);  // chunk 0 clean, chunk 1 writing; 50 free bytes above the KV
  EXPECT_DOUBLE_EQ(partial.SecondsToStage("next", 300, tight), 1.5);
}

TEST_F(StagerTest, ClearForgetsTheStagedModel) {
  stager.Begin("next", 300, AtSeconds(0), pool);
  stager.AdvanceTo(AtSeconds(3), pool);
  const std::uint64_t serial = stager.serial();
  stager.Clear(pool);
  EXPECT_EQ(stager.Plan("next", 300).path, SwitchPath::kH2d);
  EXPECT_EQ(stager.StagedBytes(), 0);
  EXPECT_EQ(stager.staged_model(), "");
  EXPECT_GT(stager.serial(), serial);  // an engine's copies belong to the staging before
}

TEST_F(StagerTest, OverlappingKvAllocationDirtiesChunkAndGatherReloadsIt) {
  stager.Begin("next", 300, AtSeconds(0), pool);
  stager.AdvanceTo(AtSeconds(3), pool);
  std::vector<BlockId> blocks;
  ASSERT_TRUE(pool.Allocate(75, blocks));  // blocks 0..74: bytes [0, 750) reach chunk 2 [700, 800)
  stager.OnAllocated(blocks, pool);
  EXPECT_EQ(stager.chunks()[2], Stager::ChunkState::kDirty);
  EXPECT_EQ(stager.chunks()[1], Stager::ChunkState::kClean);
  const GatherPlan plan = stager.Plan("next", 300);
  EXPECT_EQ(plan.path, SwitchPath::kPartial);
  EXPECT_EQ(plan.d2d_bytes, 200);
  EXPECT_EQ(stager.CleanBytes(), 200);
  EXPECT_EQ(plan.h2d_bytes, 100);  // the dirty chunk comes from host
  EXPECT_EQ(plan.dirty_bytes, 100);
}

// A run of blocks dirties every chunk its bytes reach, as its blocks one
// by one would.
TEST_F(StagerTest, ARunOfBlocksDirtiesTheChunksItSpans) {
  stager.Begin("next", 300, AtSeconds(0), pool);
  stager.AdvanceTo(AtSeconds(3), pool);  // chunks 0..2 [700, 1000) clean
  BlockList run;
  run.Append(65, 20);  // bytes [650, 850): chunks 2 and 1
  stager.OnAllocated(run, pool);
  EXPECT_EQ(stager.chunks()[2], Stager::ChunkState::kDirty);
  EXPECT_EQ(stager.chunks()[1], Stager::ChunkState::kDirty);
  EXPECT_EQ(stager.chunks()[0], Stager::ChunkState::kClean);
  EXPECT_EQ(stager.CleanBytes(), 100);
}

TEST_F(StagerTest, AllocatorSkipsTheChunkBeingWritten) {
  stager.Begin("next", 300, AtSeconds(0), pool);  // chunk 0 [900, 1000) writing
  std::vector<BlockId> blocks;
  ASSERT_TRUE(pool.Allocate(90, blocks));  // the 90 blocks below the chunk
  EXPECT_FALSE(pool.Allocate(1, blocks));  // only the chunk's rows are free
  stager.AdvanceTo(AtSeconds(1), pool);    // chunk 0 clean; chunk 1's rows are in use
  EXPECT_EQ(stager.chunks()[0], Stager::ChunkState::kClean);
  EXPECT_EQ(stager.chunks()[1], Stager::ChunkState::kMissing);
  ASSERT_TRUE(pool.Allocate(1, blocks));  // no write in progress: rows free again
  stager.OnAllocated(std::span(blocks).last(1), pool);
  EXPECT_EQ(stager.chunks()[0], Stager::ChunkState::kDirty);
}

TEST_F(StagerTest, ChunksOverUsedRowsStayMissing) {
  std::vector<BlockId> blocks;
  ASSERT_TRUE(pool.Allocate(85, blocks));  // rows up to 850: chunk 1 [800, 900) in use
  stager.Begin("next", 300, AtSeconds(0), pool);
  stager.AdvanceTo(AtSeconds(10), pool);
  EXPECT_EQ(stager.chunks()[0], Stager::ChunkState::kClean);
  EXPECT_EQ(stager.chunks()[1], Stager::ChunkState::kMissing);
  EXPECT_EQ(stager.chunks()[2], Stager::ChunkState::kMissing);
  EXPECT_EQ(stager.Plan("next", 300).d2d_bytes, 100);
}

TEST_F(StagerTest, StagingSlackIsFreeTopBytesNotYetStaged) {
  std::vector<BlockId> blocks;
  ASSERT_TRUE(pool.Allocate(20, blocks));  // [0, 200) used
  EXPECT_EQ(stager.StagingSlackBytes(pool), 800);
  stager.Begin("next", 300, AtSeconds(0), pool);
  stager.AdvanceTo(AtSeconds(2), pool);  // two clean + one writing
  EXPECT_EQ(stager.StagingSlackBytes(pool), 500);
}

}  // namespace
}  // namespace talaria
