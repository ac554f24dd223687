// The paged KV pool of the active model (DESIGN.md §5): the KV region cut
// into fixed-size blocks, handed out lowest address first so the high end
// of the region stays clean for weight staging (paper §4.4).
//
// A skip range excludes the rows of a staging chunk while it is being
// written, so no KV block lands on half-written weights. Offsets only.
// Allocation does not allocate memory per call beyond the caller's output
// list (a run of blocks at a time). Not synchronized.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "memory/block_list.h"
#include "memory/region.h"

namespace talaria {

class KvPool {
 public:
  // Drops every block and cuts `region` into blocks of `block_bytes`.
  void Format(Region region, std::int64_t block_bytes);

  // Appends `n` free blocks, lowest addresses first, to `out`. All or
  // nothing: false (and `out` unchanged) when fewer than n are available
  // outside the skip range.
  bool Allocate(std::int32_t n, BlockList& out);
  bool Allocate(std::int32_t n, std::vector<BlockId>& out);
  // Frees blocks [from, size()) of `blocks`.
  void Free(const BlockList& blocks, std::int32_t from = 0);
  void Free(std::span<const BlockId> blocks);

  // Blocks overlapping `r` are not handed out until ClearSkip().
  void SetSkip(Region r);
  void ClearSkip() { skip_begin_ = skip_end_ = 0; }

  Region BlockRange(BlockId id) const {
    const std::int64_t b = region_.begin + static_cast<std::int64_t>(id) * block_bytes_;
    return {b, b + block_bytes_};
  }
  // The end offset of the highest allocated block (region().begin if none).
  std::int64_t HighestAllocatedEnd() const;
  // Whether any allocated block overlaps `r`.
  bool AnyAllocatedIn(Region r) const;

  Region region() const { return region_; }
  std::int64_t block_bytes() const { return block_bytes_; }
  std::int32_t total_blocks() const { return total_; }
  std::int32_t free_blocks() const { return free_; }
  std::int32_t used_blocks() const { return total_ - free_; }
  std::int64_t used_bytes() const { return static_cast<std::int64_t>(used_blocks()) * block_bytes_; }

 private:
  // Free blocks in [begin, end).
  std::int32_t FreeIn(BlockId begin, BlockId end) const;
  // The low n bits of a word (n in [0, 64]).
  static std::uint64_t Bits(int n) { return n >= 64 ? ~std::uint64_t{0} : (std::uint64_t{1} << n) - 1; }
  void FreeRun(BlockRun run);
  // Calls f(word, mask) for each word of the free map overlapping blocks
  // [begin, end), mask selecting those blocks' bits, until it returns false
  // (the word by reference, const exactly when `self` is).
  template <typename Self, typename F>
  static void ForEachWord(Self& self, BlockId begin, BlockId end, F f);

  Region region_;
  std::int64_t block_bytes_ = 0;
  std::int32_t total_ = 0;
  std::int32_t free_ = 0;
  // The free map, 1 = free: words_ words cover the pool's blocks; the
  // words past them (left from a larger pool) are all-free.
  std::vector<std::uint64_t> bits_;
  std::size_t words_ = 0;
  // No word above this one has an allocated block (a bound kept by Allocate
  // and tightened by HighestAllocatedEnd, so its scan is short).
  mutable std::size_t top_word_ = 0;
  // Words below this one were allocated from since the last Format; the
  // rest are as Format left them (its next call rewrites only these).
  std::size_t touched_words_ = 0;
  // No word below this one has a free block (kept by Allocate and Free), so
  // an allocation does not rescan the full low words the bump order fills.
  std::size_t low_word_ = 0;
  BlockId skip_begin_ = 0;           // [skip_begin_, skip_end_) not allocatable
  BlockId skip_end_ = 0;
};

}  // namespace talaria
