#include "server/openai_decode.h"

#include <cstdint>
#include <string>
#include <utility>

#include <simdjson.h>

namespace talaria {
namespace {

namespace od = simdjson::ondemand;

// Reads what the gateway needs from one completion event or answer (the
// text, finish reason, usage and the Talaria extension) with simdjson's
// on-demand parser: it walks the object once, decoding only the fields it
// names and skipping the rest, without building a tree or a string per
// token. This runs for every event of every call.

// A container of the wanted kind, or `absent` when the value is another
// kind (null, a number: nothing to read there); a malformed document is an
// error either way.
template <typename T>
simdjson::error_code Container(simdjson::simdjson_result<T> r, T& out, bool& absent) {
  const simdjson::error_code e = std::move(r).get(out);
  absent = e == simdjson::INCORRECT_TYPE;
  return absent ? simdjson::SUCCESS : e;
}

// A string field's value; anything else (null, a number) reads as absent.
void ReadString(od::value v, std::string& out) {
  std::string_view s;
  if (v.get_string().get(s) == simdjson::SUCCESS) out.assign(s);
}
void ReadInteger(od::value v, std::int64_t& out) {
  std::int64_t n = 0;
  if (v.get_int64().get(n) == simdjson::SUCCESS) out = n;
}

// {"content": ...} of a chat message or delta.
simdjson::error_code ReadContent(od::value v, std::string& text) {
  od::object o;
  bool absent = false;
  SIMDJSON_TRY(Container(v.get_object(), o, absent));
  if (absent) return simdjson::SUCCESS;
  for (auto field : o) {
    std::string_view key;
    SIMDJSON_TRY(field.unescaped_key().get(key));
    if (key == "content") ReadString(field.value(), text);
  }
  return simdjson::SUCCESS;
}

simdjson::error_code ReadChoices(od::value v, CompletionEvent& out) {
  od::array choices;
  bool absent = false;
  SIMDJSON_TRY(Container(v.get_array(), choices, absent));
  if (absent) return simdjson::SUCCESS;
  for (auto element : choices) {
    od::value e;
    SIMDJSON_TRY(element.get(e));
    od::object choice;
    SIMDJSON_TRY(Container(e.get_object(), choice, absent));
    if (absent) continue;
    for (auto field : choice) {
      std::string_view key;
      SIMDJSON_TRY(field.unescaped_key().get(key));
      if (key == "text") {
        ReadString(field.value(), out.text);
      } else if (key == "message" || key == "delta") {
        SIMDJSON_TRY(ReadContent(field.value(), out.text));
      } else if (key == "finish_reason") {
        ReadString(field.value(), out.finish_reason);
      }
    }
  }
  return simdjson::SUCCESS;
}

simdjson::error_code ReadUsage(od::value v, Usage& usage) {
  od::object o;
  bool absent = false;
  SIMDJSON_TRY(Container(v.get_object(), o, absent));
  if (absent) return simdjson::SUCCESS;
  for (auto field : o) {
    std::string_view key;
    SIMDJSON_TRY(field.unescaped_key().get(key));
    if (key == "prompt_tokens") {
      ReadInteger(field.value(), usage.prompt_tokens);
    } else if (key == "completion_tokens") {
      ReadInteger(field.value(), usage.completion_tokens);
    } else if (key == "prompt_tokens_details") {
      od::object details;
      SIMDJSON_TRY(Container(field.value().get_object(), details, absent));
      if (absent) continue;
      for (auto d : details) {
        SIMDJSON_TRY(d.unescaped_key().get(key));
        if (key == "cached_tokens") ReadInteger(d.value(), usage.cached_tokens);
      }
    }
  }
  return simdjson::SUCCESS;
}

simdjson::error_code ReadExtension(od::value v, Usage& usage) {
  od::object o;
  bool absent = false;
  SIMDJSON_TRY(Container(v.get_object(), o, absent));
  if (absent) return simdjson::SUCCESS;
  for (auto field : o) {
    std::string_view key;
    SIMDJSON_TRY(field.unescaped_key().get(key));
    if (key == "kv_source") ReadString(field.value(), usage.kv_source);
    else if (key == "instance") ReadString(field.value(), usage.instance);
  }
  return simdjson::SUCCESS;
}

simdjson::error_code ReadEvent(od::document& doc, CompletionEvent& out) {
  od::object top;
  SIMDJSON_TRY(doc.get_object().get(top));
  for (auto field : top) {
    std::string_view key;
    SIMDJSON_TRY(field.unescaped_key().get(key));
    if (key == "choices") {
      SIMDJSON_TRY(ReadChoices(field.value(), out));
    } else if (key == "usage") {
      out.has_usage = true;
      SIMDJSON_TRY(ReadUsage(field.value(), out.usage));
    } else if (key == "talaria") {
      SIMDJSON_TRY(ReadExtension(field.value(), out.usage));
    } else if (key == "error") {
      out.error = true;
    }
  }
  // Past the object, the document must be over (a location in bounds
  // means more tokens follow it).
  const char* more = nullptr;
  return doc.current_location().get(more) == simdjson::SUCCESS ? simdjson::TRAILING_CONTENT : simdjson::SUCCESS;
}

}  // namespace

bool ReadCompletionEvent(std::string_view data, CompletionEvent& out) {
  out = CompletionEvent{};
  // The parser reads SIMDJSON_PADDING bytes past the end: a per-thread copy
  // with room for them (events are a few hundred bytes), and a per-thread
  // parser whose buffers are reused call after call.
  thread_local od::parser parser;
  thread_local std::string padded;
  padded.reserve(data.size() + simdjson::SIMDJSON_PADDING);
  padded.assign(data);
  od::document doc;
  if (parser.iterate(padded.data(), padded.size(), padded.capacity()).get(doc) != simdjson::SUCCESS) return false;
  return ReadEvent(doc, out) == simdjson::SUCCESS;
}

}  // namespace talaria
