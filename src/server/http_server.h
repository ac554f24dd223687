// The HTTP front of a gateway or an instance server (Boost.Beast, C++20
// coroutines): the OpenAI-compatible client API and the operator endpoints.
//
//   GET  /health                       {"status":"ok"} (never needs a key)
//   GET  /metrics                      Prometheus text format
//   GET  /v1/models                    the models served
//   GET  /v1/telemetry                 the router's view (gateway) or the
//                                      instance's versioned snapshot; a
//                                      tenant key sees its own sessions only
//   POST /v1/chat/completions          chat; "stream": true for server-sent events
//   POST /v1/completions               prompt as text or token ids
//   POST /admin/models/{model}/open    instance servers: residency control
//   POST /admin/models/{model}/close
//
// Errors are OpenAI-style bodies {"error":{"message","type","param","code"}}
// with 400 (bad body, named field), 401 (missing or wrong API key when keys
// are configured), 403 (/admin without the operator key), 404 (unknown model or path), 409 (admin: model busy),
// 429 (no capacity, with Retry-After), 503 (instance unreachable). The final
// chunk (or the response) carries a Talaria extension object "talaria" with
// the KV source and the serving instance. Connections are kept alive. Binds
// where the config says (loopback by default). One I/O thread; the work
// runs on instance threads.
//
// Limits (HttpLimits, [serve] keys): a header block over max_header_bytes
// gets 431, a body over max_body_bytes 413, malformed framing (bad
// Content-Length, both Content-Length and Transfer-Encoding, a bad chunk) 400,
// each with an error body, and the connection closes; a connection idle
// past idle_timeout_s, a request whose header (body) is not in within
// header_timeout_s (request_timeout_s) of its first byte, and a write that
// cannot go out within write_timeout_s close the connection; past
// max_connections a new connection gets 503. A failed accept (out of
// descriptors) is retried with backoff, never the end of serving. A
// request may ask for keep-alives (kKeepaliveHeader): a stream then gets
// comment lines, a whole answer leading spaces before its JSON, in every
// period without output.
//
// Shutdown, in order: Drain (stop accepting, let calls finish, cut the
// rest with an error), then stop the service (its threads stop reporting),
// then Stop or destroy the server.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "config/serve_options.h"
#include "server/io_loop.h"
#include "server/service.h"

namespace talaria {

// Whether `host` is a loopback IP address (false for other or invalid ones).
bool IsLoopbackAddress(const std::string& host);

class HttpServer {
 public:
  // Runs on `loop` when given (shared, for instance, with the gateway's
  // instance links); otherwise on a loop of its own.
  HttpServer(CompletionService& service, std::string host, std::uint16_t port, std::shared_ptr<IoLoop> loop = nullptr,
             HttpLimits limits = {});
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Binds, starts the I/O thread and returns the bound port (useful with 0).
  // Throws InputError when the address cannot be bound.
  std::uint16_t Start();
  struct DrainReport {
    std::size_t in_flight = 0;  // calls in flight when the drain began
    std::size_t cut = 0;        // of those, ended by the drain time
    bool quiet = false;         // every connection closed in the end
  };
  // A graceful shutdown: closes the listener and every connection waiting
  // for a request; a request read meanwhile gets 503 shutting_down and
  // answers close their connections. Calls in flight get `drain_s` wall
  // seconds to finish; then each is cancelled (counted failed) and ends
  // with 503 shutting_down: an error answer, or on a stream an error event
  // and [DONE]. Blocks until every connection closed (or write_timeout_s
  // past the cut); call from a thread other than the server's loop.
  DrainReport Drain(double drain_s);
  // Stops the loop (a shared one too: stop servers when the process stops);
  // calls' later reports go nowhere.
  void Stop();
  // Blocks until SIGINT or SIGTERM (for the serving commands).
  void WaitForSignal();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace talaria
