#include "memory/host_kv_store.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <vector>

namespace talaria {
namespace {

TEST(HostKvStoreTest, ABlockComesBackByteForByte) {
  HostKvStore store(256, 4);
  std::vector<unsigned char> in(256), out(256, 0);
  std::iota(in.begin(), in.end(), 0);
  const auto slot = store.Put(in.data());
  ASSERT_GE(slot, 0);
  EXPECT_EQ(store.free_slabs(), 3);
  ASSERT_TRUE(store.Get(slot, out.data()));
  EXPECT_EQ(in, out);
}

TEST(HostKvStoreTest, ACorruptedSlabIsDetected) {
  HostKvStore store(64 * 1024, 2);  // several hash-while-copy chunks
  std::vector<unsigned char> in(64 * 1024, 7), out(64 * 1024, 0);
  const auto slot = store.Put(in.data());
  ASSERT_TRUE(store.Get(slot, out.data()));
  store.Bytes(slot)[40000] ^= std::byte{1};  // one bit flips in host memory
  EXPECT_FALSE(store.Get(slot, out.data()));
}

// The copy streams 64-byte runs to 16-byte-aligned destinations and copies
// the unaligned head and the tail plainly: every byte arrives at every
// alignment, and a flip in the first or the last byte of a block is caught.
TEST(HostKvStoreTest, EveryByteArrivesAtAnyAlignmentAndAFlipAtEitherEndIsCaught) {
  constexpr std::size_t kBytes = 3 * 4096 + 37;  // chunks, then an odd tail
  HostKvStore store(kBytes, 1);
  std::vector<unsigned char> in(kBytes);
  for (std::size_t i = 0; i < kBytes; ++i) in[i] = static_cast<unsigned char>(i * 131 + 7);
  const auto slot = store.Put(in.data());
  std::vector<unsigned char> buffer(kBytes + 32);
  for (std::size_t offset = 0; offset < 17; ++offset) {
    SCOPED_TRACE(offset);
    std::fill(buffer.begin(), buffer.end(), 0);
    ASSERT_TRUE(store.Get(slot, buffer.data() + offset));
    EXPECT_TRUE(std::equal(in.begin(), in.end(), buffer.begin() + static_cast<std::ptrdiff_t>(offset)));
    EXPECT_EQ(buffer[offset + kBytes], 0);  // nothing written past the block
  }
  for (const std::size_t at : {std::size_t{0}, kBytes - 1}) {
    SCOPED_TRACE(at);
    store.Bytes(slot)[at] ^= std::byte{0x80};
    EXPECT_FALSE(store.Get(slot, buffer.data()));
    store.Bytes(slot)[at] ^= std::byte{0x80};
    EXPECT_TRUE(store.Get(slot, buffer.data()));
  }
}

TEST(HostKvStoreTest, FullThenFreedSlabsAreReused) {
  HostKvStore store(8, 2);
  const unsigned char b[8] = {};
  const auto a = store.Put(b), c = store.Put(b);
  EXPECT_EQ(store.Put(b), -1);
  store.Free(a);
  EXPECT_EQ(store.Put(b), a);
  EXPECT_NE(a, c);
}

}  // namespace
}  // namespace talaria
