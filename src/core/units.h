// Byte and token units. Sizes are int64 bytes; bandwidths are bytes/second.
#pragma once

#include <cstdint>

namespace talaria {

inline constexpr std::int64_t kKiB = 1024;
inline constexpr std::int64_t kMiB = 1024 * kKiB;
inline constexpr std::int64_t kGiB = 1024 * kMiB;
inline constexpr double kGB = 1e9;  // decimal, for bandwidths in GB/s

inline constexpr double ToGiB(std::int64_t bytes) {
  return static_cast<double>(bytes) / static_cast<double>(kGiB);
}

}  // namespace talaria
