#include "memory/kv_pool.h"

#include <gtest/gtest.h>

namespace talaria {
namespace {

TEST(KvPoolTest, AllocatesLowestAddressesFirst) {
  KvPool pool;
  pool.Format({1000, 1000 + 200 * 10}, 10);  // 200 blocks
  EXPECT_EQ(pool.total_blocks(), 200);
  std::vector<BlockId> a, b;
  ASSERT_TRUE(pool.Allocate(3, a));
  EXPECT_EQ(a, (std::vector<BlockId>{0, 1, 2}));
  ASSERT_TRUE(pool.Allocate(70, b));
  EXPECT_EQ(b.front(), 3);
  EXPECT_EQ(b.back(), 72);
  pool.Free(std::span(a).subspan(1, 1));  // free block 1
  std::vector<BlockId> c;
  ASSERT_TRUE(pool.Allocate(2, c));
  EXPECT_EQ(c, (std::vector<BlockId>{1, 73}));
  EXPECT_EQ(pool.BlockRange(1), (Region{1010, 1020}));
}

// The highest allocated block's end follows allocations up and frees down,
// across words of the bitmap, and a new format starts empty.
TEST(KvPoolTest, HighestAllocatedEndFollowsAllocationsAndFrees) {
  KvPool pool;
  pool.Format({1000, 1000 + 200 * 10}, 10);
  EXPECT_EQ(pool.HighestAllocatedEnd(), 1000);
  std::vector<BlockId> a, b;
  ASSERT_TRUE(pool.Allocate(3, a));
  EXPECT_EQ(pool.HighestAllocatedEnd(), 1030);
  ASSERT_TRUE(pool.Allocate(150, b));  // blocks 3..152: three words up
  EXPECT_EQ(pool.HighestAllocatedEnd(), 1000 + 153 * 10);
  pool.Free(std::span(b).subspan(20));  // blocks 23..152 go
  EXPECT_EQ(pool.HighestAllocatedEnd(), 1000 + 23 * 10);
  std::vector<BlockId> c;
  ASSERT_TRUE(pool.Allocate(100, c));  // 23..122
  EXPECT_EQ(pool.HighestAllocatedEnd(), 1000 + 123 * 10);
  pool.Free(a);
  pool.Free(std::span(b).first(20));
  pool.Free(c);
  EXPECT_EQ(pool.HighestAllocatedEnd(), 1000);
  pool.Format({0, 640}, 10);  // 64 blocks: one word
  std::vector<BlockId> d;
  ASSERT_TRUE(pool.Allocate(64, d));
  EXPECT_EQ(pool.HighestAllocatedEnd(), 640);
}

// A region is in use when any block overlapping it is allocated, at any
// alignment against the free map's 64-block words.
TEST(KvPoolTest, AnyAllocatedInSeesEachAllocatedBlockAtAnyAlignment) {
  KvPool pool;
  pool.Format({1000, 1000 + 200 * 10}, 10);  // 200 blocks: four words, the last partial
  std::vector<BlockId> all;
  ASSERT_TRUE(pool.Allocate(200, all));
  pool.Free(all);
  for (const BlockId used : {BlockId{0}, BlockId{63}, BlockId{64}, BlockId{130}, BlockId{199}}) {
    std::vector<BlockId> one;
    ASSERT_TRUE(pool.Allocate(static_cast<std::int32_t>(used) + 1, one));  // lowest first: 0..used
    pool.Free(std::span(one).first(static_cast<std::size_t>(used)));      // keep only `used`
    const std::int64_t at = 1000 + static_cast<std::int64_t>(used) * 10;
    EXPECT_TRUE(pool.AnyAllocatedIn({at, at + 10})) << used;
    EXPECT_TRUE(pool.AnyAllocatedIn({at + 5, at + 6})) << used;  // inside the block
    EXPECT_TRUE(pool.AnyAllocatedIn({1000, 3000})) << used;
    EXPECT_TRUE(pool.AnyAllocatedIn({at - 700, at + 1})) << used;
    EXPECT_FALSE(pool.AnyAllocatedIn({1000, at})) << used;             // everything below
    EXPECT_FALSE(pool.AnyAllocatedIn({at + 10, 3000})) << used;        // everything above
    EXPECT_FALSE(pool.AnyAllocatedIn({3000, 4000})) << used;           // outside the region
    pool.Free(std::span(one).subspan(static_cast<std::size_t>(used)));
    EXPECT_FALSE(pool.AnyAllocatedIn({1000, 3000})) << used;
  }
}

TEST(KvPoolTest, AllOrNothingWhenShort) {
  KvPool pool;
  pool.Format({0, 100}, 10);
  std::vector<BlockId> out;
  ASSERT_TRUE(pool.Allocate(8, out));
  EXPECT_FALSE(pool.Allocate(3, out));
  EXPECT_EQ(out.size(), 8u);
  EXPECT_EQ(pool.free_blocks(), 2);
}

TEST(KvPoolTest, SkipRangeIsNotHandedOut) {
  KvPool pool;
  pool.Format({0, 100}, 10);
  pool.SetSkip({15, 45});  // blocks 1..4
  std::vector<BlockId> out;
  ASSERT_TRUE(pool.Allocate(3, out));
  EXPECT_EQ(out, (std::vector<BlockId>{0, 5, 6}));
  EXPECT_FALSE(pool.Allocate(4, out));  // 3 left outside the skip range
  pool.ClearSkip();
  ASSERT_TRUE(pool.Allocate(4, out));
  EXPECT_EQ(out.back(), 4);
}

// Allocation starts past the words it filled, yet a block freed below them
// is the next one handed out.
TEST(KvPoolTest, ABlockFreedBelowFullWordsIsHandedOutFirst) {
  KvPool pool;
  pool.Format({0, 200 * 10}, 10);
  std::vector<BlockId> a, b, c, d;
  ASSERT_TRUE(pool.Allocate(130, a));  // words 0 and 1 full
  ASSERT_TRUE(pool.Allocate(1, b));
  EXPECT_EQ(b, (std::vector<BlockId>{130}));
  pool.Free(std::span(a).subspan(5, 1));
  pool.Free(std::span(a).subspan(70, 1));
  ASSERT_TRUE(pool.Allocate(3, c));
  EXPECT_EQ(c, (std::vector<BlockId>{5, 70, 131}));
  pool.Free(std::span(a).first(5));  // blocks 0..4
  ASSERT_TRUE(pool.Allocate(1, d));
  EXPECT_EQ(d, (std::vector<BlockId>{0}));
}

// A skip range across words holds back only its free blocks: the rest of
// the pool can still satisfy a request that fits outside it.
TEST(KvPoolTest, SkipRangeAcrossWordsHoldsBackOnlyItsFreeBlocks) {
  KvPool pool;
  pool.Format({0, 200 * 10}, 10);
  std::vector<BlockId> a, b;
  ASSERT_TRUE(pool.Allocate(60, a));  // 0..59
  pool.SetSkip({50 * 10, 150 * 10});  // blocks 50..149: 90 of them free
  EXPECT_FALSE(pool.Allocate(51, b));  // 50 free outside it
  EXPECT_TRUE(b.empty());
  ASSERT_TRUE(pool.Allocate(50, b));
  EXPECT_EQ(b.front(), 150);
  EXPECT_EQ(b.back(), 199);
}

// Whole free words are handed out at once, except one the skip range covers.
TEST(KvPoolTest, WholeFreeWordsSkipTheSkipRange) {
  KvPool pool;
  pool.Format({0, 300 * 10}, 10);
  pool.SetSkip({64 * 10, 128 * 10});  // word 1 exactly
  std::vector<BlockId> a{-1};          // appended after what is there
  ASSERT_TRUE(pool.Allocate(130, a));
  ASSERT_EQ(a.size(), 131u);
  EXPECT_EQ(a[0], -1);
  for (std::size_t k = 1; k <= 64; ++k) EXPECT_EQ(a[k], static_cast<BlockId>(k - 1));
  for (std::size_t k = 65; k <= 130; ++k) EXPECT_EQ(a[k], static_cast<BlockId>(128 + k - 65));
  EXPECT_EQ(pool.free_blocks(), 170);
  EXPECT_EQ(pool.HighestAllocatedEnd(), 194 * 10);
}

// Into a block list: runs of free bits, lowest first, around the skip
// range and the blocks in use; freeing a tail returns exactly those blocks.
TEST(KvPoolTest, AllocatesRunsAroundTheSkipRangeAndFreesTails) {
  KvPool pool;
  pool.Format({0, 300 * 10}, 10);
  std::vector<BlockId> held;
  ASSERT_TRUE(pool.Allocate(70, held));
  pool.Free(std::span(held).subspan(2, 3));   // 2..4 free again
  pool.Free(std::span(held).subspan(60, 1));  // 60 free again
  pool.SetSkip({100 * 10, 140 * 10});         // 100..139 held back
  BlockList l;
  ASSERT_TRUE(pool.Allocate(40, l));  // 2..4, 60, 70..99, 140..145
  EXPECT_EQ(l.size(), 40);
  EXPECT_EQ(std::vector<BlockRun>(l.runs().begin(), l.runs().end()),
            (std::vector<BlockRun>{{2, 3}, {60, 1}, {70, 30}, {140, 6}}));
  EXPECT_EQ(pool.free_blocks(), 300 - 70 + 4 - 40);
  pool.ClearSkip();
  pool.Free(l, 4);  // 70..99 and 140..145 go; 2..4 and 60 stay
  EXPECT_EQ(pool.free_blocks(), 300 - 70 + 4 - 4);
  std::vector<BlockId> next;
  ASSERT_TRUE(pool.Allocate(2, next));
  EXPECT_EQ(next, (std::vector<BlockId>{70, 71}));
}

// A format drops every block whatever the previous one left: allocated
// blocks, a partial last word, a larger or smaller map (a model switch
// formats the region in the next model's block size).
TEST(KvPoolTest, EachFormatStartsWithEveryBlockFreeAtAnySize) {
  KvPool pool;
  pool.Format({0, 200 * 10}, 10);  // 200 blocks: 3 words and 8 bits
  std::vector<BlockId> got;
  ASSERT_TRUE(pool.Allocate(130, got));
  for (const std::int64_t block : {std::int64_t{4}, std::int64_t{3}, std::int64_t{25}, std::int64_t{10}}) {
    pool.Format({0, 2000}, block);
    const std::int32_t total = static_cast<std::int32_t>(2000 / block);
    EXPECT_EQ(pool.total_blocks(), total);
    EXPECT_EQ(pool.free_blocks(), total);
    EXPECT_FALSE(pool.AnyAllocatedIn({0, 2000}));
    std::vector<BlockId> all;
    ASSERT_TRUE(pool.Allocate(total, all)) << block;  // every block is there, once
    ASSERT_EQ(all.size(), static_cast<std::size_t>(total));
    for (std::int32_t i = 0; i < total; ++i) EXPECT_EQ(all[static_cast<std::size_t>(i)], i);
    EXPECT_FALSE(pool.Allocate(1, all));  // and none past the end
    EXPECT_EQ(pool.HighestAllocatedEnd(), static_cast<std::int64_t>(total) * block);
  }
  // A small pool's partial last word, left with nothing allocated, is free
  // again when the next format grows the pool past it.
  pool.Format({0, 2000}, 25);  // 80 blocks: one word and 16 bits
  pool.Format({0, 2000}, 4);   // 500 blocks
  std::vector<BlockId> all;
  ASSERT_TRUE(pool.Allocate(500, all));
  for (std::int32_t i = 0; i < 500; ++i) ASSERT_EQ(all[static_cast<std::size_t>(i)], i);
}

TEST(KvPoolDeathTest, FreeingARunWithAFreeBlockIsABug) {
  KvPool pool;
  pool.Format({0, 1000}, 10);
  BlockList l;
  ASSERT_TRUE(pool.Allocate(10, l));
  pool.Free(std::vector<BlockId>{5});
  EXPECT_DEATH(pool.Free(l), "not allocated");
}

TEST(KvPoolDeathTest, DoubleFreeIsABug) {
  KvPool pool;
  pool.Format({0, 100}, 10);
  std::vector<BlockId> out;
  pool.Allocate(1, out);
  pool.Free(out);
  EXPECT_DEATH(pool.Free(out), "not allocated");
}

}  // namespace
}  // namespace talaria
