// Mutated traces (bytes flipped, deleted, duplicated) either read cleanly or
// raise InputError; they never crash, hang or trip a check. Run under the
// sanitizer build too, so memory errors on bad input would show.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "core/error.h"
#include "core/random.h"
#include "trace/trace.h"

namespace talaria {
namespace {

TEST(TraceFuzzTest, MutatedInputReadsOrRaisesInputError) {
  std::ifstream in(std::string(TALARIA_SOURCE_DIR) + "/traces/router-120.jsonl");
  std::stringstream buffer;
  buffer << in.rdbuf();
  const std::string original = buffer.str();
  ASSERT_GT(original.size(), 1000u);
  Rng rng(99);
  const char alphabet[] = "{}[]\":,-0123456789.eE \nabcxyz\\";
  int parsed = 0, rejected = 0;
  for (int round = 0; round < 400; ++round) {
    std::string text = original;
    const auto edits = rng.UniformInt(1, 8);
    for (std::int64_t e = 0; e < edits; ++e) {
      const auto pos = static_cast<std::size_t>(rng.UniformInt(0, static_cast<std::int64_t>(text.size()) - 1));
      switch (rng.UniformInt(0, 2)) {
        case 0:
          text[pos] = alphabet[rng.UniformInt(0, sizeof(alphabet) - 2)];
          break;
        case 1:
          text.erase(pos, static_cast<std::size_t>(rng.UniformInt(1, 40)));
          break;
        default:
          text.insert(pos, text.substr(pos, static_cast<std::size_t>(rng.UniformInt(1, 60))));
          break;
      }
    }
    std::istringstream stream(text);
    try {
      const Trace t = ReadTrace(stream, "fuzz");
      ++parsed;
      EXPECT_LE(t.calls.size(), 240u);
    } catch (const InputError& e) {
      ++rejected;
      EXPECT_NE(std::string(e.what()).find("fuzz:"), std::string::npos) << e.what();
    }
  }
  EXPECT_GT(rejected, 300);  // nearly every mutation breaks a rule, and is named
}

}  // namespace
}  // namespace talaria
