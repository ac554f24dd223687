// Boost 1.74's asio/awaitable.hpp uses std::exchange without including
// <utility>; include it first (fixed in later Boost releases).
#include <utility>

#include "server/http_call_answer.h"

#include <array>
#include <charconv>
#include <chrono>
#include <optional>

#include "server/http_wire.h"
#include "server/io_loop.h"
#include "server/openai_encode.h"

namespace talaria::http_front {
namespace {

namespace beast = boost::beast;
namespace http = beast::http;
using tcp = net::ip::tcp;

std::chrono::steady_clock::time_point PeriodFromNow(double keepalive_s) {
  return keepalive_s > 0 ? std::chrono::steady_clock::now() + WallSeconds(keepalive_s)
                         : std::chrono::steady_clock::time_point::max();
}

}  // namespace

io::Task<void> CallAnswer::Write(Stream& stream, Response res, const std::string& label) {
  metrics_.requests.Add(label + "," + std::to_string(res.result_int()));
  if (draining_) res.keep_alive(false);
  stream.expires_after(WallSeconds(limits_.write_timeout_s));
  boost::system::error_code ec;
  co_await http_wire::Write(stream, res, ec);
  if (ec) throw boost::system::system_error(ec);
  stream.expires_never();
}

io::Task<void> CallAnswer::WriteChunk(Stream& stream, std::string_view bytes) {
  stream.expires_after(WallSeconds(limits_.write_timeout_s));
  char size[24];  // the chunk's size in hex and its CRLF
  char* end = std::to_chars(size, size + sizeof size - 2, bytes.size(), 16).ptr;
  *end++ = '\r';
  *end++ = '\n';
  const std::array<net::const_buffer, 3> chunk{net::buffer(size, static_cast<std::size_t>(end - size)),
                                                net::buffer(bytes.data(), bytes.size()), net::buffer("\r\n", 2)};
  co_await net::async_write(stream, chunk, io::use_task);
  stream.expires_never();
}

io::Task<void> CallAnswer::WriteChunkedHead(Stream& stream, const Request& req, const std::string& label,
                                            const char* content_type) {
  http::response<http::empty_body> res{http::status::ok, req.version()};
  res.set(http::field::content_type, content_type);
  res.set(http::field::cache_control, "no-cache");
  res.set(http::field::server, "talaria");
  res.keep_alive(req.keep_alive() && !draining_);
  res.chunked(true);
  metrics_.requests.Add(label + ",200");
  stream.expires_after(WallSeconds(limits_.write_timeout_s));
  boost::system::error_code ec;
  co_await http_wire::WriteHead(stream, res.base(), ec);
  if (ec) throw boost::system::system_error(ec);
  stream.expires_never();
}

io::Task<void> CallAnswer::WriteLastChunk(Stream& stream) {
  stream.expires_after(WallSeconds(limits_.write_timeout_s));
  co_await net::async_write(stream, net::buffer("0\r\n\r\n", 5), io::use_task);
  stream.expires_never();
}

std::shared_ptr<bool> CallAnswer::WatchForHangup(Stream& stream, std::int64_t handle,
                                                 const std::shared_ptr<CallChannel>& channel) {
  auto watching = std::make_shared<bool>(true);
  io::Socket* socket = &stream.socket();
  socket->async_wait(io::Socket::wait_read, [this, socket, handle, watching, channel](boost::system::error_code ec) {
    if (ec || !*watching) return;
    char c;
    const std::size_t n = socket->receive(net::buffer(&c, 1), io::Socket::message_peek, ec);
    if (n > 0 && !ec) return;  // a pipelined request: the client is there
    service_.Cancel(handle);
    Event left;
    left.kind = Event::Kind::kError;
    left.error = MakeError(499, "invalid_request_error", "client_closed", "the client closed the connection");
    channel->Push(std::move(left));
    channel->timer.cancel();
  });
  return watching;
}

void CallAnswer::StopWatching(Stream& stream, std::shared_ptr<bool>& watching) {
  if (!watching || !*watching) return;
  *watching = false;
  boost::system::error_code ec;
  stream.socket().cancel(ec);  // the pending wait ends (aborted)
}

io::Task<void> CallAnswer::Answer(Stream& stream, const Request& req, bool stream_answer, const std::string& label,
                                  std::int64_t handle, CallChannel& channel, std::shared_ptr<bool>& watching,
                                  const AnswerHead& head) {
  if (stream_answer) {
    co_await AnswerStream(stream, req, label, handle, channel, watching, head);
  } else {
    co_await AnswerWhole(stream, req, label, handle, channel, watching, head);
  }
}

// The next event of a streamed call; with a keep-alive period, a comment
// line goes out each time one passes without an event (the stream's head
// is out), so the client can tell a slow call from a hung server.
io::Task<Event> CallAnswer::NextStreamEvent(Stream& stream, CallChannel& channel, double keepalive_s) {
  for (;;) {
    std::optional<Event> e = co_await NextEvent(channel, PeriodFromNow(keepalive_s));
    if (e.has_value()) co_return std::move(*e);
    co_await WriteChunk(stream, kKeepaliveComment);
  }
}

// A call answered whole, with one JSON body. A keep-alive period (a
// gateway's link asks for one) that passes without the answer sends the
// head (200, chunked JSON) and a space, and each one after another space:
// whitespace before a JSON value is part of it, so the body stays one JSON
// answer, and the link can tell a slow call from a hung instance. An error
// after the head is out is the 200's body (its `error` object, with
// `error.status`). An answer within the first period goes out as usual.
io::Task<void> CallAnswer::AnswerWhole(Stream& stream, const Request& req, const std::string& label,
                                       std::int64_t handle, CallChannel& channel, std::shared_ptr<bool>& watching,
                                       const AnswerHead& head) {
  const double keepalive_s = KeepaliveSeconds(req);
  auto deadline = PeriodFromNow(keepalive_s);
  std::string text;
  bool head_out = false;  // once out: the answer is chunked
  try {
    for (;;) {
      std::optional<Event> next = co_await NextEvent(channel, deadline);
      if (!next.has_value()) {  // a period passed in silence
        if (!head_out) {
          StopWatching(stream, watching);  // from here a write notices a client that left
          co_await WriteChunkedHead(stream, req, label, "application/json");
          head_out = true;
        }
        co_await WriteChunk(stream, " ");
        deadline = PeriodFromNow(keepalive_s);
        continue;
      }
      if (next->kind == Event::Kind::kDelta) {
        text += next->text;
        continue;
      }
      if (!head_out) {
        StopWatching(stream, watching);
        if (next->kind == Event::Kind::kError) co_return co_await Write(stream, ErrorResponse(req, next->error), label);
        co_return co_await Write(stream, CompletionResponse(req, head, text, *next), label);
      }
      const std::string body = next->kind == Event::Kind::kError
                                   ? ErrorBodyWithStatus(next->error)
                                   : CompletionBody(head, text, next->finish_reason, next->usage);
      co_await WriteChunk(stream, body);
      co_return co_await WriteLastChunk(stream);
    }
  } catch (const boost::system::system_error&) {
    service_.Cancel(handle);  // the client left while its answer was under way: free its slot and KV
    throw;
  }
}

// Streaming: the first event decides between an error response and SSE,
// unless the client asked for keep-alives: then the head goes out at once
// and an error before the first token is an error event. From the head on,
// a write notices a client that left.
io::Task<void> CallAnswer::AnswerStream(Stream& stream, const Request& req, const std::string& label,
                                        std::int64_t handle, CallChannel& channel, std::shared_ptr<bool>& watching,
                                        const AnswerHead& head) {
  const double keepalive_s = KeepaliveSeconds(req);
  std::optional<Event> first;
  if (keepalive_s <= 0) {
    first = co_await NextEvent(channel);
    StopWatching(stream, watching);
    if (first->kind == Event::Kind::kError) co_return co_await Write(stream, ErrorResponse(req, first->error), label);
  } else {
    StopWatching(stream, watching);
  }
  try {
    co_await WriteChunkedHead(stream, req, label, "text/event-stream");
    // (No co_await inside ?: here: GCC 12 miscompiles it.)
    if (!first.has_value()) first = co_await NextStreamEvent(stream, channel, keepalive_s);
    Event e = std::move(*first);
    bool first_delta = true;
    for (;;) {
      co_await WriteChunk(stream, StreamEvent(head, e, first_delta));
      if (e.kind != Event::Kind::kDelta) break;  // done, or an error reported in-stream
      first_delta = false;
      e = co_await NextStreamEvent(stream, channel, keepalive_s);
    }
  } catch (const boost::system::system_error&) {
    service_.Cancel(handle);  // the client left mid-stream: free its slot and KV
    throw;
  }
  co_await WriteChunk(stream, kStreamDone);
  co_await WriteLastChunk(stream);
}

}  // namespace talaria::http_front
