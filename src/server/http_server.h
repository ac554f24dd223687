// The HTTP front of the gateway (Boost.Beast, C++20 coroutines): the
// OpenAI-compatible client API.
//
//   GET  /health                 {"status":"ok"}
//   GET  /v1/models              the models any instance serves
//   POST /v1/chat/completions    chat; "stream": true for server-sent events
//   POST /v1/completions         prompt as text or token ids
//
// Errors are OpenAI-style bodies {"error":{"message","type","param","code"}}
// with 400 (bad body, named field), 401 (missing or wrong API key when keys
// are configured), 404 (unknown model or path), 429 (no capacity, with
// Retry-After). Connections are kept alive. Binds where the config says
// (loopback by default). One I/O thread; the work runs on instance threads.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "server/gateway.h"

namespace talaria {

class HttpServer {
 public:
  HttpServer(Gateway& gateway, std::string host, std::uint16_t port);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Binds, starts the I/O thread and returns the bound port (useful with 0).
  // Throws InputError when the address cannot be bound.
  std::uint16_t Start();
  void Stop();
  // Blocks until SIGINT or SIGTERM (for `talaria serve`).
  void WaitForSignal();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace talaria
