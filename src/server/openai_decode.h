// The OpenAI wire format, reading side: a server-sent event stream split
// into each event's data, and what the gateway and the HTTP replay need
// from one completion answer or stream event (its text, finish reason,
// usage, the Talaria extension, whether it is an error), read as the JSON
// parser goes without building a tree: this runs for every event of every
// call. Pure: no I/O.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "server/openai_api.h"

namespace talaria {

// Splits a server-sent event stream into the data of each event.
class SseDecoder {
 public:
  template <typename F>
  void Feed(const char* data, std::size_t n, F&& on_data) {
    pending_.append(data, n);
    std::size_t start = 0;
    for (std::size_t end; (end = pending_.find("\n\n", start)) != std::string::npos; start = end + 2) {
      const std::string_view event(pending_.data() + start, end - start);
      if (event.rfind("data: ", 0) == 0) on_data(event.substr(6));
    }
    pending_.erase(0, start);
  }

 private:
  std::string pending_;
};

// One completion answer or stream event, as read.
struct CompletionEvent {
  bool error = false;      // it has a top-level "error"
  bool has_usage = false;  // it carries "usage" (the final chunk, or a whole answer)
  std::string text;        // choices[0]'s text, message content or delta content
  std::string finish_reason;
  Usage usage;
};

// Reads `data` (one event's JSON); false when it is not a JSON object.
bool ReadCompletionEvent(std::string_view data, CompletionEvent& out);

}  // namespace talaria
