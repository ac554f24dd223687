// Transparent hashing so maps keyed by std::string can be searched with a
// std::string_view without building a string (no allocation per lookup).
#pragma once

#include <functional>
#include <string>
#include <string_view>

namespace talaria {

struct StringHash {
  using is_transparent = void;
  std::size_t operator()(std::string_view s) const noexcept { return std::hash<std::string_view>{}(s); }
};

}  // namespace talaria
