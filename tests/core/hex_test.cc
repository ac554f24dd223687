#include "core/hex.h"

#include <gtest/gtest.h>

namespace talaria {
namespace {

TEST(HexTest, SixteenLowercaseDigitsZeroPadded) {
  std::string out = "x:";
  AppendHex64(out, 0);
  EXPECT_EQ(out, "x:0000000000000000");
  out.clear();
  AppendHex64(out, 0x0123456789abcdefULL);
  AppendHex64(out, ~0ULL);
  EXPECT_EQ(out, "0123456789abcdefffffffffffffffff");
}

}  // namespace
}  // namespace talaria
