#include "memory/host_kv_registry.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <vector>

#include "memory/block_hashes.h"

namespace talaria {
namespace {

std::vector<PrefixHash> Chain(std::uint64_t seed, std::int64_t tokens) {
  std::vector<PrefixHash> c;
  ExtendSessionChain(c, 0, tokens, 64, seed, 0);
  return c;
}

constexpr double kRate = 1000.0;  // bytes/s: 100-byte blocks copy in 0.1 s

TEST(HostKvRegistryTest, TpDisagreementPublishesOnlyTheAgreedPrefix) {
  const auto full = Chain(1, 64 * 10);
  std::vector<PrefixHash> lagging(full.begin(), full.begin() + 7);  // rank 1 committed 7
  std::vector<PrefixHash> diverged = full;
  diverged[5] ^= 1;  // rank 2's block 5 hash differs
  const RankReport ranks[] = {{full}, {lagging}, {diverged}};
  const std::int32_t agreed = AgreedBlocks(ranks);
  EXPECT_EQ(agreed, 5);

  HostKvRegistry hkvr(1'000'000);
  hkvr.Checkpoint(0, full, agreed, 100, 0, AtSeconds(0), kRate);
  EXPECT_EQ(hkvr.Lookup(0, full, AtSeconds(10)), 5);  // the tail is recomputed
  EXPECT_FALSE(hkvr.IsPublished(0, full[5]));
}

TEST(HostKvRegistryTest, BlockWhoseCopyHasNotCompletedIsNeverPublished) {
  const auto chain = Chain(2, 64 * 4);
  HostKvRegistry hkvr(1'000'000);
  const auto r = hkvr.Checkpoint(0, chain, 4, 100, 0, AtSeconds(0), kRate);
  EXPECT_EQ(r.copied_blocks, 4);
  EXPECT_EQ(r.done, AtSeconds(0.4));
  EXPECT_EQ(hkvr.Lookup(0, chain, AtSeconds(0.25)), 2);  // blocks 0, 1 done
  EXPECT_EQ(hkvr.Lookup(0, chain, AtSeconds(0.4)), 4);
}

// A chain checkpointed again after its first copies landed grows the same
// segment; its new blocks publish one by one as their copies complete, and
// eviction then trims it from the tail.
TEST(HostKvRegistryTest, ASegmentGrownAfterItsCopiesLandedPublishesInOrder) {
  const auto chain = Chain(21, 64 * 8);
  HostKvRegistry hkvr(1'000'000);
  hkvr.Checkpoint(0, chain, 3, 100, 0, AtSeconds(0), kRate, /*owner=*/7);
  ASSERT_EQ(hkvr.Lookup(0, chain, AtSeconds(1)), 3);
  const auto r = hkvr.Checkpoint(0, chain, 8, 100, 0, AtSeconds(1), kRate, /*owner=*/7);
  EXPECT_EQ(r.present_blocks, 3);
  EXPECT_EQ(r.copied_blocks, 5);
  EXPECT_EQ(hkvr.Probe(0, chain), 3);
  for (int landed = 1; landed <= 5; ++landed) {
    EXPECT_EQ(hkvr.Lookup(0, chain, AtSeconds(1 + 0.1 * landed + 0.01)), 3 + landed) << landed;
  }
  hkvr.Checkpoint(0, chain, 8, 100, 0, AtSeconds(2), kRate, /*owner=*/7);  // nothing new
  EXPECT_EQ(hkvr.Probe(0, chain), 8);
  EXPECT_EQ(hkvr.outstanding_copies(), 0u);
}

TEST(HostKvRegistryTest, BlockUnderDmaIsNeverReclaimed) {
  const auto a = Chain(3, 64 * 5);
  const auto b = Chain(4, 64 * 5);
  HostKvRegistry hkvr(500);  // room for exactly one chain
  hkvr.Checkpoint(0, a, 5, 100, 0, AtSeconds(0), kRate);
  ASSERT_EQ(hkvr.Lookup(0, a, AtSeconds(1)), 5);
  hkvr.Pin(0, a, 5);  // a restore is copying `a` back to device
  const auto r = hkvr.Checkpoint(0, b, 5, 100, 0, AtSeconds(1), kRate);
  EXPECT_EQ(r.copied_blocks, 0);  // nothing evictable: a capacity miss
  EXPECT_EQ(r.missed_blocks, 5);
  EXPECT_EQ(hkvr.Lookup(0, a, AtSeconds(2)), 5);
  hkvr.Unpin(0, a, 5);
  const auto r2 = hkvr.Checkpoint(0, b, 5, 100, 0, AtSeconds(2), kRate);
  EXPECT_EQ(r2.copied_blocks, 5);  // unpinned: `a` evicted
  EXPECT_EQ(hkvr.Lookup(0, a, AtSeconds(3)), 0);
}

TEST(HostKvRegistryTest, EvictionDropsRadixReferenceButPinnedBytesStay) {
  const auto a = Chain(5, 64 * 2);
  HostKvRegistry hkvr(1'000'000);
  hkvr.Checkpoint(0, a, 2, 100, 0, AtSeconds(0), kRate);
  ASSERT_EQ(hkvr.Lookup(0, a, AtSeconds(1)), 2);
  hkvr.Pin(0, a, 2);
  // Force eviction pressure: a tiny registry view via a large new chain.
  HostKvRegistry small(250);
  small.Checkpoint(0, a, 2, 100, 0, AtSeconds(0), kRate);
  small.Lookup(0, a, AtSeconds(1));
  small.Pin(0, a, 1);  // only block 0 under DMA
  const auto b = Chain(6, 64 * 1);
  const auto r = small.Checkpoint(0, b, 1, 100, 0, AtSeconds(1), kRate);
  EXPECT_EQ(r.copied_blocks, 1);                 // block 1 of `a` was evictable
  EXPECT_TRUE(small.IsPublished(0, a[0]));        // pinned: kept
  EXPECT_FALSE(small.HoldsBytes(0, a[1]));
  hkvr.Unpin(0, a, 2);
}

// A session that said it ended gives up its host room first: without the
// hint the least recently used chain (a) goes; with it, the ended session's
// (b) goes although it was used later.
TEST(HostKvRegistryTest, AnEndedSessionsChainIsEvictedFirst) {
  for (bool ended : {false, true}) {
    SCOPED_TRACE(ended ? "b ended" : "no hint");
    const auto a = Chain(11, 64 * 2);
    const auto b = Chain(12, 64 * 2);
    const auto c = Chain(13, 64 * 2);
    HostKvRegistry hkvr(400);
    hkvr.Checkpoint(0, a, 2, 100, 0, AtSeconds(0), kRate, /*owner=*/1);
    hkvr.CompleteCopies(AtSeconds(1));
    hkvr.Checkpoint(0, b, 2, 100, 0, AtSeconds(1), kRate, /*owner=*/2);
    hkvr.CompleteCopies(AtSeconds(2));
    if (ended) hkvr.Demote(0, b, /*owner=*/2);
    hkvr.Checkpoint(0, c, 2, 100, 0, AtSeconds(2), kRate, /*owner=*/3);  // needs two blocks' room
    EXPECT_EQ(hkvr.Probe(0, a), ended ? 2 : 0);
    EXPECT_EQ(hkvr.Probe(0, b), ended ? 0 : 2);
    hkvr.Demote(0, a, /*owner=*/9);  // another owner's hint moves nothing
  }
}

TEST(HostKvRegistryTest, EvictionTrimsChainsFromTheTail) {
  const auto a = Chain(7, 64 * 4);
  const auto b = Chain(8, 64 * 2);
  HostKvRegistry hkvr(500);
  hkvr.Checkpoint(0, a, 4, 100, 0, AtSeconds(0), kRate);
  hkvr.CompleteCopies(AtSeconds(1));
  hkvr.Checkpoint(0, b, 2, 100, 0, AtSeconds(1), kRate);  // needs one eviction
  EXPECT_EQ(hkvr.Lookup(0, a, AtSeconds(2)), 3);  // a's last block went first
  EXPECT_EQ(hkvr.Lookup(0, b, AtSeconds(2)), 2);
  EXPECT_EQ(hkvr.evicted_blocks(), 1);
}

TEST(HostKvRegistryTest, SwitchBarrierDrainsOnlyTheOutgoingModel) {
  const auto a = Chain(9, 64 * 3);
  const auto b = Chain(10, 64 * 3);
  HostKvRegistry hkvr(1'000'000);
  hkvr.Checkpoint(/*model=*/1, a, 3, 100, 0, AtSeconds(0), kRate);  // done at 0.3
  hkvr.Checkpoint(/*model=*/2, b, 3, 100, 0, AtSeconds(0), kRate);  // queued: done at 0.6
  EXPECT_EQ(hkvr.outstanding_copies(), 6u);
  const TimePoint done = hkvr.DrainModel(1, AtSeconds(0.1));
  EXPECT_EQ(done, AtSeconds(0.3));
  EXPECT_EQ(hkvr.outstanding_copies(), 3u);  // model 2's copies still in flight
  EXPECT_TRUE(hkvr.IsPublished(1, a[2]));
  EXPECT_FALSE(hkvr.IsPublished(2, b[0]));
}

TEST(HostKvRegistryTest, VersionChangesWhenThePublishedSetDoes) {
  const auto a = Chain(12, 64 * 3);
  const auto b = Chain(13, 64 * 3);
  HostKvRegistry hkvr(300);
  const auto v0 = hkvr.version();
  hkvr.Checkpoint(0, a, 3, 100, 0, AtSeconds(0), kRate);
  EXPECT_EQ(hkvr.version(), v0);  // copies started, nothing published yet
  hkvr.CompleteCopies(AtSeconds(1));
  const auto v1 = hkvr.version();
  EXPECT_NE(v1, v0);
  EXPECT_EQ(hkvr.Probe(0, a), 3);
  hkvr.CompleteCopies(AtSeconds(2));
  EXPECT_EQ(hkvr.version(), v1);  // nothing changed
  hkvr.Checkpoint(0, b, 3, 100, 0, AtSeconds(2), kRate);  // evicts a
  EXPECT_NE(hkvr.version(), v1);
  EXPECT_EQ(hkvr.Probe(0, a), 0);
}

TEST(HostKvRegistryTest, ModelsDoNotShareBlocks) {
  const auto a = Chain(11, 64 * 3);
  HostKvRegistry hkvr(1'000'000);
  hkvr.Checkpoint(1, a, 3, 100, 0, AtSeconds(0), kRate);
  EXPECT_EQ(hkvr.Lookup(2, a, AtSeconds(5)), 0);
  EXPECT_EQ(hkvr.Lookup(1, a, AtSeconds(5)), 3);
}

// A chain whose tail was evicted is checkpointed again: the evicted blocks
// are copied again, and the owner whose blocks went is reported.
TEST(HostKvRegistryTest, ACheckpointCopiesAgainWhatWasEvictedSince) {
  std::vector<PrefixHash> a = Chain(10, 64 * 5);
  const auto b = Chain(11, 64 * 5);
  HostKvRegistry hkvr(800);  // 8 blocks of 100 bytes
  hkvr.Checkpoint(0, a, 5, 100, 0, AtSeconds(0), kRate, 1);
  hkvr.CompleteCopies(AtSeconds(1));
  const auto rb = hkvr.Checkpoint(0, b, 5, 100, 0, AtSeconds(1), kRate, 2);
  ASSERT_EQ(rb.copied_blocks, 5);  // room made by evicting a's two tail blocks
  ASSERT_EQ(hkvr.drops().size(), 1u);  // a's segment, trimmed twice: folded
  EXPECT_EQ(hkvr.drops()[0].owner, ChainOwner{1});
  EXPECT_EQ(hkvr.drops()[0].first, a[0]);
  EXPECT_EQ(hkvr.drops()[0].start, 0);
  EXPECT_EQ(hkvr.drops()[0].kept, 3);
  EXPECT_EQ(hkvr.drops()[0].dropped, a[3]);  // the lowest block that went
  EXPECT_EQ(hkvr.evicted_blocks(), 2);
  EXPECT_EQ(hkvr.used_bytes(), 800);
  EXPECT_EQ(hkvr.Probe(0, a), 3);
  ExtendSessionChain(a, 64 * 5, 64 * 6, 64, 10, 1);  // a's next call adds a block
  hkvr.CompleteCopies(AtSeconds(2));
  const auto ra = hkvr.Checkpoint(0, a, 6, 100, 0, AtSeconds(2), kRate, 1);
  EXPECT_EQ(ra.present_blocks, 3);
  EXPECT_EQ(ra.copied_blocks, 3);  // the two evicted ones and the new one
  EXPECT_EQ(hkvr.Lookup(0, a, AtSeconds(10)), 6);
}

// A chain that branches off inside a registered one shares its head and
// continues in a segment of its own; both stay found whole.
TEST(HostKvRegistryTest, AChainThatBranchesSharesTheHeadAndKeepsItsOwnTail) {
  const std::vector<PrefixHash> first = Chain(12, 64 * 6);
  std::vector<PrefixHash> branch = first;
  ExtendSessionChain(branch, 64 * 3, 64 * 7, 64, 12, 1);  // reuses 3 blocks, then differs
  HostKvRegistry hkvr(1'000'000);
  hkvr.Checkpoint(0, first, 6, 100, 0, AtSeconds(0), kRate, 1);
  const auto r = hkvr.Checkpoint(0, branch, 7, 100, 0, AtSeconds(1), kRate, 1);
  EXPECT_EQ(r.present_blocks, 3);
  EXPECT_EQ(r.copied_blocks, 4);
  EXPECT_EQ(hkvr.Lookup(0, branch, AtSeconds(10)), 7);
  EXPECT_EQ(hkvr.Lookup(0, first, AtSeconds(10)), 6);
  hkvr.Pin(0, branch, 5);  // across the shared head into the branch
  hkvr.Unpin(0, branch, 5);
}

// Walks try the blocks where earlier chains left a segment before bisecting
// its hashes; a chain that leaves it elsewhere still matches exactly.
TEST(HostKvRegistryTest, ChainsLeavingASegmentAtAKnownOrANewBlockMatchExactly) {
  const std::vector<PrefixHash> first = Chain(30, 64 * 8);
  auto branch_at = [&](std::int64_t blocks, std::int32_t call) {
    std::vector<PrefixHash> c = first;
    ExtendSessionChain(c, 64 * blocks, 64 * 9, 64, 30, call);  // keeps `blocks`, then differs
    return c;
  };
  HostKvRegistry hkvr(1'000'000);
  hkvr.Checkpoint(0, first, 8, 100, 0, AtSeconds(0), kRate, 1);
  EXPECT_EQ(hkvr.Checkpoint(0, branch_at(3, 1), 9, 100, 0, AtSeconds(1), kRate, 2).present_blocks, 3);
  // The same branch point, other blocks after it; then a later one, and an
  // earlier one, than any seen.
  EXPECT_EQ(hkvr.Checkpoint(0, branch_at(3, 2), 9, 100, 0, AtSeconds(2), kRate, 3).present_blocks, 3);
  EXPECT_EQ(hkvr.Checkpoint(0, branch_at(5, 3), 9, 100, 0, AtSeconds(3), kRate, 4).present_blocks, 5);
  EXPECT_EQ(hkvr.Checkpoint(0, branch_at(1, 4), 9, 100, 0, AtSeconds(4), kRate, 5).present_blocks, 1);
  EXPECT_EQ(hkvr.Lookup(0, branch_at(5, 3), AtSeconds(20)), 9);
  EXPECT_EQ(hkvr.Lookup(0, branch_at(3, 2), AtSeconds(20)), 9);
  EXPECT_EQ(hkvr.Lookup(0, first, AtSeconds(20)), 8);
}

// A block two owners' chains hold: its eviction may concern anyone.
TEST(HostKvRegistryTest, DroppingASharedBlockIsReportedForAnyOwner) {
  const auto shared = Chain(13, 64 * 2);
  const auto other = Chain(14, 64 * 2);
  HostKvRegistry hkvr(200);
  hkvr.Checkpoint(0, shared, 2, 100, 0, AtSeconds(0), kRate, 1);
  hkvr.Checkpoint(0, shared, 2, 100, 0, AtSeconds(1), kRate, 2);  // owner 2 finds them present
  hkvr.CompleteCopies(AtSeconds(1));
  hkvr.Checkpoint(0, other, 2, 100, 0, AtSeconds(2), kRate, 3);
  ASSERT_FALSE(hkvr.IsPublished(0, shared[0]));
  ASSERT_EQ(hkvr.drops().size(), 1u);
  EXPECT_EQ(hkvr.drops()[0].owner, HostKvRegistry::kAnyOwner);
  hkvr.ClearDrops();
  EXPECT_TRUE(hkvr.drops().empty());
}

// Segments cost one lookup each, so a checkpoint of a long chain that grows
// by a little each call registers one segment per call, and eviction under
// pressure still trims the least recent chain from its tail.
TEST(HostKvRegistryTest, EvictionTrimsTheLeastRecentChainAcrossItsSegments) {
  std::vector<PrefixHash> a = Chain(15, 64 * 2);
  HostKvRegistry hkvr(600);
  hkvr.Checkpoint(0, a, 2, 100, 0, AtSeconds(0), kRate, 1);
  ExtendSessionChain(a, 64 * 2, 64 * 4, 64, 15, 1);
  hkvr.Checkpoint(0, a, 4, 100, 0, AtSeconds(1), kRate, 1);  // a second segment
  const auto b = Chain(16, 64 * 2);
  hkvr.Checkpoint(0, b, 2, 100, 0, AtSeconds(2), kRate, 2);
  hkvr.CompleteCopies(AtSeconds(3));
  hkvr.Lookup(0, a, AtSeconds(3));  // a is now more recent than b
  const auto c = Chain(17, 64 * 3);
  hkvr.Checkpoint(0, c, 3, 100, 0, AtSeconds(3), kRate, 3);  // needs three blocks' room
  EXPECT_EQ(hkvr.Probe(0, b), 0);  // b (least recent) went first, whole
  EXPECT_EQ(hkvr.Probe(0, a), 3);  // then a's tail, from its second segment
  EXPECT_EQ(hkvr.evicted_blocks(), 3);
}

// A checkpoint that ends in a partial block (a hybrid model's state at the
// context's end) is found whole only by a chain that ends in that same
// partial block; the state is held exactly there, and eviction, which trims
// the tail, takes it first.
TEST(HostKvRegistryTest, APartialLastBlockCarriesTheStateAndIsFoundOnlyByName) {
  const auto full = Chain(31, 64 * 4);
  const PrefixHash partial = NamePartialSessionBlock(full, 64 * 4 + 10, 64, 31, 0);
  const BlockChain checkpoint(full, partial);
  HostKvRegistry hkvr(600);  // the checkpoint takes 550
  hkvr.Checkpoint(0, checkpoint, 5, 100, 50, AtSeconds(0), kRate, /*owner=*/1);
  EXPECT_FALSE(hkvr.HoldsTail(0, checkpoint));  // copies in flight
  EXPECT_EQ(hkvr.Lookup(0, checkpoint, AtSeconds(1)), 5);
  EXPECT_TRUE(hkvr.HoldsTail(0, checkpoint));
  EXPECT_FALSE(hkvr.HoldsTail(0, BlockChain(full)));  // the state is not at block 4's end
  EXPECT_FALSE(hkvr.HoldsTail(0, BlockChain(std::span(full).first(2))));
  // Another partial block at that position (another context's end) is not it.
  const BlockChain other(full, NamePartialSessionBlock(full, 64 * 4 + 11, 64, 31, 0));
  EXPECT_EQ(hkvr.Probe(0, other), 4);
  EXPECT_FALSE(hkvr.HoldsTail(0, other));
  // A later call's full block there does not match the partial one either.
  std::vector<PrefixHash> longer = full;
  ExtendSessionChain(longer, 64 * 4 + 10, 64 * 6, 64, 31, 1);
  EXPECT_EQ(hkvr.Probe(0, longer), 4);
  // Room for another block takes the partial block (with the state) first.
  hkvr.Checkpoint(0, Chain(32, 64), 1, 100, 0, AtSeconds(2), kRate, /*owner=*/2);
  EXPECT_EQ(hkvr.Lookup(0, checkpoint, AtSeconds(3)), 4);
  EXPECT_FALSE(hkvr.HoldsTail(0, checkpoint));
}

// Interior state points (a hybrid model's states captured on the way): each
// is held exactly at its block, costs the state's bytes, lands in copy
// order, and goes with its block when eviction trims the chain's tail.
TEST(HostKvRegistryTest, InteriorStatePointsHoldTheStateExactlyThere) {
  const auto full = Chain(41, 64 * 6);
  HostKvRegistry hkvr(800);
  const std::vector<std::int32_t> points = {1, 2, 4, 6};  // 6 is the end, not interior
  const auto r = hkvr.Checkpoint(0, full, 6, 100, 50, AtSeconds(0), kRate, /*owner=*/1, points);
  EXPECT_EQ(r.copied_blocks, 6);
  EXPECT_EQ(r.bytes, 6 * 100 + 4 * 50);  // three interior states and the end's
  EXPECT_EQ(hkvr.used_bytes(), r.bytes);
  EXPECT_EQ(r.done, AtSeconds(0.8));
  auto first = [&](std::size_t n) { return BlockChain(std::span(full).first(n)); };
  // Block 1 with its state lands at 0.15 s; block 2's at 0.3 s.
  hkvr.CompleteCopies(AtSeconds(0.2));
  EXPECT_TRUE(hkvr.HoldsTail(0, first(1)));
  EXPECT_FALSE(hkvr.HoldsTail(0, first(2)));
  EXPECT_EQ(hkvr.Lookup(0, full, AtSeconds(1)), 6);
  for (std::size_t n : {1, 2, 4, 6}) EXPECT_TRUE(hkvr.HoldsTail(0, first(n))) << n;
  for (std::size_t n : {3, 5}) EXPECT_FALSE(hkvr.HoldsTail(0, first(n))) << n;
  // Room for two more blocks: the chain's tail goes first, block 6 with its
  // state, then block 5; the states at 4 and before stay.
  hkvr.Checkpoint(0, Chain(42, 64 * 2), 2, 100, 0, AtSeconds(2), kRate, /*owner=*/2);
  EXPECT_EQ(hkvr.Probe(0, full), 4);
  EXPECT_TRUE(hkvr.HoldsTail(0, first(4)));
  EXPECT_EQ(hkvr.used_bytes(), 4 * 100 + 3 * 50 + 2 * 100);
  // A checkpoint that does not fit whole registers no interior state.
  HostKvRegistry tight(650);
  tight.Checkpoint(0, full, 6, 100, 50, AtSeconds(0), kRate, 1, points);
  tight.CompleteCopies(AtSeconds(10));
  EXPECT_EQ(tight.Probe(0, full), 5);
  EXPECT_FALSE(tight.HoldsTail(0, first(1)));
  EXPECT_FALSE(tight.HoldsTail(0, first(4)));
}
TEST(BlockHashesTest, SessionChainSharesExactlyTheFullPrefixBlocks) {
  std::vector<PrefixHash> chain;
  ExtendSessionChain(chain, 0, 1000, 64, 42, 0);  // call 0: 1000-token context
  ASSERT_EQ(chain.size(), 15u);
  const std::vector<PrefixHash> first = chain;
  ExtendSessionChain(chain, 700, 1500, 64, 42, 1);  // call 1 reuses 700 tokens
  ASSERT_EQ(chain.size(), 23u);
  EXPECT_EQ(CommonBlocks(first, chain), 10);  // floor(700 / 64)
}

TEST(BlockHashesTest, TokenHashesChainThroughPreviousBlocks) {
  std::vector<std::int32_t> x(256), y(256);
  for (int i = 0; i < 256; ++i) x[i] = y[i] = i;
  y[100] = -1;  // block 1 differs
  std::vector<PrefixHash> hx, hy;
  HashTokenBlocks(x, 64, hx);
  HashTokenBlocks(y, 64, hy);
  ASSERT_EQ(hx.size(), 4u);
  EXPECT_EQ(CommonBlocks(hx, hy), 1);  // blocks 2 and 3 differ too: chained
  EXPECT_NE(hx[3], hy[3]);
}

}  // namespace
}  // namespace talaria
