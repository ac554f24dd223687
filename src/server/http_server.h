// The HTTP front of a gateway or an instance server (Boost.Beast, C++20
// coroutines): the OpenAI-compatible client API and the operator endpoints.
//
//   GET  /health                       {"status":"ok"} (never needs a key)
//   GET  /metrics                      Prometheus text format
//   GET  /v1/models                    the models served
//   GET  /v1/telemetry                 the router's view (gateway) or the
//                                      instance's versioned snapshot
//   POST /v1/chat/completions          chat; "stream": true for server-sent events
//   POST /v1/completions               prompt as text or token ids
//   POST /admin/models/{model}/open    instance servers: residency control
//   POST /admin/models/{model}/close
//
// Errors are OpenAI-style bodies {"error":{"message","type","param","code"}}
// with 400 (bad body, named field), 401 (missing or wrong API key when keys
// are configured), 404 (unknown model or path), 409 (admin: model busy),
// 429 (no capacity, with Retry-After), 503 (instance unreachable). The final
// chunk (or the response) carries a Talaria extension object "talaria" with
// the KV source and the serving instance. Connections are kept alive. Binds
// where the config says (loopback by default). One I/O thread; the work
// runs on instance threads.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "server/io_loop.h"
#include "server/service.h"

namespace talaria {

class HttpServer {
 public:
  // Runs on `loop` when given (shared, for instance, with the gateway's
  // instance links); otherwise on a loop of its own.
  HttpServer(CompletionService& service, std::string host, std::uint16_t port, std::shared_ptr<IoLoop> loop = nullptr);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Binds, starts the I/O thread and returns the bound port (useful with 0).
  // Throws InputError when the address cannot be bound.
  std::uint16_t Start();
  // Stops the loop (a shared one too: stop servers when the process stops).
  void Stop();
  // Blocks until SIGINT or SIGTERM (for the serving commands).
  void WaitForSignal();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace talaria
