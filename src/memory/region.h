// A byte range [begin, end) of one rank's HBM arena, as offsets.
#pragma once

#include <algorithm>
#include <cstdint>

namespace talaria {

struct Region {
  std::int64_t begin = 0;
  std::int64_t end = 0;

  std::int64_t size() const { return end - begin; }
  bool empty() const { return end <= begin; }
  bool Overlaps(const Region& o) const { return begin < o.end && o.begin < end; }
  bool Contains(const Region& o) const { return begin <= o.begin && o.end <= end; }
  friend bool operator==(const Region&, const Region&) = default;
};

}  // namespace talaria
