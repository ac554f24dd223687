// The gateway's link to an instance server (`talaria gateway` in front of
// `talaria instance` processes). Calls go over the instance link, many on
// one connection (server/link_client.h, the default; an instance that
// does not offer it gets its calls over HTTP, and the link is tried again
// a minute after), or over HTTP: kept-
// alive connections are reused, and a call is POSTed to the instance's /v1/completions as token ids,
// streaming as its client asked: a stream's server-sent events are relayed
// to the sink, a whole answer's text goes to it at once; the usage (cached
// tokens, KV source) ends the call. Telemetry polls GET /v1/telemetry with
// a timeout.
//
// Calls ask for keep-alives (kKeepaliveHeader, every keepalive_s): comment
// lines in a stream, leading spaces before a whole answer (http_server.h),
// so silence means a hung instance, not a long queue.
//
// Failures:
//   - the instance cannot be reached, the request could not be written
//     whole, the instance is draining (503 shutting_down), or no byte came
//     for silence_s (hung): 503 instance_unreachable (UnreachableError),
//     which the gateway retries elsewhere when nothing was streamed yet;
//   - the connection broke after the request went out (the instance died
//     with it, perhaps of it): 502 instance_failed, never retried.
// A kept-alive connection is reused only while it is younger than
// max_idle_s and shows no close from the instance; a write that fails on a
// reused one is retried once on a fresh one. Cancel closes the call's
// connection; the instance server notices at its next write and frees the
// call's slot and KV.
//
// Thread safety: every method may be called from any thread; sinks run on
// the link's I/O thread.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "config/serve_options.h"
#include "server/instance_link.h"
#include "server/io_loop.h"

namespace talaria {

struct RemoteLinkOptions {
  // How calls reach the instance: all on one upgraded connection (the
  // instance link, server/link_client.h), or one HTTP exchange each.
  UpstreamProtocol protocol = UpstreamProtocol::kLink;
  double connect_timeout_s = 1.0;  // wall seconds to establish a connection
  double poll_timeout_s = 1.0;     // wall seconds for a telemetry answer
  std::size_t max_idle_connections = 64;
  // A kept-alive connection idle longer is closed instead of reused (below
  // the instance servers' idle_timeout_s, so the gateway closes first).
  double max_idle_s = 30;
  // Wall seconds between the keep-alive comments a call asks its instance
  // for, and without any byte before the call counts the instance hung.
  // keepalive_s 0: neither.
  double keepalive_s = 1.0;
  double silence_s = 5.0;
  std::string poll_key;  // bearer key of the telemetry polls (ServeOptions' OperatorKey)
};

class RemoteInstanceLink final : public InstanceLink {
 public:
  // `address` is HOST:PORT (an IP address). Throws InputError when it is not.
  // Runs on `loop` when given (shared with the gateway's HTTP front, so a
  // call never changes threads), else on a loop of its own.
  RemoteInstanceLink(std::string name, const std::string& address, RemoteLinkOptions options = {},
                     std::shared_ptr<IoLoop> loop = nullptr);
  ~RemoteInstanceLink() override;

  void Start() override;
  // Stops the loop (a shared one too) and drops idle connections.
  void Stop() override;
  const std::string& name() const override { return name_; }
  void Submit(std::shared_ptr<const LinkCall> call, std::shared_ptr<CompletionSink> sink) override;
  bool Cancel(std::int64_t id) override;
  void PollTelemetry(std::function<void(std::optional<InstanceTelemetry>)> done) override;
  nlohmann::json Timeline(std::uint64_t after) override;

 private:
  struct Impl;
  std::string name_;
  std::unique_ptr<Impl> impl_;
};

}  // namespace talaria
