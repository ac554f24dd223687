#include "memory/block_list.h"

#include <algorithm>

#include "core/error.h"

namespace talaria {

void BlockList::Append(BlockId first, std::int32_t count) {
  TALARIA_CHECK(count >= 0, "a block run of negative length");
  if (count == 0) return;
  if (!runs_.empty() && runs_.back().end() == first) {
    runs_.back().count += count;
  } else {
    runs_.push_back(BlockRun{first, count});
  }
  size_ += count;
}

void BlockList::Append(const BlockList& other) {
  for (const BlockRun& r : other.runs_) Append(r.first, r.count);
}

void BlockList::Truncate(std::int32_t n) {
  TALARIA_CHECK(n >= 0 && n <= size_, "truncating a block list beyond its size");
  while (size_ > n) {
    BlockRun& last = runs_.back();
    const std::int32_t cut = std::min(last.count, size_ - n);
    last.count -= cut;
    size_ -= cut;
    if (last.count == 0) runs_.pop_back();
  }
}

BlockId BlockList::at(std::int32_t i) const {
  TALARIA_CHECK(i >= 0 && i < size_, "block index out of range");
  for (const BlockRun& r : runs_) {
    if (i < r.count) return r.first + i;
    i -= r.count;
  }
  return -1;  // unreachable
}

void BlockList::AppendIds(std::vector<BlockId>& out) const {
  for (const BlockRun& r : runs_) {
    for (std::int32_t k = 0; k < r.count; ++k) out.push_back(r.first + k);
  }
}

}  // namespace talaria
