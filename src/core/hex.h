// Fixed-width lowercase hex of 64-bit values, for ids and keys derived from
// hashes (session scopes, shared-store keys): appended in place, with no
// format string parsed per call as snprintf's "%016llx" does.
#pragma once

#include <cstdint>
#include <string>

namespace talaria {

// Appends `v` as exactly 16 lowercase hex digits, zero-padded.
inline void AppendHex64(std::string& out, std::uint64_t v) {
  constexpr char kDigits[] = "0123456789abcdef";
  char digits[16];
  for (int i = 15; i >= 0; --i, v >>= 4) digits[i] = kDigits[v & 0xf];
  out.append(digits, sizeof digits);
}

}  // namespace talaria
