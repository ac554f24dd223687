#include "server/openai_api.h"

#include <charconv>
#include <cmath>
#include <optional>

#include <simdjson.h>

#include "core/hex.h"
#include "core/random.h"

namespace talaria {
namespace {

using nlohmann::json;

ApiError Invalid(std::string param, std::string message, std::string code = "invalid_value") {
  ApiError e;
  e.param = std::move(param);
  e.code = std::move(code);
  e.message = std::move(message);
  return e;
}

namespace dom = simdjson::dom;

// The request body is read with simdjson's DOM parser (the whole document
// validated, UTF-8 included, into a reused tape: no allocation per value,
// where a JSON tree allocated one per member), then its fields looked up.

// A field of `o` by name, or nullopt; a repeated name's last value wins
// (as in most JSON readers, and in this server's before).
std::optional<dom::element> Field(dom::object o, std::string_view key) {
  std::optional<dom::element> found;
  for (const dom::key_value_pair kv : o) {
    if (kv.key == key) found = kv.value;
  }
  return found;
}
bool IsNull(dom::element e) { return e.type() == dom::element_type::NULL_VALUE; }
bool IsInteger(dom::element e) { return e.is_int64() || e.is_uint64(); }
// An integer's value; one beyond int64's range reads as its largest value.
std::int64_t IntegerOf(dom::element e) {
  std::int64_t v = 0;
  return e.get_int64().get(v) == simdjson::SUCCESS ? v : INT64_MAX;
}
// A value of another type reads as 0, "" or false (callers check types first).
double NumberOf(dom::element e) {
  double v = 0;
  return e.get_double().get(v) == simdjson::SUCCESS ? v : 0;
}
std::string_view StringOf(dom::element e) {
  std::string_view v;
  return e.get_string().get(v) == simdjson::SUCCESS ? v : std::string_view();
}
bool BoolOf(dom::element e) {
  bool v = false;
  return e.get_bool().get(v) == simdjson::SUCCESS && v;
}
// `e` as an object. REQUIRES: e.is_object() (a default object has no tape
// to iterate).
dom::object ObjectOf(dom::element e) { return dom::object(e.get_object().value_unsafe()); }

// The parser a body is read with, which owns what its values point into:
// one per thread, kept between requests, for bodies up to kKeptBytes; a
// larger body gets a parser of its own, freed with it, so one large request
// does not pin its tape (several bytes per byte of body) for the thread's
// life.
class BodyParser {
 public:
  static constexpr std::size_t kKeptBytes = 256 * 1024;
  explicit BodyParser(std::size_t body_bytes) : parser_(body_bytes <= kKeptBytes ? Kept() : owned_.emplace()) {}
  dom::parser& get() { return parser_; }

 private:
  static dom::parser& Kept() {
    thread_local dom::parser parser;
    return parser;
  }
  std::optional<dom::parser> owned_;
  dom::parser& parser_;
};

// The body as an object, read with `parser`.
std::variant<dom::object, ApiError> ParseObject(std::string_view body, dom::parser& parser) {
  dom::element doc;
  if (parser.parse(body.data(), body.size()).get(doc) != simdjson::SUCCESS) {
    return Invalid("", "the request body is not valid JSON", "invalid_json");
  }
  dom::object o;
  if (doc.get_object().get(o) != simdjson::SUCCESS) {
    return Invalid("", "the request body must be a JSON object", "invalid_json");
  }
  return o;
}

// Session ids end up in telemetry, metrics exemplars and logs: printable
// UTF-8 only (well-formed, no C0 or C1 controls, no DEL), checked here so no
// encoder downstream ever meets bytes it cannot write.
bool PrintableUtf8(std::string_view s) {
  std::size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<unsigned char>(s[i]);
    std::uint32_t cp = 0;
    std::size_t n = 0;
    if (c < 0x80) cp = c, n = 1;
    else if (c >= 0xC2 && c <= 0xDF) cp = c & 0x1Fu, n = 2;
    else if (c >= 0xE0 && c <= 0xEF) cp = c & 0x0Fu, n = 3;
    else if (c >= 0xF0 && c <= 0xF4) cp = c & 0x07u, n = 4;
    else return false;  // a continuation byte, an overlong lead (C0, C1) or past U+10FFFF
    if (i + n > s.size()) return false;
    for (std::size_t k = 1; k < n; ++k) {
      const auto b = static_cast<unsigned char>(s[i + k]);
      if ((b & 0xC0u) != 0x80u) return false;
      cp = (cp << 6) | (b & 0x3Fu);
    }
    const std::uint32_t min[] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < min[n] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return false;  // overlong, range, surrogate
    if (cp < 0x20 || cp == 0x7F || (cp >= 0x80 && cp < 0xA0)) return false;          // controls
    i += n;
  }
  return true;
}

std::optional<ApiError> ParseCommon(dom::object j, std::string_view session_header, const ParseLimits& limits,
                                    CompletionRequest& out) {
  const auto model = Field(j, "model");
  if (!model) return Invalid("model", "you must provide a model parameter", "missing_required_parameter");
  if (!model->is_string() || StringOf(*model).empty()) {
    return Invalid("model", "'model' must be a non-empty string", "invalid_type");
  }
  out.model = StringOf(*model);
  for (const char* key : {"max_tokens", "max_completion_tokens"}) {
    const auto it = Field(j, key);
    if (!it || IsNull(*it)) continue;
    if (!IsInteger(*it) || IntegerOf(*it) < 1) {
      return Invalid(key, std::string("'") + key + "' must be a positive integer", "invalid_type");
    }
    if (IntegerOf(*it) > limits.max_tokens_limit) {
      return Invalid(key, std::string("'") + key + "' is above the limit of " +
                              std::to_string(limits.max_tokens_limit));
    }
    out.max_tokens = IntegerOf(*it);
  }
  // Sampling parameters, by the OpenAI API's ranges; only one choice per call.
  if (const auto it = Field(j, "temperature"); it && !IsNull(*it)) {
    if (!it->is_number() || NumberOf(*it) < 0 || NumberOf(*it) > 2) {
      return Invalid("temperature", "'temperature' must be a number from 0 to 2", "invalid_value");
    }
  }
  if (const auto it = Field(j, "top_p"); it && !IsNull(*it)) {
    if (!it->is_number() || !(NumberOf(*it) > 0) || NumberOf(*it) > 1) {
      return Invalid("top_p", "'top_p' must be a number above 0 and at most 1", "invalid_value");
    }
  }
  if (const auto it = Field(j, "n"); it && !IsNull(*it)) {
    if (!IsInteger(*it) || IntegerOf(*it) != 1) {
      return Invalid("n", "only n = 1 (one choice per call) is supported", "invalid_value");
    }
  }
  if (const auto it = Field(j, "stream"); it && !IsNull(*it)) {
    if (!it->is_bool()) return Invalid("stream", "'stream' must be a boolean", "invalid_type");
    out.stream = BoolOf(*it);
  }
  const char* session_param = "session_id";
  if (!session_header.empty()) {
    out.session_id = std::string(session_header);
    session_param = "X-Session-Id";
  } else if (const auto it = Field(j, "session_id"); it && !IsNull(*it)) {
    if (!it->is_string()) return Invalid("session_id", "'session_id' must be a string", "invalid_type");
    out.session_id = StringOf(*it);
  } else if (const auto md = Field(j, "metadata"); md && md->is_object()) {
    if (const auto sid = Field(ObjectOf(*md), "session_id")) {
      if (!sid->is_string()) {
        return Invalid("metadata.session_id", "'metadata.session_id' must be a string", "invalid_type");
      }
      out.session_id = StringOf(*sid);
      session_param = "metadata.session_id";
    }
  }
  // Talaria's extension object: agent hints (docs/serving.md "Agent hints").
  if (const auto ext = Field(j, "talaria"); ext && !IsNull(*ext)) {
    if (!ext->is_object()) return Invalid("talaria", "'talaria' must be an object of hints", "invalid_type");
    const dom::object hints = ObjectOf(*ext);
    if (const auto end = Field(hints, "session_end"); end && !IsNull(*end)) {
      if (!end->is_bool()) return Invalid("talaria.session_end", "'talaria.session_end' must be a boolean", "invalid_type");
      out.session_end = BoolOf(*end);
    }
    if (const auto tool = Field(hints, "expected_tool_s"); tool && !IsNull(*tool)) {
      const double v = tool->is_number() ? NumberOf(*tool) : -1;
      if (!tool->is_number() || !std::isfinite(v) || v < 0 || v > kMaxExpectedToolS) {
        return Invalid("talaria.expected_tool_s", "'talaria.expected_tool_s' must be a number of seconds in [0, 3600]",
                       tool->is_number() ? "invalid_value" : "invalid_type");
      }
      out.expected_tool_s = v;
    }
  }
  if (out.session_id.size() > 256) return Invalid(session_param, "session ids are at most 256 bytes");
  if (!PrintableUtf8(out.session_id)) {
    return Invalid(session_param, "session ids must be printable UTF-8 (no control characters)", "invalid_value");
  }
  return std::nullopt;
}

// The body as an object plus the fields both endpoints share.
std::optional<ApiError> ParseEnvelope(std::string_view body, std::string_view session_header,
                                      const ParseLimits& limits, BodyParser& parser, dom::object& j,
                                      CompletionRequest& out) {
  auto parsed = ParseObject(body, parser.get());
  if (auto* err = std::get_if<ApiError>(&parsed)) return *err;
  j = std::get<dom::object>(parsed);
  return ParseCommon(j, session_header, limits, out);
}

}  // namespace

nlohmann::json ApiError::Body() const {
  json e;
  e["message"] = message;
  e["type"] = type;
  e["param"] = param.empty() ? json(nullptr) : json(param);
  e["code"] = code.empty() ? json(nullptr) : json(code);
  return json{{"error", e}};
}

ApiError ApiError::FromResponse(int status, std::string_view body) {
  ApiError e;
  e.status = status;
  e.type = status >= 500 ? "server_error" : "invalid_request_error";
  const json j = json::parse(body, nullptr, /*allow_exceptions=*/false);
  const json* err = j.is_object() && j.contains("error") && j["error"].is_object() ? &j["error"] : nullptr;
  if (err == nullptr) {
    e.message = "upstream answered " + std::to_string(status) + ": " + std::string(body.substr(0, 200));
    return e;
  }
  const auto text = [err](const char* key) {
    auto it = err->find(key);
    return it != err->end() && it->is_string() ? it->get<std::string>() : std::string();
  };
  e.message = text("message");
  if (const std::string t = text("type"); !t.empty()) e.type = t;
  e.param = text("param");
  e.code = text("code");
  // An error event of a stream names the status it stands for (StreamError).
  if (auto st = err->find("status"); st != err->end() && st->is_number_integer()) {
    const int s = st->get<int>();
    if (s >= 400 && s <= 599) e.status = s;
  }
  return e;
}

std::optional<double> ParseExpectedToolSeconds(std::string_view text, const std::string& param, ApiError& error) {
  double v = -1;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size() || !std::isfinite(v) || v < 0 ||
      v > kMaxExpectedToolS) {
    error = Invalid(param, param + " must be a number of seconds in [0, 3600]");
    return std::nullopt;
  }
  return v;
}

std::variant<CompletionRequest, ApiError> ParseChatCompletion(std::string_view body,
                                                              std::string_view session_header,
                                                              const ParseLimits& limits) {
  CompletionRequest out;
  out.chat = true;
  BodyParser parser(body.size());
  dom::object j;
  if (auto err = ParseEnvelope(body, session_header, limits, parser, j, out)) return *err;
  const auto messages_field = Field(j, "messages");
  if (!messages_field) {
    return Invalid("messages", "you must provide a messages parameter", "missing_required_parameter");
  }
  dom::array messages;
  if (messages_field->get_array().get(messages) != simdjson::SUCCESS || messages.size() == 0) {
    return Invalid("messages", "'messages' must be a non-empty array", "invalid_type");
  }
  if (messages.size() > limits.max_messages) return Invalid("messages", "too many messages");
  std::size_t i = 0;
  for (const dom::element m : messages) {
    const std::string at = "messages[" + std::to_string(i++) + "]";
    if (!m.is_object()) return Invalid(at, "'" + at + "' must be an object", "invalid_type");
    const dom::object message = ObjectOf(m);
    const auto role = Field(message, "role");
    if (!role || !role->is_string()) {
      return Invalid(at + ".role", "'" + at + ".role' must be a string", "invalid_type");
    }
    const std::string r(StringOf(*role));
    if (r != "system" && r != "developer" && r != "user" && r != "assistant" && r != "tool") {
      return Invalid(at + ".role", "'" + r + "' is not a supported role");
    }
    ChatMessage msg{r, ""};
    const auto content = Field(message, "content");
    dom::array parts;
    if (content && content->is_string()) {
      msg.content = StringOf(*content);
    } else if (content && content->get_array().get(parts) == simdjson::SUCCESS) {
      // Content parts: text parts are concatenated; others are not supported.
      for (const dom::element part : parts) {
        const auto type = part.is_object() ? Field(ObjectOf(part), "type") : std::nullopt;
        const auto text = part.is_object() ? Field(ObjectOf(part), "text") : std::nullopt;
        if (!type || !type->is_string() || StringOf(*type) != "text" || !text || !text->is_string()) {
          return Invalid(at + ".content", "only text content parts are supported", "invalid_type");
        }
        msg.content += StringOf(*text);
      }
    } else if (!(r == "assistant" && content && IsNull(*content))) {
      return Invalid(at + ".content", "'" + at + ".content' must be a string or text parts", "invalid_type");
    }
    out.messages.push_back(std::move(msg));
  }
  return out;
}

std::variant<CompletionRequest, ApiError> ParseCompletion(std::string_view body,
                                                          std::string_view session_header,
                                                          const ParseLimits& limits) {
  CompletionRequest out;
  out.chat = false;
  out.max_tokens = 16;  // the completions endpoint's default
  BodyParser parser(body.size());
  dom::object j;
  if (auto err = ParseEnvelope(body, session_header, limits, parser, j, out)) return *err;
  const auto prompt = Field(j, "prompt");
  if (!prompt) return Invalid("prompt", "you must provide a prompt parameter", "missing_required_parameter");
  dom::array ids;
  if (prompt->is_string()) {
    out.prompt_text = StringOf(*prompt);
  } else if (prompt->get_array().get(ids) == simdjson::SUCCESS && ids.begin() != ids.end() && IsInteger(*ids.begin())) {
    out.prompt_ids.reserve(ids.size());
    for (const dom::element id : ids) {
      if (!IsInteger(id) || IntegerOf(id) < 0 || IntegerOf(id) > INT32_MAX) {
        return Invalid("prompt", "token-id prompts must be arrays of non-negative integers", "invalid_type");
      }
      out.prompt_ids.push_back(static_cast<std::int32_t>(IntegerOf(id)));
    }
  } else {
    return Invalid("prompt", "'prompt' must be a string or a non-empty array of token ids", "invalid_type");
  }
  return out;
}

std::string SessionScope(std::string_view api_key) {
  // The key itself never appears in the id (ids show up in telemetry).
  std::uint64_t h = 0xcbf29ce484222325ULL;
  for (unsigned char c : api_key) h = (h ^ c) * 0x100000001b3ULL;
  std::string prefix;
  AppendHex64(prefix, Mix64(h));
  prefix += ':';
  return prefix;
}

std::string ScopedSessionId(std::string_view api_key, std::string_view session_id) {
  if (session_id.empty()) return {};
  std::string id = SessionScope(api_key);
  id.append(session_id);
  return id;
}

std::string RenderChat(const std::vector<ChatMessage>& messages) {
  std::string out;
  for (const auto& m : messages) {
    out += "<|" + m.role + "|>\n" + m.content + "\n";
  }
  out += "<|assistant|>\n";
  return out;
}

}  // namespace talaria
