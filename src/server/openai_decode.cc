#include "server/openai_decode.h"

#include <cstdint>
#include <string>

#include <simdjson.h>

namespace talaria {
namespace {

namespace od = simdjson::ondemand;

// Reads what the gateway needs from one completion event or answer (the
// text, finish reason, usage and the Talaria extension) with simdjson's
// on-demand parser: it walks the object once, decoding only the fields it
// names and skipping the rest, without building a tree or a string per
// token. This runs for every event of every call.

// A string field's value; anything else (null, a number) reads as absent.
void ReadString(od::value v, std::string& out) {
  std::string_view s;
  if (v.get_string().get(s) == simdjson::SUCCESS) out.assign(s);
}
void ReadInteger(od::value v, std::int64_t& out) {
  std::int64_t n = 0;
  if (v.get_int64().get(n) == simdjson::SUCCESS) out = n;
}

// Calls on_field(key, value) for each field of `v` when it is an object; a
// value of another kind (null, a number) has nothing to read. A malformed
// document is an error either way.
template <typename OnField>
simdjson::error_code ForEachField(od::value v, OnField&& on_field) {
  od::object o;
  const simdjson::error_code kind = v.get_object().get(o);
  if (kind == simdjson::INCORRECT_TYPE) return simdjson::SUCCESS;
  SIMDJSON_TRY(kind);
  for (auto field : o) {
    std::string_view key;
    SIMDJSON_TRY(field.unescaped_key().get(key));
    SIMDJSON_TRY(on_field(key, field.value()));
  }
  return simdjson::SUCCESS;
}

// "choices": each choice's text, message or delta content, and finish
// reason (the last choice's win; servers send one).
simdjson::error_code ReadChoices(od::value v, CompletionEvent& out) {
  od::array choices;
  const simdjson::error_code kind = v.get_array().get(choices);
  if (kind == simdjson::INCORRECT_TYPE) return simdjson::SUCCESS;
  SIMDJSON_TRY(kind);
  for (auto element : choices) {
    od::value choice;
    SIMDJSON_TRY(element.get(choice));
    SIMDJSON_TRY(ForEachField(choice, [&](std::string_view key, od::value value) {
      if (key == "text") ReadString(value, out.text);
      else if (key == "finish_reason") ReadString(value, out.finish_reason);
      else if (key == "message" || key == "delta") {
        return ForEachField(value, [&](std::string_view k, od::value content) {
          if (k == "content") ReadString(content, out.text);
          return simdjson::SUCCESS;
        });
      }
      return simdjson::SUCCESS;
    }));
  }
  return simdjson::SUCCESS;
}

simdjson::error_code ReadUsage(od::value v, Usage& usage) {
  return ForEachField(v, [&](std::string_view key, od::value value) {
    if (key == "prompt_tokens") ReadInteger(value, usage.prompt_tokens);
    else if (key == "completion_tokens") ReadInteger(value, usage.completion_tokens);
    else if (key == "prompt_tokens_details") {
      return ForEachField(value, [&](std::string_view k, od::value cached) {
        if (k == "cached_tokens") ReadInteger(cached, usage.cached_tokens);
        return simdjson::SUCCESS;
      });
    }
    return simdjson::SUCCESS;
  });
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
    } else if (key == "talaria") {  // the extension: where the KV came from, which instance
      SIMDJSON_TRY(ForEachField(field.value(), [&](std::string_view k, od::value value) {
        if (k == "kv_source") ReadString(value, out.usage.kv_source);
        else if (k == "instance") ReadString(value, out.usage.instance);
        return simdjson::SUCCESS;
      }));
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
  try {  // a result converted to its value throws on an error
    return ReadEvent(doc, out) == simdjson::SUCCESS;
  } catch (const simdjson::simdjson_error&) {
    return false;
  }
}

}  // namespace talaria
