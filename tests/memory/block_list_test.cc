#include "memory/block_list.h"

#include <gtest/gtest.h>

namespace talaria {
namespace {

std::vector<BlockId> Ids(const BlockList& l) {
  std::vector<BlockId> out;
  l.AppendIds(out);
  return out;
}

TEST(BlockListTest, ContinuingBlocksMergeIntoOneRun) {
  BlockList l;
  l.Append(10, 3);  // 10..12
  l.Append(13, 2);  // continues: 10..14
  l.Append(20, 1);  // a new run
  l.Append(21, 0);  // nothing
  EXPECT_EQ(l.size(), 6);
  ASSERT_EQ(l.runs().size(), 2u);
  EXPECT_EQ(l.runs()[0], (BlockRun{10, 5}));
  EXPECT_EQ(l.runs()[1], (BlockRun{20, 1}));
  EXPECT_EQ(Ids(l), (std::vector<BlockId>{10, 11, 12, 13, 14, 20}));
  EXPECT_EQ(l.at(4), 14);
  EXPECT_EQ(l.at(5), 20);
}

TEST(BlockListTest, TruncateKeepsAPrefixAcrossRuns) {
  BlockList l;
  l.Append(0, 4);
  l.Append(8, 4);
  l.Append(20, 4);
  l.Truncate(6);  // 0..3, 8..9
  EXPECT_EQ(Ids(l), (std::vector<BlockId>{0, 1, 2, 3, 8, 9}));
  ASSERT_EQ(l.runs().size(), 2u);
  l.Truncate(4);  // a run boundary: the second run goes whole
  EXPECT_EQ(l.runs().size(), 1u);
  l.Append(4, 1);  // continues the kept run again
  EXPECT_EQ(l.runs().size(), 1u);
  EXPECT_EQ(l.size(), 5);
  l.Truncate(0);
  EXPECT_TRUE(l.empty());
  EXPECT_TRUE(l.runs().empty());
}

TEST(BlockListTest, RunsFromAPositionCutTheFirst) {
  BlockList l;
  l.Append(0, 4);
  l.Append(10, 3);
  std::vector<BlockRun> seen;
  l.ForEachRunFrom(2, [&](BlockRun r) { seen.push_back(r); });
  EXPECT_EQ(seen, (std::vector<BlockRun>{{2, 2}, {10, 3}}));
  seen.clear();
  l.ForEachRunFrom(5, [&](BlockRun r) { seen.push_back(r); });
  EXPECT_EQ(seen, (std::vector<BlockRun>{{11, 2}}));
  seen.clear();
  l.ForEachRunFrom(7, [&](BlockRun r) { seen.push_back(r); });
  EXPECT_TRUE(seen.empty());
}

TEST(BlockListTest, AppendingAListMergesAtTheSeam) {
  BlockList a, b;
  a.Append(0, 2);
  b.Append(2, 3);
  b.Append(9, 1);
  a.Append(b);
  EXPECT_EQ(a.runs().size(), 2u);
  EXPECT_EQ(Ids(a), (std::vector<BlockId>{0, 1, 2, 3, 4, 9}));
}

TEST(BlockListDeathTest, TruncatingBeyondTheSizeIsABug) {
  BlockList l;
  l.Append(0, 2);
  EXPECT_DEATH(l.Truncate(3), "beyond its size");
}

}  // namespace
}  // namespace talaria
