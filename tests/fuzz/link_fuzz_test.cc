// Fuzz driver for the instance link (server/link_frames.h), whose bytes a
// hostile peer may send either end: a byte stream of frames is cut into
// frames, each of which fits the reader's bound and is of a known type,
// or the reader fails with its error; call and final-usage payloads read
// with every field in bounds, or are refused. Nothing throws or crashes,
// and however the same bytes are split across reads, the frames are the same.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <tuple>
#include <vector>

#include "fuzz/mutator.h"
#include "server/link_frames.h"
#include "server/openai_encode.h"

namespace talaria {
namespace {

using link::FrameType;

constexpr std::size_t kMaxFrame = 4096;

using Cut = std::vector<std::tuple<FrameType, std::uint64_t, std::string>>;

// The frames of `bytes` fed `step` bytes at a time; `failed` says whether
// the reader refused the stream.
Cut Frames(const std::string& bytes, std::size_t step, bool& failed) {
  link::FrameReader reader(kMaxFrame);
  Cut out;
  for (std::size_t at = 0; at < bytes.size() && !reader.Failed(); at += step) {
    const std::size_t n = std::min(step, bytes.size() - at);
    std::memcpy(reader.Prepare(n), bytes.data() + at, n);
    reader.Commit(n);
    while (auto f = reader.Next()) {
      EXPECT_LE(f->payload.size() + 13, kMaxFrame);
      EXPECT_GE(static_cast<int>(f->type), 1);
      EXPECT_LE(static_cast<int>(f->type), 6);
      out.emplace_back(f->type, f->id, std::string(f->payload));
    }
  }
  failed = reader.Failed();
  return out;
}

TEST(LinkFuzzTest, FrameStreamsCutTheSameOrAreRefused) {
  std::string seed;
  const std::string body = TokenCompletionBody("m", std::vector<std::int32_t>{1, 2, 258}, 4, true, "agent-1");
  link::AppendCall(seed, 1, {true, 2.5, "key", body});
  link::AppendFrame(seed, FrameType::kDelta, 1, "tok");
  link::AppendDone(seed, 1, Usage{12, 3, 8, "host", "w1"}, "stop");
  link::AppendFrame(seed, FrameType::kCancel, 2);
  link::AppendFrame(seed, FrameType::kPing, 0);
  fuzz::Mutator mutator({seed, seed.substr(0, 40)},
                        {std::string(4, '\0'), std::string("\xff\xff\xff\xff", 4), std::string(1, '\x01'),
                         std::string(1, '\x07'), std::string(8, '\xff'), "\x0d\0\0\0", body});
  const std::int64_t read = fuzz::Drive(mutator, [](const std::string& input) {
    bool whole_failed = false, split_failed = false;
    const Cut whole = Frames(input, input.size() + 1, whole_failed);
    const Cut split = Frames(input, 3, split_failed);
    EXPECT_EQ(whole_failed, split_failed);
    EXPECT_EQ(whole, split);
    for (const auto& [type, id, payload] : whole) {
      if (type == FrameType::kCall) {
        link::CallFields call;
        std::string error;
        if (link::ReadCall(payload, call, error)) {
          EXPECT_TRUE(call.expected_tool_s == -1 || (call.expected_tool_s >= 0 && call.expected_tool_s <= 3600));
          EXPECT_LE(call.api_key.size() + call.body.size() + 11, payload.size());
        } else {
          EXPECT_FALSE(error.empty());
        }
      } else if (type == FrameType::kDone) {
        Usage usage;
        std::string finish;
        (void)link::ReadDone(payload, usage, finish);
      }
    }
    return !whole_failed;
  });
  EXPECT_GT(read, 0);
}

}  // namespace
}  // namespace talaria
