// The wire format of the instance link (`GET /v1/link` upgraded to
// talaria-link/1): one TCP connection between a gateway and an instance
// server carries many calls at once, each frame naming its call. Under
// load a gateway's or an instance's frames of many calls go out in one
// write and come in with one read, where one HTTP request per call took a
// write, a read and a readiness wait on each side (docs/serving.md,
// "The instance link").
//
// A frame: u32 length of what follows, u8 type, u64 call id (the gateway's),
// then the payload; integers little-endian.
//
//   gateway -> instance
//     kCall    u8 flags (1: session end), f64 expected tool seconds (-1:
//              none), u16 API key length, key, then the /v1/completions
//              JSON body (token ids, "stream"), parsed and validated
//              exactly as that endpoint's
//     kCancel  no payload: drop the call (its client went away)
//   instance -> gateway
//     kDelta   output text
//     kDone    i64 prompt, completion and cached tokens, then u16-length
//              strings: KV source, instance, finish reason. Ends the call.
//     kError   the OpenAI error body with its "status" (ErrorBodyWithStatus).
//              Ends the call.
//     kError with call id 0: the instance is draining (the body says so);
//              the gateway sends nothing new on this link and closes it
//              once its calls have ended
//   either way
//     kPing    call id 0, no payload: the sender is alive (each side sends
//              one in every keep-alive period it wrote nothing else)
//
// Every field is checked when read: a frame that is too long, of an
// unknown type, or whose payload does not parse is a protocol error, and
// the reader closes the link.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "server/openai_api.h"

namespace talaria::link {

inline constexpr std::string_view kProtocol = "talaria-link/1";
inline constexpr std::string_view kPath = "/v1/link";

// How much either end asks for in one read.
inline constexpr std::size_t kReadBytes = 64 * 1024;

enum class FrameType : std::uint8_t { kCall = 1, kCancel = 2, kDelta = 3, kDone = 4, kError = 5, kPing = 6 };

struct Frame {
  FrameType type = FrameType::kPing;
  std::uint64_t id = 0;
  std::string_view payload;  // into the reader's buffer, valid until its next Feed
};

// Frames as the bytes arrive. Feed appends; Next yields complete frames
// in order; `error` says what was wrong once Next returns nullopt with
// Failed() true.
class FrameReader {
 public:
  explicit FrameReader(std::size_t max_frame_bytes) : max_frame_bytes_(max_frame_bytes) {}
  // Room for at least `n` more bytes; Commit says how many were written.
  char* Prepare(std::size_t n);
  void Commit(std::size_t n) { size_ += n; }
  // The next complete frame, or nullopt when none is (or the stream failed).
  std::optional<Frame> Next();
  bool Failed() const { return !error_.empty(); }
  const std::string& error() const { return error_; }
  // Whether a frame has begun and not yet arrived whole.
  bool Partial() const { return size_ > begin_; }

 private:
  std::size_t max_frame_bytes_;
  std::string buffer_;
  std::size_t begin_ = 0;  // the next frame's first byte
  std::size_t size_ = 0;   // bytes held
  std::string error_;
};

// Appends one frame.
void AppendFrame(std::string& out, FrameType type, std::uint64_t id, std::string_view payload = {});

// A kCall's payload.
struct CallFields {
  bool session_end = false;
  double expected_tool_s = -1;
  std::string_view api_key;
  std::string_view body;  // the /v1/completions JSON body
};
void AppendCall(std::string& out, std::uint64_t id, const CallFields& call);
// False (with `error`) when the payload is malformed or a hint is out of
// range (ParseExpectedToolSeconds' bounds).
bool ReadCall(std::string_view payload, CallFields& out, std::string& error);

void AppendDone(std::string& out, std::uint64_t id, const Usage& usage, std::string_view finish_reason);
bool ReadDone(std::string_view payload, Usage& usage, std::string& finish_reason);

}  // namespace talaria::link
