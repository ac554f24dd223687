// Fuzz drivers for what a client sends (tests/fuzz/mutator.h): raw HTTP
// requests through the request parser the servers use, configured with
// their limits, then the OpenAI body parser as the server calls it; and
// OpenAI request bodies with session headers on their own. A parse either
// succeeds with a request that keeps the documented bounds, or fails with an
// error the server can answer; nothing throws, crashes or trips a check.
#include <utility>  // before Boost 1.74's asio (see http_server.cc)

#include <boost/asio/buffer.hpp>
#include <boost/beast/http.hpp>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <string>
#include <variant>
#include <vector>

#include "config/serve_options.h"
#include "fuzz/mutator.h"
#include "server/openai_api.h"
#include "server/openai_decode.h"

namespace talaria {
namespace {

namespace http = boost::beast::http;

const std::string kChat =
    R"({"model":"m","max_tokens":16,"stream":true,"temperature":0.7,"top_p":0.9,"n":1,)"
    R"("metadata":{"session_id":"agent-7"},"messages":[{"role":"system","content":"you are an agent"},)"
    R"({"role":"user","content":"fix the bug"},{"role":"assistant","content":"ok"},{"role":"tool","content":"done"}]})";
const std::string kCompletionText = R"({"model":"m","max_tokens":4,"prompt":"hello","session_id":"s1"})";
const std::string kCompletionIds = R"({"model":"m","max_tokens":1,"prompt":[1,2,258,0],"stream":false})";

std::string Post(const std::string& path, const std::string& body, const std::string& extra = "") {
  return "POST " + path + " HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nAuthorization: Bearer k\r\n" +
         extra + "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
}

std::string Chunked(const std::string& body) {
  char size[16];
  std::snprintf(size, sizeof size, "%zx", body.size());
  return "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n" + std::string(size) +
         "\r\n" + body + "\r\n0\r\n\r\n";
}

// The parsed request keeps the bounds docs/serving.md promises.
void CheckBounds(const CompletionRequest& r, const ParseLimits& limits) {
  ASSERT_GE(r.max_tokens, 1);
  ASSERT_LE(r.max_tokens, limits.max_tokens_limit);
  ASSERT_LE(r.messages.size(), limits.max_messages);
  ASSERT_LE(r.session_id.size(), 256u);
  for (const unsigned char c : r.session_id) ASSERT_TRUE(c >= 0x20 && c != 0x7f) << "control byte in a session id";
  ASSERT_FALSE(r.model.empty());
}

// What the server does with a body; true when it was accepted.
bool ParseBody(bool chat, const std::string& body, const std::string& session_header) {
  const ParseLimits limits;
  auto parsed = chat ? ParseChatCompletion(body, session_header, limits) : ParseCompletion(body, session_header, limits);
  if (const auto* e = std::get_if<ApiError>(&parsed)) {
    EXPECT_GE(e->status, 400);
    EXPECT_FALSE(e->message.empty());
    // The answer must be writable whatever bytes the client sent.
    (void)e->Body().dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    return false;
  }
  CheckBounds(std::get<CompletionRequest>(parsed), limits);
  return true;
}

TEST(HttpFuzzTest, RawRequestsParseOrAreRefused) {
  fuzz::Mutator mutator(
      {Post("/v1/chat/completions", kChat, "X-Session-Id: abc\r\n"), Post("/v1/completions", kCompletionIds),
       Post("/v1/completions", kCompletionText), Chunked(kChat), "GET /health HTTP/1.1\r\nHost: x\r\n\r\n",
       "HEAD /health HTTP/1.0\r\n\r\n" + Post("/v1/completions", kCompletionText)},
      {"\r\n", "\r\n\r\n", "Content-Length: ", "Transfer-Encoding: chunked\r\n", "0\r\n\r\n", "ffffffffffffffff\r\n",
       "HTTP/1.1", "HTTP/9.9", "POST ", "GET ", ": ", " ", "\t", "X-Session-Id: ", "\xff\xfe", std::string(1, '\0'),
       "Connection: close\r\n", "Expect: 100-continue\r\n", "{", "}", "\"messages\":", "\"prompt\":[", "\\u0000"});
  const HttpLimits limits;
  const std::int64_t accepted = fuzz::Drive(mutator, [&](const std::string& bytes) {
    http::request_parser<http::string_body> parser;
    parser.header_limit(static_cast<std::uint32_t>(limits.max_header_bytes));
    parser.body_limit(static_cast<std::uint64_t>(limits.max_body_bytes));
    boost::system::error_code ec;
    std::size_t used = 0;
    while (!parser.is_done() && used < bytes.size()) {
      const std::size_t n = parser.put(boost::asio::buffer(bytes.data() + used, bytes.size() - used), ec);
      used += n;
      if (ec == http::error::need_more && n == 0) break;  // the rest never comes: the server times it out
      if (ec && ec != http::error::need_more) return false;  // answered 400, 413 or 431 by the server
    }
    if (!parser.is_done()) return false;
    const auto& req = parser.get();
    const std::string target(req.target());
    std::string session;
    if (auto it = req.find("X-Session-Id"); it != req.end()) session = std::string(it->value());
    if (target == "/v1/chat/completions" || target == "/v1/completions") {
      ParseBody(target == "/v1/chat/completions", req.body(), session);
    }
    return true;
  });
  EXPECT_GT(accepted, 0);  // the loop reached past the parser, not only its refusals
}

TEST(HttpFuzzTest, OpenAiBodiesParseOrGetA400) {
  // An input is "session header\n body"; the header comes first, as a client sends it.
  fuzz::Mutator mutator({"\n" + kChat, "agent-1\n" + kChat, "s\n" + kCompletionText, "\n" + kCompletionIds,
                         "\n{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"hi\"}]}]}"},
                        {"\"", "\\", "\\u", "\\ud800", "\xc3\x28", "\xf0\x9f\x98\x80", "{", "}", "[", "]", ",", ":",
                         "null", "true", "-1", "1e999", "\"max_tokens\":", "\"session_id\":", "\"metadata\":",
                         "\"prompt\":", "\"messages\":", "\"role\":", "\"content\":", "\"n\":", "\"temperature\":",
                         std::string(300, 'a'), std::string(1, '\x01')});
  const std::int64_t accepted = fuzz::Drive(mutator, [](const std::string& input) {
    const auto newline = input.find('\n');
    const std::string header = newline == std::string::npos ? "" : input.substr(0, newline);
    const std::string body = newline == std::string::npos ? input : input.substr(newline + 1);
    const bool chat = body.find("\"messages\"") != std::string::npos;
    return ParseBody(chat, body, header);
  });
  EXPECT_GT(accepted, 0);
}

// What the gateway reads from an instance (its answers and stream events),
// a peer that may be broken: every JSON object reads (a valid one is never
// refused), anything else is refused, and nothing crashes. nlohmann's
// strict parser is the reference for "a valid JSON object".
TEST(HttpFuzzTest, InstanceEventsReadOrAreRefused) {
  fuzz::Mutator mutator(
      {R"({"id":"c","object":"text_completion","choices":[{"index":0,"text":"a\"b\n","finish_reason":"stop"}],)"
       R"("usage":{"prompt_tokens":12,"completion_tokens":3,"prompt_tokens_details":{"cached_tokens":8}},)"
       R"("talaria":{"kv_source":"host","instance":"w1"}})",
       R"({"choices":[{"index":0,"delta":{"content":"he"},"finish_reason":null}]})",
       R"({"error":{"message":"gone","type":"server_error","status":503}})"},
      {"\"", "\\", "\\u", "\\ud800", "\xc3\x28", "{", "}", "[", "]", ",", ":", "null", "true", "-1", "1e999",
       "1.5", "\"text\":", "\"usage\":", "\"choices\":", "\"delta\":", "\"content\":", std::string(300, 'a')});
  const std::int64_t read = fuzz::Drive(mutator, [](const std::string& input) {
    CompletionEvent e;
    const bool ok = ReadCompletionEvent(input, e);
    const nlohmann::json reference = nlohmann::json::parse(input, nullptr, /*allow_exceptions=*/false);
    if (reference.is_object()) {
      EXPECT_TRUE(ok) << "a valid object was refused: " << input;
    } else if (!reference.is_discarded()) {
      EXPECT_FALSE(ok) << "not an object: " << input;
    }
    return ok;
  });
  EXPECT_GT(read, 0);
}

}  // namespace
}  // namespace talaria
