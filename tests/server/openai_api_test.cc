#include "server/openai_api.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace talaria {
namespace {

using ::testing::HasSubstr;

CompletionRequest Ok(const std::variant<CompletionRequest, ApiError>& v) {
  if (const auto* e = std::get_if<ApiError>(&v)) {
    ADD_FAILURE() << e->message;
    return {};
  }
  return std::get<CompletionRequest>(v);
}

ApiError Err(const std::variant<CompletionRequest, ApiError>& v) {
  if (const auto* e = std::get_if<ApiError>(&v)) return *e;
  ADD_FAILURE() << "expected an error";
  return {};
}

TEST(OpenAiApiTest, ParsesAChatCompletion) {
  const auto r = Ok(ParseChatCompletion(
      R"({"model":"m","messages":[{"role":"system","content":"be brief"},
          {"role":"user","content":[{"type":"text","text":"hi "},{"type":"text","text":"there"}]}],
          "max_tokens":64,"stream":true,"metadata":{"session_id":"task-7"}})",
      ""));
  EXPECT_TRUE(r.chat);
  EXPECT_EQ(r.model, "m");
  ASSERT_EQ(r.messages.size(), 2u);
  EXPECT_EQ(r.messages[1].content, "hi there");
  EXPECT_EQ(r.max_tokens, 64);
  EXPECT_TRUE(r.stream);
  EXPECT_EQ(r.session_id, "task-7");
}

TEST(OpenAiApiTest, SessionHeaderWinsOverBodyFields) {
  const auto r = Ok(ParseChatCompletion(
      R"({"model":"m","messages":[{"role":"user","content":"x"}],"session_id":"body"})", "header"));
  EXPECT_EQ(r.session_id, "header");
  const auto b = Ok(ParseChatCompletion(
      R"({"model":"m","messages":[{"role":"user","content":"x"}],"session_id":"body"})", ""));
  EXPECT_EQ(b.session_id, "body");
}

// Scoped session ids live in shared session stores (Redis) across gateway
// releases, so their form is fixed: 16 lowercase hex digits of the key's
// FNV-1a hash through SplitMix64's finaliser, a colon, the client's id
// (the expected values computed outside C++ from that definition).
TEST(OpenAiApiTest, ScopedSessionIdsKeepTheirForm) {
  EXPECT_EQ(SessionScope(""), "c3817c016ba4ff30:");
  EXPECT_EQ(ScopedSessionId("sk-tenant-a", "agent"), "b4160461bb9f9bf3:agent");
  EXPECT_EQ(ScopedSessionId("sk-tenant-a", ""), "");
}

TEST(OpenAiApiTest, CompletionsTakeTextOrTokenIds) {
  const auto text = Ok(ParseCompletion(R"({"model":"m","prompt":"once upon"})", ""));
  EXPECT_FALSE(text.chat);
  EXPECT_EQ(text.prompt_text, "once upon");
  EXPECT_EQ(text.max_tokens, 16);
  const auto ids = Ok(ParseCompletion(R"({"model":"m","prompt":[1,2,3],"max_tokens":5})", ""));
  EXPECT_EQ(ids.prompt_ids, (std::vector<std::int32_t>{1, 2, 3}));
  EXPECT_EQ(Err(ParseCompletion(R"({"model":"m","prompt":[1,-2]})", "")).param, "prompt");
}

struct Bad {
  const char* name;
  std::string body;
  std::string param;
  std::string message_part;
  friend void PrintTo(const Bad& b, std::ostream* os) { *os << b.name; }
};

class OpenAiErrorTest : public ::testing::TestWithParam<Bad> {};

TEST_P(OpenAiErrorTest, NamesTheField) {
  const ApiError e = Err(ParseChatCompletion(GetParam().body, ""));
  EXPECT_EQ(e.status, 400);
  EXPECT_EQ(e.type, "invalid_request_error");
  EXPECT_EQ(e.param, GetParam().param);
  EXPECT_THAT(e.message, HasSubstr(GetParam().message_part));
  const auto body = e.Body();
  EXPECT_EQ(body["error"]["message"], e.message);
  if (e.param.empty()) {
    EXPECT_TRUE(body["error"]["param"].is_null());
  }
}

INSTANTIATE_TEST_SUITE_P(
    Errors, OpenAiErrorTest,
    ::testing::Values(
        Bad{"Malformed", "{\"model\":", "", "not valid JSON"},
        Bad{"NotObject", "[1]", "", "must be a JSON object"},
        Bad{"MissingModel", R"({"messages":[{"role":"user","content":"x"}]})", "model", "provide a model"},
        Bad{"ModelNotString", R"({"model":3,"messages":[]})", "model", "non-empty string"},
        Bad{"MissingMessages", R"({"model":"m"})", "messages", "provide a messages"},
        Bad{"EmptyMessages", R"({"model":"m","messages":[]})", "messages", "non-empty array"},
        Bad{"BadRole", R"({"model":"m","messages":[{"role":"wizard","content":"x"}]})", "messages[0].role", "not a supported role"},
        Bad{"ContentNumber", R"({"model":"m","messages":[{"role":"user","content":5}]})", "messages[0].content", "must be a string"},
        Bad{"ImagePart", R"({"model":"m","messages":[{"role":"user","content":[{"type":"image_url"}]}]})", "messages[0].content", "only text"},
        Bad{"ZeroMaxTokens", R"({"model":"m","messages":[{"role":"user","content":"x"}],"max_tokens":0})", "max_tokens", "positive integer"},
        Bad{"HugeMaxTokens", R"({"model":"m","messages":[{"role":"user","content":"x"}],"max_tokens":99999999})", "max_tokens", "above the limit"},
        Bad{"TemperatureHigh", R"({"model":"m","messages":[{"role":"user","content":"x"}],"temperature":2.5})", "temperature", "from 0 to 2"},
        Bad{"TemperatureString", R"({"model":"m","messages":[{"role":"user","content":"x"}],"temperature":"hot"})", "temperature", "from 0 to 2"},
        Bad{"TopPZero", R"({"model":"m","messages":[{"role":"user","content":"x"}],"top_p":0})", "top_p", "above 0"},
        Bad{"TopPHigh", R"({"model":"m","messages":[{"role":"user","content":"x"}],"top_p":1.5})", "top_p", "above 0"},
        Bad{"NTwo", R"({"model":"m","messages":[{"role":"user","content":"x"}],"n":2})", "n", "only n = 1"},
        Bad{"StreamString", R"({"model":"m","messages":[{"role":"user","content":"x"}],"stream":"yes"})", "stream", "boolean"},
        Bad{"SessionNumber", R"({"model":"m","messages":[{"role":"user","content":"x"}],"metadata":{"session_id":7}})", "metadata.session_id", "must be a string"},
        Bad{"HintsNotObject", R"({"model":"m","messages":[{"role":"user","content":"x"}],"talaria":true})", "talaria", "object of hints"},
        Bad{"SessionEndString", R"({"model":"m","messages":[{"role":"user","content":"x"}],"talaria":{"session_end":"yes"}})", "talaria.session_end", "must be a boolean"},
        // A part whose type is not a string (a tree reader used to throw here,
        // and the client got its connection closed without an answer).
        Bad{"PartTypeNumber", R"({"model":"m","messages":[{"role":"user","content":[{"type":5,"text":"x"}]}]})", "messages[0].content", "only text"},
        Bad{"PartTextNumber", R"({"model":"m","messages":[{"role":"user","content":[{"type":"text","text":5}]}]})", "messages[0].content", "only text"},
        Bad{"MaxTokensPastInt64", R"({"model":"m","messages":[{"role":"user","content":"x"}],"max_tokens":18446744073709551615})", "max_tokens", "above the limit"},
        Bad{"MaxTokensFraction", R"({"model":"m","messages":[{"role":"user","content":"x"}],"max_tokens":2.5})", "max_tokens", "positive integer"},
        Bad{"TrailingBytes", R"({"model":"m","messages":[{"role":"user","content":"x"}]} x)", "", "not valid JSON"},
        Bad{"BadUtf8", "{\"model\":\"m\xff\",\"messages\":[{\"role\":\"user\",\"content\":\"x\"}]}", "", "not valid JSON"}),
    [](const auto& info) { return std::string(info.param.name); });

// A body past the per-thread parser's size is read by a parser of its own,
// and a small one after it by the kept parser again: both read whole.
TEST(OpenAiApiTest, LargeAndSmallBodiesAlternate) {
  const std::string big(300 * 1024, 'x');
  for (int round = 0; round < 2; ++round) {
    EXPECT_EQ(Ok(ParseCompletion(R"({"model":"m","prompt":")" + big + R"("})", "")).prompt_text.size(), big.size());
    EXPECT_EQ(Ok(ParseCompletion(R"({"model":"m","prompt":[1,2,3]})", "")).prompt_ids.size(), 3u);
  }
}

// A field a client repeats: its last value counts, as in most JSON readers.
TEST(OpenAiApiTest, ARepeatedFieldsLastValueCounts) {
  const auto r = Ok(ParseCompletion(R"({"model":"a","prompt":"x","max_tokens":3,"model":"b","max_tokens":7})", ""));
  EXPECT_EQ(r.model, "b");
  EXPECT_EQ(r.max_tokens, 7);
  EXPECT_THAT(Err(ParseCompletion(R"({"model":"a","prompt":"x","model":3})", "")).param, "model");
}

// Session ids go into telemetry and logs: bounded printable UTF-8 only,
// from the header (named as such) or the body.
TEST(OpenAiApiTest, SessionIdsArePrintableUtf8) {
  const std::string body = R"({"model":"m","messages":[{"role":"user","content":"x"}]})";
  for (const std::string& ok : {std::string("task-1/agent"), std::string("sesión-ü-日本-🙂"), std::string(256, 'a')}) {
    EXPECT_TRUE(std::holds_alternative<CompletionRequest>(ParseChatCompletion(body, ok))) << ok;
  }
  const std::string bad[] = {"\xff\xfe", "a\x80" "b", "\xc0\xaf", "\xed\xa0\x80", "\xf4\x90\x80\x80",
                             "tab\there", std::string("nul\0x", 5), "del\x7f", "c1\xc2\x85", "cut\xe6\x97",
                             std::string(257, 'a')};
  for (const std::string& id : bad) {
    const ApiError e = Err(ParseChatCompletion(body, id));
    EXPECT_EQ(e.status, 400) << testing::PrintToString(id);
    EXPECT_EQ(e.param, "X-Session-Id");
  }
  const ApiError in_body = Err(ParseChatCompletion(
      R"({"model":"m","messages":[{"role":"user","content":"x"}],"session_id":"a\u0001b"})", ""));
  EXPECT_EQ(in_body.param, "session_id");
}

TEST(OpenAiApiTest, TheSessionEndHintIsReadFromTheExtensionObject) {
  const auto ended = ParseCompletion(R"({"model":"m","prompt":"x","talaria":{"session_end":true}})", "s");
  ASSERT_TRUE(std::holds_alternative<CompletionRequest>(ended));
  EXPECT_TRUE(std::get<CompletionRequest>(ended).session_end);
  const auto plain = ParseCompletion(R"({"model":"m","prompt":"x"})", "s");
  EXPECT_FALSE(std::get<CompletionRequest>(plain).session_end);
}

// The tool-time hint: a number of seconds in [0, 3600] in the extension
// object or the header; anything else is a 400 naming where it was.
TEST(OpenAiApiTest, TheToolTimeHintIsCheckedAndRead) {
  const auto hinted = ParseCompletion(R"({"model":"m","prompt":"x","talaria":{"expected_tool_s":2.5}})", "s");
  ASSERT_TRUE(std::holds_alternative<CompletionRequest>(hinted));
  EXPECT_EQ(std::get<CompletionRequest>(hinted).expected_tool_s, 2.5);
  EXPECT_EQ(std::get<CompletionRequest>(ParseCompletion(R"({"model":"m","prompt":"x"})", "s")).expected_tool_s, -1);
  for (const char* bad : {R"(-1)", R"(3600.5)", R"(1e308)", R"("2")", R"(true)"}) {
    const ApiError e = Err(ParseCompletion(
        std::string(R"({"model":"m","prompt":"x","talaria":{"expected_tool_s":)") + bad + "}}", "s"));
    EXPECT_EQ(e.status, 400) << bad;
    EXPECT_EQ(e.param, "talaria.expected_tool_s") << bad;
  }
  ApiError e;
  EXPECT_EQ(ParseExpectedToolSeconds("0.25", "X-Expected-Tool-Seconds", e), 0.25);
  EXPECT_EQ(ParseExpectedToolSeconds("3600", "X-Expected-Tool-Seconds", e), 3600);
  for (const char* bad : {"", "-0.5", "abc", "1e9", "nan", "inf", "2 s"}) {
    EXPECT_FALSE(ParseExpectedToolSeconds(bad, "X-Expected-Tool-Seconds", e)) << bad;
    EXPECT_EQ(e.param, "X-Expected-Tool-Seconds");
    EXPECT_EQ(e.status, 400);
  }
}

TEST(OpenAiApiTest, SessionsAreScopedByApiKey) {
  EXPECT_NE(ScopedSessionId("key-a", "s1"), ScopedSessionId("key-b", "s1"));
  EXPECT_EQ(ScopedSessionId("key-a", "s1"), ScopedSessionId("key-a", "s1"));
  EXPECT_EQ(ScopedSessionId("key-a", ""), "");
  EXPECT_EQ(ScopedSessionId("secret-key", "s").find("secret"), std::string::npos);
}

TEST(OpenAiApiTest, ChatRenderingOfAContinuationExtendsThePrevious) {
  std::vector<ChatMessage> turn1 = {{"system", "sys"}, {"user", "do x"}};
  std::vector<ChatMessage> turn2 = turn1;
  turn2.push_back({"assistant", "calling tool"});
  turn2.push_back({"tool", "result"});
  const std::string a = RenderChat(turn1);
  const std::string b = RenderChat(turn2);
  // The previous prompt minus its assistant cue is a prefix of the next.
  const std::string cue = "<|assistant|>\n";
  EXPECT_EQ(b.rfind(a.substr(0, a.size() - cue.size()), 0), 0u);
}

}  // namespace
}  // namespace talaria
