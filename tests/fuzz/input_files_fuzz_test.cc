// Fuzz drivers for the files an operator hands the tools
// (tests/fuzz/mutator.h): traces, model profiles and safetensors weights.
// Each mutated input reads cleanly or raises InputError naming its source;
// nothing else is thrown, nothing crashes, trips a check or allocates
// without bound (shapes are counted against the bytes there are).
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "core/error.h"
#include "engine/safetensors.h"
#include "fuzz/mutator.h"
#include "profile/profile.h"
#include "trace/trace.h"

namespace talaria {
namespace {

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// The first `lines` lines of a shipped file: small seeds fuzz faster.
std::string Head(const std::string& path, int lines) {
  std::istringstream in(ReadFile(path));
  std::string out, line;
  for (int i = 0; i < lines && std::getline(in, line); ++i) out += line + "\n";
  return out;
}

// InputError is the accepted way to refuse; it must name the source.
template <typename F>
bool ReadsOrRefuses(F&& read, const std::string& source) {
  try {
    read();
    return true;
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find(source), std::string::npos) << e.what();
    return false;
  }
}

TEST(InputFilesFuzzTest, TracesReadOrRaiseInputError) {
  const std::string root = TALARIA_SOURCE_DIR;
  fuzz::Mutator mutator({Head(root + "/traces/router-120.jsonl", 6), Head(root + "/traces/swe-fixed-30.jsonl", 6)},
                        {"{", "}", "\"", ":", ",", "\n", "\"call_index\":", "\"gap_s\":", "\"prefix_tokens\":",
                         "\"prompt_tokens\":", "\"session_id\":", "\"token_seed\":", "\"state_tokens\":", "-0",
                         "1e308", "null", "[]", "\xff"});
  const std::int64_t accepted = fuzz::Drive(mutator, [](const std::string& text) {
    std::istringstream in(text);
    return ReadsOrRefuses([&] { (void)ReadTrace(in, "fuzz.jsonl"); }, "fuzz.jsonl");
  });
  EXPECT_GT(accepted, 0);
}

TEST(InputFilesFuzzTest, ProfilesLoadOrRaiseInputError) {
  const std::string root = TALARIA_SOURCE_DIR;
  fuzz::Mutator mutator({ReadFile(root + "/profiles/cpu-11m.tp1.toml"), ReadFile(root + "/profiles/qwen3-32b.tp4.toml"),
                         ReadFile(root + "/profiles/qwen3.5-35b-a3b.tp4.toml")},
                        {"=", "[", "]", "\"", "\n", "[model]", "[attention]", "family = \"hybrid\"", "family = \"mla\"",
                         "-1", "0", "1e400", "inf", "nan", "{", "}", "#", "'''", "[[", "]]", ",", "[1, 2]", "[]"});
  const std::int64_t accepted = fuzz::Drive(mutator, [](const std::string& text) {
    return ReadsOrRefuses([&] { (void)ParseProfile(text, "fuzz.toml"); }, "fuzz.toml");
  });
  EXPECT_GT(accepted, 0);
}

TEST(InputFilesFuzzTest, SafetensorsReadOrRaiseInputError) {
  TensorMap tensors;
  tensors["embed"] = Tensor{{4, 3}, std::vector<float>(12, 0.5f)};
  tensors["norm"] = Tensor{{3}, {1.0f, 2.0f, 3.0f}};
  const auto path = std::filesystem::temp_directory_path() / "talaria_fuzz_seed.safetensors";
  SaveSafetensors(path.string(), tensors);
  const std::string f32 = ReadFile(path.string());
  std::filesystem::remove(path);
  // A half-precision file: the header names F16 and BF16 over the same bytes.
  const std::string header = R"({"a":{"dtype":"F16","shape":[2,2],"data_offsets":[0,8]},)"
                             R"("b":{"dtype":"BF16","shape":[2],"data_offsets":[8,12]},"__metadata__":{"k":"v"}})";
  std::string f16(8, '\0');
  for (int i = 0; i < 8; ++i) f16[static_cast<std::size_t>(i)] = static_cast<char>((header.size() >> (8 * i)) & 0xff);
  f16 += header + std::string("\x00\x3c\x00\xbc\xff\x7b\x01\x00\x80\x3f\x00\xc0", 12);
  fuzz::Mutator mutator({f32, f16}, {"\"dtype\":", "\"F16\"", "\"BF16\"", "\"F32\"", "\"I8\"", "\"shape\":",
                                     "\"data_offsets\":", "[", "]", "{", "}", ",", "18446744073709551615",
                                     "9223372036854775807", "4611686018427387904", "__metadata__",
                                     std::string("\xff\xff\xff\xff\xff\xff\xff\x7f", 8), std::string(8, '\0')});
  const std::int64_t accepted = fuzz::Drive(mutator, [](const std::string& bytes) {
    TensorMap out;
    const bool ok = ReadsOrRefuses([&] { out = ParseSafetensors(bytes, "fuzz.safetensors"); }, "fuzz.safetensors");
    for (const auto& [name, t] : out) {
      std::uint64_t count = 1;
      for (const auto d : t.shape) count *= static_cast<std::uint64_t>(d);
      EXPECT_EQ(t.data.size(), count) << name;
    }
    return ok;
  });
  EXPECT_GT(accepted, 0);
}

}  // namespace
}  // namespace talaria
