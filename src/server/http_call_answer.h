// One call's answer on its client's connection (server/http_server.cc's
// completion endpoints, after the call was submitted): answered whole or
// streamed as server-sent events, with keep-alives while it has nothing to
// say when the client asked for them (kKeepaliveHeader), and a client that
// leaves before the answer is out getting its call cancelled (its slot and
// KV freed, counted failed).
#pragma once

#include <utility>  // before Boost 1.74's asio (see http_server.cc)

#include <boost/asio.hpp>
#include <boost/beast.hpp>
#include <cstdint>
#include <memory>
#include <string>

#include "config/serve_options.h"
#include "server/http_call_channel.h"
#include "server/metrics.h"
#include "server/service.h"

namespace talaria::http_front {

class CallAnswer {
 public:
  using Stream = io::Stream;

  // `draining` is the server's flag (read on its I/O thread, as every
  // method here runs): a draining server closes the connection after it.
  CallAnswer(CompletionService& service, ServerMetrics& metrics, const HttpLimits& limits, const bool& draining)
      : service_(service), metrics_(metrics), limits_(limits), draining_(draining) {}

  // Every write has write_timeout_s to go out: a client that stopped
  // reading loses its connection instead of holding it. `label` is the
  // endpoint's label in the requests metric.
  io::Task<void> Write(Stream& stream, Response res, const std::string& label);
  io::Task<void> WriteChunk(Stream& stream, std::string_view bytes);

  // While a client waits for its call's first event (or, not streaming, its
  // whole answer), nothing is written to it, so a client that left is seen
  // only by watching its socket: at end of stream (or a reset) the call
  // `handle` is cancelled (counted failed, its slot and KV freed) and the
  // waiting coroutine woken. Bytes that arrive instead (a pipelined
  // request) end the watch. The returned flag stops it: StopWatching
  // before the socket can go.
  std::shared_ptr<bool> WatchForHangup(Stream& stream, std::int64_t handle, const std::shared_ptr<CallChannel>& channel);
  static void StopWatching(Stream& stream, std::shared_ptr<bool>& watching);

  // The call's answer, whole or streamed as `req` asked; `watching` is its
  // hangup watch (null when the call was refused at once).
  io::Task<void> Answer(Stream& stream, const Request& req, bool stream_answer, const std::string& label,
                        std::int64_t handle, CallChannel& channel, std::shared_ptr<bool>& watching,
                        const AnswerHead& head);

 private:
  io::Task<void> AnswerWhole(Stream& stream, const Request& req, const std::string& label, std::int64_t handle,
                             CallChannel& channel, std::shared_ptr<bool>& watching, const AnswerHead& head);
  io::Task<void> AnswerStream(Stream& stream, const Request& req, const std::string& label, std::int64_t handle,
                              CallChannel& channel, std::shared_ptr<bool>& watching, const AnswerHead& head);
  io::Task<Event> NextStreamEvent(Stream& stream, CallChannel& channel, double keepalive_s);
  // A 200 head whose body follows in chunks (counted in the requests metric).
  io::Task<void> WriteChunkedHead(Stream& stream, const Request& req, const std::string& label,
                                  const char* content_type);
  io::Task<void> WriteLastChunk(Stream& stream);

  CompletionService& service_;
  ServerMetrics& metrics_;
  const HttpLimits& limits_;
  const bool& draining_;
};

}  // namespace talaria::http_front
