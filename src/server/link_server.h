// The instance server's end of the instance link (server/link_frames.h).
// A gateway upgrades a connection with `GET /v1/link` (Upgrade:
// talaria-link/1, and kKeepaliveHeader: how often each side pings); from
// then on the connection carries calls as frames until either side closes it.
//
// A call frame is what a POST /v1/completions would have been: its key is
// checked (401), its body parsed and validated by the same parser (400),
// and it runs on the service with the key scoping its session. Its output
// goes back as frames; a call that does not stream gets its text in one
// frame at the end. Frames of many calls that are ready together go out in
// one write.
//
// Limits: a frame longer than the request limits allow (max_body_bytes plus
// the header block) or malformed closes the link; at most max_connections
// calls run on one link (above: 503 too_many_calls); nothing from the
// gateway (not even its ping) for idle_timeout_s and three ping periods,
// or a write that cannot go out for write_timeout_s, closes it. A link that closes cancels the calls
// it still carries (their slots and KV are freed, counted failed), as a
// client that hangs up does. While draining, a new call gets 503
// shutting_down (the gateway sends it elsewhere), and a link closes once
// its calls are done; a cut call ends with 503 shutting_down.
//
// Everything here runs on the server's I/O thread except the calls' sinks,
// which may report from any thread.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_set>

#include "config/serve_options.h"
#include "server/asio_io.h"
#include "server/http_call_channel.h"
#include "server/metrics.h"
#include "server/service.h"

namespace talaria {

class LinkServer {
 public:
  LinkServer(CompletionService& service, ServerMetrics& metrics, const HttpLimits& limits,
             std::shared_ptr<http_front::PostGate> gate);
  ~LinkServer();

  // Serves one upgraded connection until it closes. `received` holds bytes
  // read past the upgrade request; `ping_s` is the period both sides ping at.
  io::Task<void> Serve(io::Stream& stream, std::string received, double ping_s);

  // A drain began: returns the calls in flight on every link; links with
  // none close, the others once theirs are done.
  std::size_t BeginDrain();
  // The drain time is up: cancels every link call still in flight and ends
  // it with 503 shutting_down (`why`); returns how many were cut.
  std::size_t CutCalls(const std::string& why);

 private:
  struct Session;
  class CallSink;
  io::Task<void> WriteFrames(std::shared_ptr<Session> s, io::Stream& stream);
  void HandleCall(const std::shared_ptr<Session>& s, std::uint64_t id, std::string_view payload);

  CompletionService& service_;
  ServerMetrics& metrics_;
  const HttpLimits& limits_;
  std::shared_ptr<http_front::PostGate> gate_;
  bool draining_ = false;
  std::unordered_set<Session*> sessions_;
};

}  // namespace talaria
