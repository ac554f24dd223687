#include "server/link_frames.h"

#include <bit>
#include <cmath>
#include <cstring>

namespace talaria::link {
namespace {

static_assert(std::endian::native == std::endian::little, "the link's integers are written as they lie in memory");

constexpr std::size_t kHead = 4 + 1 + 8;  // length, type, call id

template <typename T>
void Put(std::string& out, T v) {
  char bytes[sizeof v];
  std::memcpy(bytes, &v, sizeof v);
  out.append(bytes, sizeof v);
}

void PutString(std::string& out, std::string_view s) {
  const auto n = static_cast<std::uint16_t>(std::min<std::size_t>(s.size(), 0xffff));
  Put(out, n);
  out.append(s.data(), n);
}

// Reads fields off a payload front to back; any read past its end fails.
class Cursor {
 public:
  explicit Cursor(std::string_view bytes) : rest_(bytes) {}
  template <typename T>
  bool Get(T& v) {
    if (rest_.size() < sizeof v) return false;
    std::memcpy(&v, rest_.data(), sizeof v);
    rest_.remove_prefix(sizeof v);
    return true;
  }
  bool GetString(std::string_view& s) {
    std::uint16_t n = 0;
    if (!Get(n) || rest_.size() < n) return false;
    s = rest_.substr(0, n);
    rest_.remove_prefix(n);
    return true;
  }
  std::string_view rest() const { return rest_; }

 private:
  std::string_view rest_;
};

}  // namespace

char* FrameReader::Prepare(std::size_t n) {
  if (begin_ > 0 && (begin_ == size_ || buffer_.size() - size_ < n)) {  // slide what is left to the front
    std::memmove(buffer_.data(), buffer_.data() + begin_, size_ - begin_);
    size_ -= begin_;
    begin_ = 0;
  }
  if (buffer_.size() - size_ < n) buffer_.resize(size_ + n);
  return buffer_.data() + size_;
}

std::optional<Frame> FrameReader::Next() {
  if (Failed() || size_ - begin_ < kHead) return std::nullopt;
  const char* p = buffer_.data() + begin_;
  std::uint32_t length = 0;
  std::memcpy(&length, p, 4);
  if (length < kHead - 4 || 4 + std::size_t{length} > max_frame_bytes_) {
    error_ = "a frame of " + std::to_string(4 + std::size_t{length}) + " bytes (at least " + std::to_string(kHead) +
             ", at most " + std::to_string(max_frame_bytes_) + ")";
    return std::nullopt;
  }
  if (size_ - begin_ < 4 + std::size_t{length}) return std::nullopt;
  Frame f;
  const auto type = static_cast<std::uint8_t>(p[4]);
  if (type < 1 || type > static_cast<std::uint8_t>(FrameType::kPing)) {
    error_ = "a frame of unknown type " + std::to_string(type);
    return std::nullopt;
  }
  f.type = static_cast<FrameType>(type);
  std::memcpy(&f.id, p + 5, 8);
  f.payload = std::string_view(p + kHead, length - (kHead - 4));
  begin_ += 4 + std::size_t{length};
  return f;
}

void AppendFrame(std::string& out, FrameType type, std::uint64_t id, std::string_view payload) {
  Put(out, static_cast<std::uint32_t>(kHead - 4 + payload.size()));
  out.push_back(static_cast<char>(type));
  Put(out, id);
  out.append(payload);
}

void AppendCall(std::string& out, std::uint64_t id, const CallFields& call) {
  const std::size_t start = out.size();
  AppendFrame(out, FrameType::kCall, id);
  Put(out, static_cast<std::uint8_t>(call.session_end ? 1 : 0));
  Put(out, call.expected_tool_s);
  PutString(out, call.api_key);
  out.append(call.body);
  const auto length = static_cast<std::uint32_t>(out.size() - start - 4);
  std::memcpy(out.data() + start, &length, 4);
}

bool ReadCall(std::string_view payload, CallFields& out, std::string& error) {
  Cursor c(payload);
  std::uint8_t flags = 0;
  if (!c.Get(flags) || !c.Get(out.expected_tool_s) || !c.GetString(out.api_key)) {
    error = "a call frame cut short";
    return false;
  }
  if (flags > 1) {
    error = "a call frame with unknown flags " + std::to_string(flags);
    return false;
  }
  out.session_end = flags == 1;
  const double t = out.expected_tool_s;
  if (t != -1 && !(std::isfinite(t) && t >= 0 && t <= kMaxExpectedToolS)) {
    error = "a call frame's expected tool time is not in [0, 3600] seconds (or -1)";
    return false;
  }
  out.body = c.rest();
  return true;
}

void AppendDone(std::string& out, std::uint64_t id, const Usage& usage, std::string_view finish_reason) {
  const std::size_t start = out.size();
  AppendFrame(out, FrameType::kDone, id);
  Put(out, usage.prompt_tokens);
  Put(out, usage.completion_tokens);
  Put(out, usage.cached_tokens);
  PutString(out, usage.kv_source);
  PutString(out, usage.instance);
  PutString(out, finish_reason);
  const auto length = static_cast<std::uint32_t>(out.size() - start - 4);
  std::memcpy(out.data() + start, &length, 4);
}

bool ReadDone(std::string_view payload, Usage& usage, std::string& finish_reason) {
  Cursor c(payload);
  std::string_view kv_source, instance, finish;
  if (!c.Get(usage.prompt_tokens) || !c.Get(usage.completion_tokens) || !c.Get(usage.cached_tokens) ||
      !c.GetString(kv_source) || !c.GetString(instance) || !c.GetString(finish) || !c.rest().empty()) {
    return false;
  }
  usage.kv_source.assign(kv_source);
  usage.instance.assign(instance);
  finish_reason.assign(finish);
  return true;
}

}  // namespace talaria::link
