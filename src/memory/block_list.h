// A call's or a session's KV blocks in context order, kept as runs of
// consecutive block ids. The KV pool hands out its lowest free blocks first
// (memory/kv_pool.h), so a call's blocks are one run or a few: at cluster
// scale (docs/benchmarks.md) about 320 blocks a run and 1.5 runs a call.
// A list costs a few words however long its context, where a vector of ids
// cost 4 bytes a block, and a free or an overlap test works a run at a time.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include <absl/container/inlined_vector.h>

namespace talaria {

using BlockId = std::int32_t;

// Blocks first, first + 1, ..., first + count - 1.
struct BlockRun {
  BlockId first = 0;
  std::int32_t count = 0;
  BlockId end() const { return first + count; }
  friend bool operator==(const BlockRun&, const BlockRun&) = default;
};

class BlockList {
 public:
  BlockList() = default;

  std::int32_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  void clear() {
    runs_.clear();
    size_ = 0;
  }
  std::span<const BlockRun> runs() const { return {runs_.data(), runs_.size()}; }

  // Appends blocks [first, first + count), merged into the last run when
  // they continue it. REQUIRES: count >= 0.
  void Append(BlockId first, std::int32_t count);
  void Append(const BlockList& other);
  // Keeps the first n blocks. REQUIRES: 0 <= n <= size().
  void Truncate(std::int32_t n);
  // Calls f(run) for each run of blocks [from, size()), the first one cut
  // at `from`.
  template <typename F>
  void ForEachRunFrom(std::int32_t from, F f) const;
  // Block i (O(runs)).
  BlockId at(std::int32_t i) const;
  // Appends every block id, in order, to `out` (engines that address blocks).
  void AppendIds(std::vector<BlockId>& out) const;

  friend bool operator==(const BlockList& a, const BlockList& b) {
    return a.size_ == b.size_ && a.runs_ == b.runs_;
  }

 private:
  absl::InlinedVector<BlockRun, 1> runs_;  // no two adjacent runs continue each other
  std::int32_t size_ = 0;
};

template <typename F>
void BlockList::ForEachRunFrom(std::int32_t from, F f) const {
  std::int32_t pos = 0;
  for (const BlockRun& r : runs_) {
    const std::int32_t skip = from > pos ? from - pos : 0;
    if (skip < r.count) f(BlockRun{r.first + skip, r.count - skip});
    pos += r.count;
  }
}

}  // namespace talaria
