#include "memory/kv_pool.h"

#include <algorithm>
#include <bit>

#include "core/error.h"

namespace talaria {

void KvPool::Format(Region region, std::int64_t block_bytes) {
  TALARIA_CHECK(block_bytes > 0, "KV block size must be positive");
  region_ = region;
  block_bytes_ = block_bytes;
  total_ = static_cast<std::int32_t>(std::max<std::int64_t>(0, region.size()) / block_bytes);
  free_ = total_;
  // Only the words allocated from since the last Format, and the old last
  // word's partial mask, differ from all-free: a model switch formats the
  // pool, and rewriting a whole large free map each time is most of its cost.
  // The map keeps the size of the largest pool it has held (a model with a
  // small KV footprint has many times the blocks of the others), and words
  // past the pool stay all-free: a switch back into that model finds its
  // words ready instead of writing them again.
  if (words_ > 0) bits_[words_ - 1] = ~std::uint64_t{0};
  std::fill_n(bits_.begin(), touched_words_, ~std::uint64_t{0});
  words_ = static_cast<std::size_t>((total_ + 63) / 64);
  if (bits_.size() < words_) bits_.resize(words_, ~std::uint64_t{0});
  if (total_ % 64 != 0) bits_[words_ - 1] = (std::uint64_t{1} << (total_ % 64)) - 1;
  touched_words_ = 0;
  top_word_ = 0;
  low_word_ = 0;
  ClearSkip();
}

bool KvPool::Allocate(std::int32_t n, BlockList& out) {
  if (n <= 0) return true;
  if (free_ < n) return false;
  if (skip_begin_ < skip_end_ && free_ - FreeIn(skip_begin_, skip_end_) < n) return false;
  while (low_word_ < words_ && bits_[low_word_] == 0) ++low_word_;
  // Enough blocks are free outside the skip range, so this fills all n:
  // lowest first, a run of free bits at a time.
  std::int32_t got = 0;
  for (std::size_t w = low_word_; w < words_ && got < n; ++w) {
    std::uint64_t usable = bits_[w];
    if (usable == 0) continue;
    top_word_ = std::max(top_word_, w);
    touched_words_ = std::max(touched_words_, w + 1);
    const auto base = static_cast<BlockId>(w * 64);
    if (base < skip_end_ && base + 64 > skip_begin_) {  // the skip range's bits are not handed out
      const int lo = std::max<BlockId>(skip_begin_ - base, 0);
      const int hi = std::min<BlockId>(skip_end_ - base, 64);
      usable &= ~(Bits(hi) & ~Bits(lo));
    }
    while (usable != 0 && got < n) {
      const int lo = std::countr_zero(usable);
      const int len = std::min(std::countr_one(usable >> lo), n - got);
      const std::uint64_t run = Bits(lo + len) & ~Bits(lo);
      bits_[w] &= ~run;
      usable &= ~run;
      out.Append(base + lo, len);
      got += len;
    }
  }
  free_ -= n;
  return true;
}

bool KvPool::Allocate(std::int32_t n, std::vector<BlockId>& out) {
  BlockList taken;
  if (!Allocate(n, taken)) return false;
  taken.AppendIds(out);
  return true;
}

template <typename Self, typename F>
void KvPool::ForEachWord(Self& self, BlockId begin, BlockId end, F f) {
  for (BlockId b = begin; b < end;) {
    const auto offset = static_cast<int>(b & 63);
    const BlockId n = std::min<BlockId>(64 - offset, end - b);
    if (!f(self.bits_[static_cast<std::size_t>(b >> 6)], Bits(n) << offset)) return;
    b += n;
  }
}

std::int32_t KvPool::FreeIn(BlockId begin, BlockId end) const {
  std::int32_t k = 0;
  ForEachWord(*this, begin, end, [&](std::uint64_t word, std::uint64_t mask) {
    k += std::popcount(word & mask);
    return true;
  });
  return k;
}

void KvPool::FreeRun(BlockRun run) {
  TALARIA_CHECK(run.first >= 0 && run.count >= 0 && run.end() <= total_, "freeing a block that is not allocated");
  ForEachWord(*this, run.first, run.end(), [&](std::uint64_t& word, std::uint64_t mask) {
    TALARIA_CHECK((word & mask) == 0, "freeing a block that is not allocated");
    word |= mask;
    return true;
  });
  if (run.count > 0) low_word_ = std::min(low_word_, static_cast<std::size_t>(run.first >> 6));
  free_ += run.count;
}

void KvPool::Free(const BlockList& blocks, std::int32_t from) {
  blocks.ForEachRunFrom(from, [&](BlockRun run) { FreeRun(run); });
}

void KvPool::Free(std::span<const BlockId> blocks) {
  for (BlockId id : blocks) FreeRun(BlockRun{id, 1});
}

void KvPool::SetSkip(Region r) {
  if (total_ == 0) return;
  const std::int64_t lo = std::max<std::int64_t>(0, r.begin - region_.begin) / block_bytes_;
  const std::int64_t hi = (std::max<std::int64_t>(0, r.end - region_.begin) + block_bytes_ - 1) / block_bytes_;
  skip_begin_ = static_cast<BlockId>(std::min<std::int64_t>(lo, total_));
  skip_end_ = static_cast<BlockId>(std::min<std::int64_t>(hi, total_));
}

std::int64_t KvPool::HighestAllocatedEnd() const {
  for (std::size_t w = std::min(top_word_ + 1, words_); w-- > 0;) {
    std::uint64_t allocated = ~bits_[w];
    if (w == words_ - 1 && total_ % 64 != 0) allocated &= (std::uint64_t{1} << (total_ % 64)) - 1;
    if (allocated != 0) {
      top_word_ = w;
      const auto top = static_cast<BlockId>(w * 64 + 63 - static_cast<std::size_t>(std::countl_zero(allocated)));
      return BlockRange(top).end;
    }
  }
  top_word_ = 0;
  return region_.begin;
}

bool KvPool::AnyAllocatedIn(Region r) const {
  if (total_ == 0 || !r.Overlaps(region_)) return false;
  const std::int64_t lo = std::max<std::int64_t>(0, r.begin - region_.begin) / block_bytes_;
  const std::int64_t hi = std::min<std::int64_t>(
      total_, (std::max<std::int64_t>(0, r.end - region_.begin) + block_bytes_ - 1) / block_bytes_);
  // Nothing is allocated above top_word_ (the staging chunks a stager asks
  // about sit at the top of the region, the KV low): no scan.
  if (lo >= static_cast<std::int64_t>(top_word_ + 1) * 64) return false;
  bool any = false;
  ForEachWord(*this, static_cast<BlockId>(lo), static_cast<BlockId>(hi), [&](std::uint64_t word, std::uint64_t mask) {
    any = (~word & mask) != 0;
    return !any;
  });
  return any;
}

}  // namespace talaria
