// The OpenAI wire format, request side (the answer side: openai_encode.h
// writes answers and stream events, openai_decode.h reads them): parsing and
// validating /v1/chat/completions and /v1/completions bodies, the session id
// (X-Session-Id header, or the body's session_id / metadata.session_id,
// scoped by API key so tenants cannot address each other's sessions), and
// OpenAI-style error bodies {"error":{"message","type","param","code"}}.
// Pure functions: no I/O, no clock.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace talaria {

struct ApiError {
  int status = 400;
  std::string type = "invalid_request_error";
  std::string param;  // empty: null in the body
  std::string code;   // empty: null in the body
  std::string message;

  nlohmann::json Body() const;
  // The error an upstream server answered: its status and body (an
  // OpenAI-style body, or anything else, kept as the message). A body's
  // error.status (a stream's error event, StreamError) overrides `status`.
  static ApiError FromResponse(int status, std::string_view body);
};

struct Usage {
  std::int64_t prompt_tokens = 0;
  std::int64_t completion_tokens = 0;
  std::int64_t cached_tokens = 0;
  // Where the reused prompt KV came from ("device", "host", "recompute");
  // reported to the gateway as a Talaria extension of the final chunk.
  std::string kv_source;
  std::string instance;  // which instance served the call
};

struct ChatMessage {
  std::string role;
  std::string content;
};

struct CompletionRequest {
  bool chat = true;
  std::string model;
  std::vector<ChatMessage> messages;   // chat
  std::string prompt_text;             // completions, text prompt
  std::vector<std::int32_t> prompt_ids;  // completions, token-id prompt
  std::int64_t max_tokens = 256;
  bool stream = false;
  std::string session_id;  // as the client gave it (unscoped); empty if none
  // Agent hint: this is the session's last call (X-Session-End: true, or
  // "talaria": {"session_end": true}); its lease is not kept.
  bool session_end = false;
  // Agent hint: the seconds the client's tool will take before the
  // session's next call (X-Expected-Tool-Seconds, or "talaria":
  // {"expected_tool_s": S}), in [0, kMaxExpectedToolS]; -1 when not given.
  double expected_tool_s = -1;
};

// The headers that name a session, first match wins: X-Session-Id and the
// aliases other gateways use.
inline constexpr const char* kSessionHeaders[] = {"X-Session-Id", "X-Dynamo-Session-ID", "X-SMG-Routing-Key"};

struct ParseLimits {
  std::int64_t max_tokens_limit = 32768;
  std::size_t max_messages = 4096;
};

// `session_header` is the X-Session-Id header ("" when absent); it wins over
// the body's fields.
// The longest tool time a hint may announce (an hour): beyond it a hint is
// a 400, not a clamp, so a client learns its unit was wrong.
inline constexpr double kMaxExpectedToolS = 3600;
// Reads a tool-time hint's text (the header's value); nullopt with `error`
// set when it is not a number of seconds in [0, kMaxExpectedToolS].
std::optional<double> ParseExpectedToolSeconds(std::string_view text, const std::string& param, ApiError& error);

std::variant<CompletionRequest, ApiError> ParseChatCompletion(std::string_view body,
                                                              std::string_view session_header,
                                                              const ParseLimits& limits = {});
std::variant<CompletionRequest, ApiError> ParseCompletion(std::string_view body,
                                                          std::string_view session_header,
                                                          const ParseLimits& limits = {});

// The session key the router and instances see: the client's id scoped by
// the caller's API key, so equal ids from two tenants never meet. Requests
// without a session id get none (each call stands alone).
std::string ScopedSessionId(std::string_view api_key, std::string_view session_id);
// The prefix every session id scoped by `api_key` starts with.
std::string SessionScope(std::string_view api_key);

// The simple chat template: one block per message, then the assistant cue.
// Deterministic, so a continuation's rendering starts with the previous one's.
std::string RenderChat(const std::vector<ChatMessage>& messages);

}  // namespace talaria
