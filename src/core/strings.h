// Transparent hashing so maps keyed by std::string can be searched with a
// std::string_view without building a string (no allocation per lookup).
// XXH3, inlined: session ids and model names are short, where it takes a
// few dozen instructions (std::hash's murmur loop takes several times that;
// a routing decision hashes its session and its model).
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#ifndef XXH_INLINE_ALL
#define XXH_INLINE_ALL
#endif
#include <xxhash.h>

namespace talaria {

struct StringHash {
  using is_transparent = void;
  std::size_t operator()(std::string_view s) const noexcept {
    return static_cast<std::size_t>(XXH3_64bits(s.data(), s.size()));
  }
};

}  // namespace talaria
