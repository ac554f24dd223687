#include "memory/host_kv_store.h"

#include <gtest/gtest.h>

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
