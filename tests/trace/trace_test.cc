#include "trace/trace.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <sstream>

#include "core/error.h"

namespace talaria {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

std::string Record(const std::string& session, int index, int prompt, int prefix, int output,
                   const std::string& extra = "") {
  return R"({"session_id":")" + session + R"(","call_index":)" + std::to_string(index) +
         R"(,"model":"m1","prompt_tokens":)" + std::to_string(prompt) +
         R"(,"prefix_tokens":)" + std::to_string(prefix) + R"(,"output_tokens":)" +
         std::to_string(output) + R"(,"gap_s":0.5,"token_seed":9)" + extra + "}\n";
}

// The message of the InputError that reading `text` raises ("" if none).
std::string ReadError(const std::string& text) {
  std::istringstream in(text);
  try {
    ReadTrace(in, "t.jsonl");
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

TEST(TraceTest, WriteThenReadRoundTrips) {
  Trace t;
  TraceCall a;
  a.session_id = "task-01/m1";
  a.model = "m1";
  a.prompt_tokens = 1000;
  a.output_tokens = 50;
  a.gap_s = 1.5;
  a.token_seed = 77;
  a.task = "task-01";
  TraceCall b = a;
  b.call_index = 1;
  b.prompt_tokens = 1300;
  b.prefix_tokens = 1050;
  b.gap_s = 10;
  b.gap_uncapped_s = 31.25;
  b.enqueue_s = 12.5;
  a.expected_tool_s = 9.5;  // agent hints
  b.session_end = true;
  t.calls = {a, b};

  std::ostringstream out;
  WriteTrace(out, t);
  std::istringstream in(out.str());
  const Trace back = ReadTrace(in, "rt");
  ASSERT_EQ(back.calls.size(), 2u);
  EXPECT_EQ(back.calls[1].session_id, "task-01/m1");
  EXPECT_EQ(back.calls[1].prefix_tokens, 1050);
  EXPECT_EQ(back.calls[1].gap_uncapped_s, 31.25);
  EXPECT_EQ(back.calls[1].enqueue_s, 12.5);
  EXPECT_EQ(back.calls[0].gap_uncapped_s, std::nullopt);
  EXPECT_EQ(back.calls[0].task, "task-01");
  EXPECT_EQ(back.calls[0].expected_tool_s, 9.5);
  EXPECT_EQ(back.calls[1].expected_tool_s, std::nullopt);
  EXPECT_FALSE(back.calls[0].session_end);
  EXPECT_TRUE(back.calls[1].session_end);
  std::ostringstream again;
  WriteTrace(again, back);
  EXPECT_EQ(again.str(), out.str());
}

TEST(TraceTest, WriterUsesDocumentedKeyOrder) {
  TraceCall c;
  c.session_id = "s";
  c.model = "m";
  c.prompt_tokens = 10;
  c.output_tokens = 2;
  c.token_seed = 3;
  std::ostringstream out;
  WriteTraceCall(out, c);
  EXPECT_EQ(out.str(),
            R"({"session_id":"s","call_index":0,"model":"m","prompt_tokens":10,"prefix_tokens":0,)"
            R"("output_tokens":2,"gap_s":0.0,"token_seed":3})"
            "\n");
}

TEST(TraceTest, InterleavedSessionsGroupInCallOrder) {
  std::istringstream in(Record("a", 0, 100, 0, 10) + Record("b", 0, 200, 0, 10) +
                        "\n" + Record("a", 1, 150, 110, 10));
  const Trace t = ReadTrace(in, "x");
  const auto sessions = GroupSessions(t);
  ASSERT_EQ(sessions.size(), 2u);
  EXPECT_EQ(sessions[0].session_id, "a");
  EXPECT_EQ(sessions[0].calls, (std::vector<std::size_t>{0, 2}));
  EXPECT_EQ(sessions[1].calls, (std::vector<std::size_t>{1}));
}

struct BadCase {
  const char* name;
  std::string text;
  std::string expected;
  friend void PrintTo(const BadCase& c, std::ostream* os) { *os << c.name; }
};

class TraceValidationTest : public ::testing::TestWithParam<BadCase> {};

TEST_P(TraceValidationTest, NamesFileLineAndField) {
  EXPECT_THAT(ReadError(GetParam().text), HasSubstr(GetParam().expected));
}

INSTANTIATE_TEST_SUITE_P(
    Errors, TraceValidationTest,
    ::testing::Values(
        BadCase{"NotJson", "{oops\n", "t.jsonl:1: not valid JSON"},
        BadCase{"NotObject", "[1,2]\n", "t.jsonl:1: a record must be a JSON object"},
        BadCase{"NumberOverflow", R"({"session_id":"a","call_index":758e445960540710})" "\n",
                "t.jsonl:1: not valid JSON"},
        BadCase{"MissingField", R"({"session_id":"a","call_index":0})" "\n",
                "t.jsonl:1: field 'model': missing"},
        BadCase{"WrongType", Record("a", 0, 100, 0, 10, R"(,"task":5)"),
                "t.jsonl:1: field 'task': must be a string"},
        BadCase{"FloatTokens",
                R"({"session_id":"a","call_index":0,"model":"m","prompt_tokens":1.5,"prefix_tokens":0,"output_tokens":1,"gap_s":0,"token_seed":1})"
                "\n",
                "field 'prompt_tokens': must be an integer"},
        BadCase{"UnknownField", Record("a", 0, 100, 0, 10, R"(,"promt":1)"),
                "t.jsonl:1: field 'promt': unknown field"},
        BadCase{"ZeroOutput", Record("a", 0, 100, 0, 0), "field 'output_tokens': must be >= 1"},
        BadCase{"NegativeGap", Record("a", 0, 100, 0, 5, R"(,"enqueue_s":-1)"),
                "field 'enqueue_s': must be a finite number >= 0"},
        BadCase{"PrefixBeyondPrompt", Record("a", 0, 100, 0, 5) + Record("a", 1, 100, 101, 5),
                "t.jsonl:2: field 'prefix_tokens': exceeds prompt_tokens"},
        BadCase{"PrefixOnFirstCall", Record("a", 0, 100, 5, 5),
                "field 'prefix_tokens': must be 0 on a session's first call"},
        BadCase{"PrefixBeyondPreviousContext",
                Record("a", 0, 100, 0, 5) + Record("a", 1, 300, 106, 5),
                "t.jsonl:2: field 'prefix_tokens': exceeds the previous call's prompt + output (105)"},
        BadCase{"SkippedIndex", Record("a", 0, 100, 0, 5) + Record("a", 2, 300, 10, 5),
                "t.jsonl:2: field 'call_index': expected 1 for session 'a', got 2"},
        BadCase{"SessionStartsLate", Record("a", 1, 100, 0, 5),
                "field 'call_index': expected 0 for session 'a', got 1"},
        BadCase{"SeedTooLarge", Record("a", 0, 100, 0, 5) + R"({"session_id":"b","call_index":0,"model":"m","prompt_tokens":1,"prefix_tokens":0,"output_tokens":1,"gap_s":0,"token_seed":9007199254740992})" "\n",
                "t.jsonl:2: field 'token_seed': must be at most 2^53 - 1"},
        BadCase{"UncappedBelowCap", Record("a", 0, 100, 0, 5, R"(,"gap_uncapped_s":0.1)"),
                "field 'gap_uncapped_s': is smaller than gap_s"},
        BadCase{"NegativeToolHint", Record("a", 0, 100, 0, 5, R"(,"expected_tool_s":-2)"),
                "t.jsonl:1: field 'expected_tool_s': must be a finite number >= 0"},
        BadCase{"SessionEndNotBool", Record("a", 0, 100, 0, 5, R"(,"session_end":1)"),
                "t.jsonl:1: field 'session_end': must be true or false"}),
    [](const auto& info) { return std::string(info.param.name); });

TEST(TraceValidationTest, ModelChangeWithinSessionIsRejected) {
  std::string second = Record("a", 1, 150, 100, 5);
  second.replace(second.find("\"m1\""), 4, "\"m2\"");
  EXPECT_THAT(ReadError(Record("a", 0, 100, 0, 5) + second),
              HasSubstr("t.jsonl:2: field 'model': session 'a' changed model from 'm1'"));
}

TEST(TraceValidationTest, ReportsEveryBadLineAndEachMistakeOnce) {
  const std::string text = Record("a", 0, 100, 0, 5) +
                           R"({"session_id":"a","call_index":1,"model":"m1","prompt_tokens":"x","prefix_tokens":0,"output_tokens":1,"gap_s":0,"token_seed":9})"
                           "\n" +
                           Record("a", 2, 500, 400, 5) +  // fine: follows the bad line
                           Record("b", 0, 100, 0, 0);     // bad output_tokens
  const std::string msg = ReadError(text);
  EXPECT_THAT(msg, HasSubstr("t.jsonl:2: field 'prompt_tokens': must be an integer"));
  EXPECT_THAT(msg, HasSubstr("t.jsonl:4: field 'output_tokens'"));
  EXPECT_THAT(msg, Not(HasSubstr("t.jsonl:3")));
}

TEST(TraceTest, MissingFileIsAnInputError) {
  EXPECT_THROW(ReadTraceFile("/nonexistent/trace.jsonl"), InputError);
}

}  // namespace
}  // namespace talaria
