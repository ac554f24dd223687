// The OpenAI wire module round trip: what the HTTP front writes
// (openai_encode.h) is what the gateway's instance link and the HTTP replay
// read back (openai_decode.h), and a token-id request body parses as sent.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "server/openai_api.h"
#include "server/openai_decode.h"
#include "server/openai_encode.h"

namespace talaria {
namespace {

AnswerHead Head(bool chat) {
  AnswerHead h;
  h.chat = chat;
  h.id = "cmpl-7";
  h.created = 1700000000;
  h.model = "m";
  return h;
}

Usage SomeUsage() {
  Usage u;
  u.prompt_tokens = 12;
  u.completion_tokens = 3;
  u.cached_tokens = 8;
  u.kv_source = "host";
  u.instance = "worker-1";
  return u;
}

TEST(OpenAiWireTest, AnAnswerReadsBackWithItsTextUsageAndExtension) {
  for (bool chat : {true, false}) {
    const std::string body = CompletionBody(Head(chat), "a \"quoted\"\nline", "length", SomeUsage());
    CompletionEvent e;
    ASSERT_TRUE(ReadCompletionEvent(body, e)) << body;
    EXPECT_FALSE(e.error);
    EXPECT_EQ(e.text, "a \"quoted\"\nline");
    EXPECT_EQ(e.finish_reason, "length");
    ASSERT_TRUE(e.has_usage);
    EXPECT_EQ(e.usage.prompt_tokens, 12);
    EXPECT_EQ(e.usage.completion_tokens, 3);
    EXPECT_EQ(e.usage.cached_tokens, 8);
    EXPECT_EQ(e.usage.kv_source, "host");
    EXPECT_EQ(e.usage.instance, "worker-1");
  }
}

// Every byte value, alone and between plain runs, quotes to a JSON string
// that reads back as the same bytes (nlohmann as the reader).
TEST(OpenAiWireTest, QuotingRoundTripsEveryByteAtEveryPosition) {
  for (int c = 1; c < 0x80; ++c) {
    for (const std::string& text : {std::string(1, static_cast<char>(c)), "ab" + std::string(1, static_cast<char>(c)),
                                    std::string(1, static_cast<char>(c)) + "cd", "a" + std::string(2, static_cast<char>(c)) + "b"}) {
      std::string quoted;
      AppendQuoted(quoted, text);
      const nlohmann::json back = nlohmann::json::parse(quoted, nullptr, /*allow_exceptions=*/false);
      ASSERT_TRUE(back.is_string()) << "byte " << c << ": " << quoted;
      EXPECT_EQ(back.get<std::string>(), text) << "byte " << c;
    }
  }
  std::string empty;
  AppendQuoted(empty, "");
  EXPECT_EQ(empty, "\"\"");
}

TEST(OpenAiWireTest, AStreamSplitAnywhereDecodesToItsEventsInOrder) {
  const AnswerHead head = Head(true);
  ApiError err;
  err.status = 503;
  err.message = "gone";
  const std::string stream = StreamDelta(head, "he", true) + StreamDelta(head, "llo", false) +
                             StreamFinal(head, "stop", SomeUsage()) + StreamError(err) + std::string(kStreamDone);
  for (std::size_t piece : {std::size_t{1}, std::size_t{7}, stream.size()}) {
    SseDecoder sse;
    std::vector<std::string> seen;
    for (std::size_t at = 0; at < stream.size(); at += piece) {
      sse.Feed(stream.data() + at, std::min(piece, stream.size() - at), [&](std::string_view data) {
        if (data == "[DONE]") return seen.push_back("[DONE]");
        CompletionEvent e;
        ASSERT_TRUE(ReadCompletionEvent(data, e)) << data;
        seen.push_back(e.error ? "error" : e.has_usage ? "final:" + e.finish_reason : "delta:" + e.text);
      });
    }
    EXPECT_EQ(seen, (std::vector<std::string>{"delta:he", "delta:llo", "final:stop", "error", "[DONE]"}))
        << "fed " << piece << " bytes at a time";
  }
}

TEST(OpenAiWireTest, NotAJsonObjectIsRefused) {
  CompletionEvent e;
  EXPECT_FALSE(ReadCompletionEvent("[1,2]", e));
  EXPECT_FALSE(ReadCompletionEvent("{\"choices\":", e));
  EXPECT_FALSE(ReadCompletionEvent("{\"choices\":[{\"text\":\"a\"}]", e));
  EXPECT_FALSE(ReadCompletionEvent("{\"usage\":{} } {\"error\":1}", e));
  EXPECT_FALSE(ReadCompletionEvent("{\"choices\":[{\"text\":\"a\"", e));
  EXPECT_FALSE(ReadCompletionEvent("", e));
}

TEST(OpenAiWireTest, FieldsOfAnotherTypeReadAsAbsent) {
  CompletionEvent e;
  ASSERT_TRUE(ReadCompletionEvent(
      R"({"choices":[{"delta":{"role":"assistant","content":null},"finish_reason":null},7],)"
      R"("usage":{"prompt_tokens":4.5,"completion_tokens":2,"prompt_tokens_details":null},"talaria":[]})",
      e));
  EXPECT_EQ(e.text, "");
  EXPECT_EQ(e.finish_reason, "");
  EXPECT_TRUE(e.has_usage);
  EXPECT_EQ(e.usage.prompt_tokens, 0);
  EXPECT_EQ(e.usage.completion_tokens, 2);
  EXPECT_EQ(e.usage.cached_tokens, 0);
  ASSERT_TRUE(ReadCompletionEvent(R"({"error":{"message":"x"},"choices":[{"text":"a\u00e9\n"}]})", e));
  EXPECT_TRUE(e.error);
  EXPECT_EQ(e.text, "a\xc3\xa9\n");
}

TEST(OpenAiWireTest, ATokenIdRequestBodyParsesAsSent) {
  const std::vector<std::int32_t> prompt{3, 70, 259};
  const std::string body = TokenCompletionBody("m", prompt, 16, /*stream=*/true, "s\"1");
  const auto parsed = ParseCompletion(body, "");
  ASSERT_TRUE(std::holds_alternative<CompletionRequest>(parsed)) << std::get<ApiError>(parsed).message;
  const auto& r = std::get<CompletionRequest>(parsed);
  EXPECT_EQ(r.model, "m");
  EXPECT_EQ(r.prompt_ids, prompt);
  EXPECT_EQ(r.max_tokens, 16);
  EXPECT_TRUE(r.stream);
  EXPECT_EQ(r.session_id, "s\"1");
}

}  // namespace
}  // namespace talaria
