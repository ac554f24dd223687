// The OpenAI wire format, answer side: the bytes of a completion answer and
// of each server-sent event of a stream (a delta, the final chunk with
// usage and the Talaria extension, an error, the [DONE] terminator), and
// the token-id /v1/completions body the gateway and the HTTP replay send.
// Bodies are written straight into a string: they are built per call (per
// token when streaming), where a JSON object tree costs more than the rest
// of the serving path (measured by bench/gateway/run.sh). Pure functions.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "server/openai_api.h"

namespace talaria {

// What every answer and chunk of one call repeats.
struct AnswerHead {
  bool chat = true;  // chat.completion(.chunk), else text_completion
  std::string id;
  std::int64_t created = 0;  // Unix seconds
  std::string model;
};

// The non-streaming answer.
std::string CompletionBody(const AnswerHead& head, std::string_view text, std::string_view finish_reason,
                           const Usage& usage);
// "data: {...}\n\n" events. The first delta of a chat stream carries the role.
std::string StreamDelta(const AnswerHead& head, std::string_view text, bool first_delta);
std::string StreamFinal(const AnswerHead& head, std::string_view finish_reason, const Usage& usage);
// An error event: the OpenAI error body, plus "status" (a Talaria
// extension: the HTTP status the error would have had before the stream began).
std::string StreamError(const ApiError& error);
// That body alone: the error a whole answer reports once its 200 head is out
// (a keep-alive period passed before the call ended).
std::string ErrorBodyWithStatus(const ApiError& error);
inline constexpr std::string_view kStreamDone = "data: [DONE]\n\n";
// Keep-alives (a Talaria extension): a streaming request with this header
// (seconds, 0.1 to 60) gets its stream's head at once and a comment line
// (which SSE readers skip) each period without an event, so the reader can
// tell a call that waits for its slot from a server that hangs. An error
// before the first token is then an error event, not a status line.
inline constexpr const char* kKeepaliveHeader = "X-Talaria-Keepalive";
inline constexpr std::string_view kKeepaliveComment = ": keepalive\n\n";

// A /v1/completions request body with a token-id prompt.
std::string TokenCompletionBody(std::string_view model, std::span<const std::int32_t> prompt, std::int64_t max_tokens,
                                bool stream, std::string_view session_id = {});

// Appends `text` as a JSON string literal. Bytes >= 0x80 pass through
// (valid UTF-8 in, valid UTF-8 out).
void AppendQuoted(std::string& out, std::string_view text);

}  // namespace talaria
