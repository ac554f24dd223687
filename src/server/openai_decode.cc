#include "server/openai_decode.h"

#include <algorithm>
#include <initializer_list>
#include <nlohmann/json.hpp>
#include <vector>

namespace talaria {
namespace {

// Reads what the gateway needs from one completion event or answer (the
// text, finish reason, usage and the Talaria extension) as the parser goes,
// without building a JSON tree: this runs for every event of every call.
class EventReader final : public nlohmann::json_sax<nlohmann::json> {
 public:
  explicit EventReader(CompletionEvent& out) : out_(out) {}
  bool object = false;  // the top level is an object

  bool null() override { return true; }
  bool boolean(bool) override { return true; }
  bool number_integer(number_integer_t v) override { return Integer(v); }
  bool number_unsigned(number_unsigned_t v) override { return Integer(static_cast<std::int64_t>(v)); }
  bool number_float(number_float_t, const string_t&) override { return true; }
  bool binary(binary_t&) override { return true; }
  bool string(string_t& v) override {
    if (At({"choices", "[]", "text"}) || At({"choices", "[]", "message", "content"}) ||
        At({"choices", "[]", "delta", "content"})) {
      out_.text = std::move(v);
    } else if (At({"choices", "[]", "finish_reason"})) {
      out_.finish_reason = std::move(v);
    } else if (At({"talaria", "kv_source"})) {
      out_.usage.kv_source = std::move(v);
    } else if (At({"talaria", "instance"})) {
      out_.usage.instance = std::move(v);
    }
    return true;
  }
  bool start_object(std::size_t) override {
    if (path_.empty()) object = true;
    path_.emplace_back();
    return true;
  }
  bool key(string_t& k) override {
    path_.back() = std::move(k);
    if (path_.size() == 1 && path_[0] == "error") out_.error = true;
    if (path_.size() == 1 && path_[0] == "usage") out_.has_usage = true;
    return true;
  }
  bool end_object() override {
    path_.pop_back();
    return true;
  }
  bool start_array(std::size_t) override {
    path_.emplace_back("[]");
    return true;
  }
  bool end_array() override {
    path_.pop_back();
    return true;
  }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception&) override { return false; }

 private:
  bool At(std::initializer_list<std::string_view> want) const {
    return path_.size() == want.size() && std::equal(want.begin(), want.end(), path_.begin());
  }
  bool Integer(std::int64_t v) {
    if (At({"usage", "prompt_tokens"})) out_.usage.prompt_tokens = v;
    else if (At({"usage", "completion_tokens"})) out_.usage.completion_tokens = v;
    else if (At({"usage", "prompt_tokens_details", "cached_tokens"})) out_.usage.cached_tokens = v;
    return true;
  }
  CompletionEvent& out_;
  std::vector<std::string> path_;  // object keys and "[]" for arrays, outermost first
};

}  // namespace

bool ReadCompletionEvent(std::string_view data, CompletionEvent& out) {
  out = CompletionEvent{};
  EventReader reader(out);
  return nlohmann::json::sax_parse(data, &reader) && reader.object;
}

}  // namespace talaria
