// A closed set of names for an enum's values: the one table a config key,
// a command-line flag and ToString all read, so a new value or a renamed
// one cannot reach one of them and not the others.
//
//   inline constexpr Choices<LeaseHonour, 2> kLeaseHonours{{{{"route", LeaseHonour::kRoute}, ...}}};
//   kLeaseHonours.Parse("rank", out);   // false for a name not in the table
//   kLeaseHonours.Name(LeaseHonour::kRank);  // "rank"
#pragma once

#include <array>
#include <cstddef>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace talaria {

template <typename E, std::size_t N>
struct Choices {
  std::array<std::pair<std::string_view, E>, N> names;  // each name a string literal

  // The name of `value`; "" for a value the table lacks.
  constexpr const char* Name(E value) const {
    for (const auto& [name, v] : names) {
      if (v == value) return name.data();
    }
    return "";
  }

  // Sets `out` to the value named `name`; false (and `out` untouched) when
  // the table has no such name.
  constexpr bool Parse(std::string_view name, E& out) const {
    for (const auto& [n, v] : names) {
      if (n == name) {
        out = v;
        return true;
      }
    }
    return false;
  }

  // Every name, in the table's order (for a flag's list of allowed values).
  std::vector<std::string> Names() const {
    std::vector<std::string> all;
    all.reserve(N);
    for (const auto& [name, v] : names) all.emplace_back(name);
    return all;
  }
};

}  // namespace talaria
