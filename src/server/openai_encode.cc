#include "server/openai_encode.h"

#include <charconv>
#include <cstdio>

namespace talaria {
namespace {

// Appends `n` in decimal, in place (no temporary string per number).
void AppendInt(std::string& out, std::int64_t n) {
  char digits[24];
  const auto r = std::to_chars(digits, digits + sizeof digits, n);
  out.append(digits, r.ptr);
}

// Appends ,"usage":{...},"talaria":{...}: token counts, and the Talaria
// extension (where the call ran and where its prefix KV came from; the
// gateway's completion hook reads it).
void AppendUsage(std::string& out, const Usage& u) {
  out += ",\"usage\":{\"prompt_tokens\":";
  AppendInt(out, u.prompt_tokens);
  out += ",\"completion_tokens\":";
  AppendInt(out, u.completion_tokens);
  out += ",\"total_tokens\":";
  AppendInt(out, u.prompt_tokens + u.completion_tokens);
  out += ",\"prompt_tokens_details\":{\"cached_tokens\":";
  AppendInt(out, u.cached_tokens);
  out += "}},\"talaria\":{\"kv_source\":";
  AppendQuoted(out, u.kv_source);
  out += ",\"instance\":";
  AppendQuoted(out, u.instance);
  out += '}';
}

// {"id":..,"object":..,"created":..,"model":..  (left open for the choices)
void AppendHead(std::string& out, const AnswerHead& head, const char* object) {
  out += "{\"id\":";
  AppendQuoted(out, head.id);
  out += ",\"object\":\"";
  out += object;
  out += "\",\"created\":";
  AppendInt(out, head.created);
  out += ",\"model\":";
  AppendQuoted(out, head.model);
}

}  // namespace

void AppendQuoted(std::string& out, std::string_view text) {
  out += '"';
  std::size_t run = 0;  // the first byte not yet appended: runs that need no escape go in whole
  for (std::size_t i = 0; i < text.size(); ++i) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (c >= 0x20 && c != '"' && c != '\\') continue;
    out.append(text.data() + run, i - run);
    run = i + 1;
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default: {
        char esc[8];
        std::snprintf(esc, sizeof esc, "\\u%04x", c);
        out += esc;
      }
    }
  }
  out.append(text.data() + run, text.size() - run);
  out += '"';
}

std::string CompletionBody(const AnswerHead& head, std::string_view text, std::string_view finish_reason,
                           const Usage& usage) {
  std::string body;
  body.reserve(320 + text.size());
  AppendHead(body, head, head.chat ? "chat.completion" : "text_completion");
  body += head.chat ? ",\"choices\":[{\"index\":0,\"message\":{\"role\":\"assistant\",\"content\":"
                    : ",\"choices\":[{\"index\":0,\"text\":";
  AppendQuoted(body, text);
  body += head.chat ? "},\"finish_reason\":" : ",\"finish_reason\":";
  AppendQuoted(body, finish_reason);
  body += "}]";
  AppendUsage(body, usage);
  body += '}';
  return body;
}

std::string StreamDelta(const AnswerHead& head, std::string_view text, bool first_delta) {
  std::string out = "data: ";
  out.reserve(256 + text.size());
  AppendHead(out, head, head.chat ? "chat.completion.chunk" : "text_completion");
  if (head.chat) {
    out += first_delta ? ",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":"
                       : ",\"choices\":[{\"index\":0,\"delta\":{\"content\":";
    AppendQuoted(out, text);
    out += "},\"finish_reason\":null}]}";
  } else {
    out += ",\"choices\":[{\"index\":0,\"text\":";
    AppendQuoted(out, text);
    out += ",\"finish_reason\":null}]}";
  }
  out += "\n\n";
  return out;
}

std::string StreamFinal(const AnswerHead& head, std::string_view finish_reason, const Usage& usage) {
  std::string out = "data: ";
  out.reserve(384);
  AppendHead(out, head, head.chat ? "chat.completion.chunk" : "text_completion");
  out += head.chat ? ",\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":"
                   : ",\"choices\":[{\"index\":0,\"text\":\"\",\"finish_reason\":";
  AppendQuoted(out, finish_reason);
  out += "}]";
  AppendUsage(out, usage);
  out += "}\n\n";
  return out;
}

std::string ErrorBodyWithStatus(const ApiError& error) {
  nlohmann::json body = error.Body();
  body["error"]["status"] = error.status;  // what the status line would have said
  return body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

std::string StreamError(const ApiError& error) { return "data: " + ErrorBodyWithStatus(error) + "\n\n"; }

std::string TokenCompletionBody(std::string_view model, std::span<const std::int32_t> prompt, std::int64_t max_tokens,
                                bool stream, std::string_view session_id) {
  std::string out = "{\"model\":";
  out.reserve(96 + model.size() + 8 * prompt.size() + session_id.size());
  AppendQuoted(out, model);
  out += ",\"prompt\":[";
  for (std::size_t i = 0; i < prompt.size(); ++i) {
    if (i > 0) out += ',';
    AppendInt(out, prompt[i]);
  }
  out += "],\"max_tokens\":";
  AppendInt(out, max_tokens);
  out += stream ? ",\"stream\":true" : ",\"stream\":false";
  if (!session_id.empty()) {
    out += ",\"session_id\":";
    AppendQuoted(out, session_id);
  }
  out += '}';
  return out;
}

}  // namespace talaria
