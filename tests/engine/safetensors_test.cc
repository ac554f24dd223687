#include "engine/safetensors.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>

#include "core/error.h"

namespace talaria {
namespace {

std::string TempPath(const std::string& name) { return ::testing::TempDir() + "/" + name; }

void WriteRaw(const std::string& path, const std::string& header, const std::string& data) {
  std::ofstream out(path, std::ios::binary);
  const std::uint64_t len = header.size();
  for (int i = 0; i < 8; ++i) out.put(static_cast<char>((len >> (8 * i)) & 0xff));
  out << header << data;
}

std::string ErrorOf(const std::string& path) {
  try {
    LoadSafetensors(path);
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

TEST(SafetensorsTest, RoundTripsF32) {
  TensorMap t;
  t["a"] = Tensor{{2, 3}, {1, 2, 3, 4, 5, 6}};
  t["b.weight"] = Tensor{{1}, {-0.5f}};
  const std::string path = TempPath("round.safetensors");
  SaveSafetensors(path, t);
  const TensorMap back = LoadSafetensors(path);
  ASSERT_EQ(back.size(), 2u);
  EXPECT_EQ(back.at("a").shape, (std::vector<std::int64_t>{2, 3}));
  EXPECT_EQ(back.at("a").data, t["a"].data);
  EXPECT_EQ(back.at("b.weight").data[0], -0.5f);
}

TEST(SafetensorsTest, ReadsBf16AndF16) {
  // 1.5 in bf16 is 0x3fc0; -2.0 in f16 is 0xc000; 2^-24 (f16 subnormal) is 0x0001.
  const std::string data("\xc0\x3f\x00\xc0\x01\x00", 6);
  const std::string path = TempPath("half.safetensors");
  WriteRaw(path,
           R"({"x":{"dtype":"BF16","shape":[1],"data_offsets":[0,2]},"y":{"dtype":"F16","shape":[2],"data_offsets":[2,6]}})",
           data);
  const TensorMap t = LoadSafetensors(path);
  EXPECT_EQ(t.at("x").data[0], 1.5f);
  EXPECT_EQ(t.at("y").data[0], -2.0f);
  EXPECT_EQ(t.at("y").data[1], 5.9604644775390625e-08f);
}

TEST(SafetensorsTest, BadFilesNameTheProblem) {
  const std::string path = TempPath("bad.safetensors");
  WriteRaw(path, "{not json", "");
  EXPECT_NE(ErrorOf(path).find("not a JSON object"), std::string::npos) << ErrorOf(path);
  WriteRaw(path, R"({"w":{"dtype":"I8","shape":[4],"data_offsets":[0,4]}})", "abcd");
  EXPECT_NE(ErrorOf(path).find("tensor 'w': dtype I8 is not supported"), std::string::npos) << ErrorOf(path);
  WriteRaw(path, R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,4]}})", "abcd");
  EXPECT_NE(ErrorOf(path).find("holds 4 bytes; its shape and dtype need 8"), std::string::npos) << ErrorOf(path);
  // 2^62 x 2 halves are 2^64 bytes, which wraps to the 0 bytes given: the
  // count is refused, not allocated.
  WriteRaw(path, R"({"w":{"dtype":"F16","shape":[4611686018427387904,2],"data_offsets":[0,0]}})", "");
  EXPECT_NE(ErrorOf(path).find("tensor 'w': its shape's element count overflows"), std::string::npos) << ErrorOf(path);
  WriteRaw(path, R"({"w":{"dtype":"F32","shape":[1],"data_offsets":[0,8]}})", "abcd");
  EXPECT_NE(ErrorOf(path).find("outside the 4 data bytes"), std::string::npos) << ErrorOf(path);
  std::ofstream(path, std::ios::binary) << "abc";
  EXPECT_NE(ErrorOf(path).find("too short"), std::string::npos);
  EXPECT_NE(ErrorOf(TempPath("missing.safetensors")).find("cannot open"), std::string::npos);
}

}  // namespace
}  // namespace talaria
