// Boost 1.74's asio/awaitable.hpp uses std::exchange without including
// <utility>; include it first (fixed in later Boost releases).
#include <utility>

#include "server/remote_instance.h"

#include <boost/asio.hpp>
#include <boost/beast.hpp>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <array>
#include <chrono>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <thread>
#include <unordered_map>
#include <vector>

#include "core/error.h"
#include "server/asio_io.h"
#include "server/link_client.h"
#include "server/openai_decode.h"
#include "server/openai_encode.h"
#include "server/telemetry_json.h"
#include "server/timeline_json.h"

namespace talaria {
namespace {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = net::ip::tcp;
using nlohmann::json;
using Stream = io::Stream;
using HeaderParser = http::response_parser<http::empty_body>;

// How long after an instance refused the instance link its calls go over
// HTTP before the link is tried again.
constexpr auto kLinkRetry = std::chrono::seconds(60);

// A generous bound on a telemetry body (a snapshot lists cached sessions).
constexpr std::uint64_t kMaxTelemetryBytes = 256ull << 20;

struct RemoteCall {
  std::shared_ptr<const LinkCall> call;
  std::shared_ptr<CompletionSink> sink;
  Stream* stream = nullptr;   // the connection in use; I/O thread only
  LinkClient::Ticket ticket;  // where the instance link placed it; I/O thread only
  bool cancelled = false;     // guarded by Impl::mu
  bool ended = false;         // guarded by Impl::mu
};

// A request to the instance, kept alive: its head's bytes (with `extra` and `more`,
// whole header lines, after the usual fields) and its body, a JSON document
// or none. The head is rendered straight into one string (a Beast request
// would allocate each field on its own, on every call); the body, a long
// prompt's token ids, is written from where it lies, never copied.
struct OutgoingRequest {
  std::string head;
  std::string body;
};
OutgoingRequest MakeRequest(std::string_view method, std::string_view target, const std::string& host,
                            const std::string& key, std::string body, std::string_view extra = {},
                            std::string_view more = {}) {
  OutgoingRequest req{{}, std::move(body)};
  std::string& out = req.head;
  out.reserve(160 + target.size() + host.size() + key.size() + extra.size() + more.size());
  out.append(method).append(" ").append(target).append(" HTTP/1.1\r\nHost: ").append(host);
  out.append("\r\nUser-Agent: talaria-gateway\r\n");
  if (!key.empty()) out.append("Authorization: Bearer ").append(key).append("\r\n");
  out.append(extra).append(more);
  if (!req.body.empty()) {
    out.append("Content-Type: application/json\r\nContent-Length: ").append(std::to_string(req.body.size()));
    out.append("\r\n");
  }
  out.append("\r\n");
  return req;
}

// What the events of one call's stream said.
struct StreamState {
  bool got_usage = false;
  Usage usage;
  std::string finish_reason = "length";
  std::optional<ApiError> error;
};

// A kept-alive connection the instance has closed (or that has bytes
// nobody asked for) reads as ready: it is not reused. One non-blocking peek
// (MSG_DONTWAIT): toggling the socket's non-blocking mode around a peek
// cost three ioctls a call (asio re-enables it at the next operation).
bool ShowsClose(Stream& conn) {
  char c;
  const ssize_t n = ::recv(conn.socket().native_handle(), &c, 1, MSG_PEEK | MSG_DONTWAIT);
  return !(n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK));
}

}  // namespace

struct RemoteInstanceLink::Impl final : LinkCallEvents {
  const std::string& name;
  std::string host_header;
  tcp::endpoint endpoint;
  RemoteLinkOptions options;
  std::shared_ptr<IoLoop> loop;
  net::io_context& io;
  struct Idle {
    std::unique_ptr<Stream> conn;
    std::chrono::steady_clock::time_point since;
  };
  std::vector<Idle> idle;  // kept-alive connections, oldest first; I/O thread only

  std::mutex mu;
  std::unordered_map<std::int64_t, std::shared_ptr<RemoteCall>> live;  // guarded by mu
  TimelineCache timeline;  // the instance's recent slots, while a dashboard watches

  // Every call's keep-alive header line, rendered once (formatting a
  // double per call was ~2% of the gateway's instructions).
  std::string keepalive_line;

  // The instance link's client, unless calls go over HTTP (made once the
  // address is known).
  std::unique_ptr<LinkClient> link;
  bool link_refused = false;  // the instance does not offer it (RefuseLink); I/O thread only
  std::chrono::steady_clock::time_point link_refused_at;

  Impl(const std::string& n, RemoteLinkOptions o, std::shared_ptr<IoLoop> l)
      : name(n), options(o), loop(l ? std::move(l) : std::make_shared<IoLoop>()), io(loop->context()) {
    if (options.keepalive_s > 0) {
      keepalive_line.append(kKeepaliveHeader).append(": ").append(std::to_string(options.keepalive_s)).append("\r\n");
    }
  }

  void OpenLink() {
    if (options.protocol != UpstreamProtocol::kLink) return;
    LinkClientOptions o;
    o.connect_timeout_s = options.connect_timeout_s;
    // Without keep-alives the link still pings, rarely, so that an
    // instance does not close it as idle; silence then bounds nothing.
    o.ping_s = options.keepalive_s > 0 ? options.keepalive_s : 30;
    o.silence_s = options.keepalive_s > 0 ? options.silence_s : 0;
    o.key = options.poll_key;
    link = std::make_unique<LinkClient>(io.get_executor(), endpoint, host_header, o, *this);
  }

  std::shared_ptr<RemoteCall> Find(std::int64_t id) {
    std::lock_guard<std::mutex> lock(mu);
    auto it = live.find(id);
    return it == live.end() ? nullptr : it->second;
  }

  // LinkCallEvents: what the instance link hears of a call.
  void Delta(std::int64_t id, std::string_view text) override {
    if (auto rc = Find(id); rc && !Cancelled(*rc)) rc->sink->OnDelta(std::string(text));
  }
  void Done(std::int64_t id, const Usage& usage, const std::string& finish_reason) override {
    if (auto rc = Find(id)) End(*rc, [&] { rc->sink->OnDone(usage, finish_reason); });
  }
  void Answered(std::int64_t id, const ApiError& error) override {
    if (auto rc = Find(id)) End(*rc, [&] { rc->sink->OnError(Answered(error)); });
  }
  void Failed(std::int64_t id, const LinkFailure& f) override {
    auto rc = Find(id);
    if (rc == nullptr) return;
    if (f.unsupported) {  // never sent: over HTTP instead
      RefuseLink(f.why);
      if (!Cancelled(*rc)) SubmitHttp(rc);
      return;
    }
    End(*rc, [&] { rc->sink->OnError(ErrorOf(f)); });
  }

  // The instance does not offer the link: its calls go over HTTP, and the
  // link is tried again kLinkRetry after the last refusal (an instance
  // upgraded in place gets it back). I/O thread only.
  void RefuseLink(const std::string& why) {
    if (!link_refused) {
      std::fprintf(stderr, "talaria gateway: instance '%s' does not offer the instance link (%s); calls go over HTTP\n",
                   name.c_str(), why.c_str());
    }
    link_refused = true;
    link_refused_at = std::chrono::steady_clock::now();
  }
  bool UseLink() {
    if (link == nullptr) return false;
    if (link_refused && std::chrono::steady_clock::now() - link_refused_at >= kLinkRetry) link_refused = false;
    return !link_refused;
  }

  // One HTTP exchange for the call (RunCall); a call that throws fails as
  // unreachable.
  void SubmitHttp(const std::shared_ptr<RemoteCall>& rc) {
    net::co_spawn(io, RunCall(rc), [this, rc](std::exception_ptr e) {
      if (e == nullptr) return;
      std::string why = "internal error";
      try {
        std::rethrow_exception(e);
      } catch (const std::exception& ex) {
        why = ex.what();
      }
      End(*rc, [&] { rc->sink->OnError(UnreachableError(name, why)); });
    });
  }

  bool Cancelled(RemoteCall& rc) {
    std::lock_guard<std::mutex> lock(mu);
    return rc.cancelled;
  }

  // Ends a call unless it was cancelled; `report` tells the sink.
  template <typename F>
  void End(RemoteCall& rc, F&& report) {
    {
      std::lock_guard<std::mutex> lock(mu);
      if (rc.cancelled || rc.ended) return;
      rc.ended = true;
      live.erase(rc.call->id);
    }
    report();
  }

  void Pool(std::unique_ptr<Stream> conn) {
    if (idle.size() < options.max_idle_connections) idle.push_back({std::move(conn), std::chrono::steady_clock::now()});
  }

  // The newest idle connection that is young enough and still open; null
  // when none is.
  std::unique_ptr<Stream> TakeIdle() {
    const auto oldest = std::chrono::steady_clock::now() - WallSeconds(options.max_idle_s);
    while (!idle.empty()) {
      Idle last = std::move(idle.back());
      idle.pop_back();
      if (last.since < oldest) {
        idle.clear();  // every older one is past it too
        return nullptr;
      }
      if (!ShowsClose(*last.conn)) return std::move(last.conn);
    }
    return nullptr;
  }

  // The error for a failed exchange (see the header's Failures).
  ApiError ErrorOf(const LinkFailure& f) const {
    if (f.delivered && !f.timed_out) return InstanceFailedError(name, f.why);
    return UnreachableError(name, f.why);
  }

  // An error the instance answered: a draining instance did not take the
  // call, so it may go elsewhere.
  ApiError Answered(ApiError e) const {
    if (e.code == "shutting_down") return UnreachableError(name, "it is shutting down: " + e.message);
    return e;
  }

  // Bounds the next read of a call by the silence allowed (none: wait).
  void ExpectBytes(Stream& conn) const {
    if (options.silence_s > 0 && options.keepalive_s > 0) {
      conn.expires_after(WallSeconds(options.silence_s));
    } else {
      conn.expires_never();  // a call may queue behind a long round
    }
  }

  // Sends `req` and reads the response header, on a kept-alive connection
  // when a live one is idle (a write that fails on it is retried once on a
  // fresh one: the instance never had the request). Null (with `failure`)
  // when the exchange failed. `header_timeout_s` bounds the wait for the
  // header (0: ExpectBytes decides).
  io::Task<std::unique_ptr<Stream>> Exchange(const OutgoingRequest& req, beast::flat_buffer& buffer,
                                             std::unique_ptr<HeaderParser>& parser, double header_timeout_s,
                                             RemoteCall* rc, LinkFailure& failure) {
    for (int attempt = 0; attempt < 2; ++attempt) {
      std::unique_ptr<Stream> conn = TakeIdle();
      const bool reused = conn != nullptr;
      boost::system::error_code ec;
      if (!reused) {
        conn = std::make_unique<Stream>(io);
        conn->expires_after(WallSeconds(options.connect_timeout_s));
        co_await conn->async_connect(endpoint, net::redirect_error(io::use_task, ec));
        if (ec) {
          failure.why = "connect to " + host_header + ": " + ec.message();
          co_return nullptr;
        }
        conn->socket().set_option(tcp::no_delay(true), ec);  // small writes go out at once
      }
      if (rc != nullptr) {
        if (Cancelled(*rc)) co_return nullptr;
        rc->stream = conn.get();
      }
      conn->expires_after(std::chrono::seconds(30));
      const std::array<net::const_buffer, 2> bytes{net::buffer(req.head), net::buffer(req.body)};
      co_await net::async_write(*conn, bytes, net::redirect_error(io::use_task, ec));
      if (ec) {
        if (rc != nullptr) rc->stream = nullptr;
        failure.why = std::string(reused ? "kept-alive" : "new") + " connection to " + host_header +
                      ": sending the request: " + ec.message();
        if (reused) continue;
        co_return nullptr;
      }
      buffer.clear();
      parser = std::make_unique<HeaderParser>();
      if (header_timeout_s > 0) {
        conn->expires_after(WallSeconds(header_timeout_s));
      } else {
        ExpectBytes(*conn);
      }
      co_await http::async_read_header(*conn, buffer, *parser, net::redirect_error(io::use_task, ec));
      if (!ec) co_return conn;
      if (rc != nullptr) rc->stream = nullptr;
      failure.delivered = true;
      failure.timed_out = ec == beast::error::timeout;
      failure.why = failure.timed_out ? "no answer for " + std::to_string(options.silence_s) + " s (hung?)"
                                      : "the connection broke before the answer: " + ec.message();
      co_return nullptr;
    }
    co_return nullptr;
  }

  void HandleEvent(std::string_view data, RemoteCall& rc, StreamState& st) {
    if (data == "[DONE]") return;
    CompletionEvent event;
    if (!ReadCompletionEvent(data, event)) {
      st.error = UnreachableError(name, "it sent an event that is not a JSON object");
      return;
    }
    if (event.error) {
      st.error = ApiError::FromResponse(502, data);
      return;
    }
    if (!event.text.empty() && !Cancelled(rc)) rc.sink->OnDelta(event.text);
    if (!event.finish_reason.empty()) st.finish_reason = std::move(event.finish_reason);
    if (event.has_usage) {
      st.usage = std::move(event.usage);
      st.got_usage = true;
    }
  }

  io::Task<void> RunCall(std::shared_ptr<RemoteCall> rc) {
    // With keep-alives silence means a hung instance: a stream gets comment
    // lines, a whole answer leading spaces, in every period without output.
    const bool upstream_stream = rc->call->stream;
    // The agent's hints reach the instance's scheduler too (its slot holds).
    std::string hints;
    if (rc->call->expected_tool_s >= 0) {
      hints.append("X-Expected-Tool-Seconds: ").append(std::to_string(rc->call->expected_tool_s)).append("\r\n");
    }
    if (rc->call->session_end) hints.append("X-Session-End: true\r\n");
    const OutgoingRequest req = MakeRequest("POST", "/v1/completions", host_header, rc->call->api_key,
                                            TokenCompletionBody(rc->call->model, rc->call->prompt, rc->call->max_tokens,
                                                                upstream_stream, rc->call->session_id),
                                            keepalive_line, hints);
    beast::flat_buffer buffer;
    std::unique_ptr<HeaderParser> header;
    LinkFailure failure;
    std::unique_ptr<Stream> conn = co_await Exchange(req, buffer, header, 0, rc.get(), failure);
    if (conn == nullptr) {
      End(*rc, [&] { rc->sink->OnError(ErrorOf(failure)); });
      co_return;
    }
    boost::system::error_code ec;
    const int status = static_cast<int>(header->get().result_int());
    if (status != 200) {  // an error answered before any output
      http::response_parser<http::string_body> body{std::move(*header)};
      co_await http::async_read(*conn, buffer, body, net::redirect_error(io::use_task, ec));
      rc->stream = nullptr;
      const ApiError e = ec ? UnreachableError(name, "reading its error answer: " + ec.message())
                            : Answered(ApiError::FromResponse(status, body.get().body()));
      if (!ec && body.keep_alive()) Pool(std::move(conn));
      End(*rc, [&] { rc->sink->OnError(e); });
      co_return;
    }
    if (!upstream_stream) {  // one JSON answer: the text and the usage
      http::response_parser<http::string_body> body{std::move(*header)};
      body.body_limit(boost::none);
      while (!body.is_done()) {  // each read bounded by the silence allowed
        ExpectBytes(*conn);
        co_await http::async_read_some(*conn, buffer, body, net::redirect_error(io::use_task, ec));
        if (ec) break;
      }
      rc->stream = nullptr;
      StreamState st;
      if (!ec) HandleEvent(body.get().body(), *rc, st);
      if (ec) {
        LinkFailure f{"", true, ec == beast::error::timeout};
        f.why = f.timed_out ? "no byte for " + std::to_string(options.silence_s) + " s mid-answer (hung?)"
                            : "the connection broke mid-call: " + ec.message();
        End(*rc, [&] { rc->sink->OnError(ErrorOf(f)); });
      } else if (st.error || !st.got_usage) {
        End(*rc, [&] {
          rc->sink->OnError(st.error ? Answered(*st.error) : UnreachableError(name, "its answer had no usage"));
        });
      } else {
        if (body.keep_alive()) Pool(std::move(conn));
        End(*rc, [&] { rc->sink->OnDone(st.usage, st.finish_reason); });
      }
      co_return;
    }
    http::response_parser<http::buffer_body> stream{std::move(*header)};
    stream.body_limit(boost::none);
    StreamState st;
    SseDecoder sse;
    constexpr std::size_t kChunk = 16384;
    const auto chunk = std::make_unique_for_overwrite<char[]>(kChunk);  // read into: no need to zero it
    while (!stream.is_done() && !st.error) {
      stream.get().body().data = chunk.get();
      stream.get().body().size = kChunk;
      // read_some: relay what arrived (an event is a few hundred bytes), not
      // what fills the buffer, or tokens reach the client in 16 KB bursts.
      ExpectBytes(*conn);
      co_await http::async_read_some(*conn, buffer, stream, net::redirect_error(io::use_task, ec));
      if (ec == http::error::need_buffer) ec = {};
      if (ec) break;
      sse.Feed(chunk.get(), kChunk - stream.get().body().size,
               [&](std::string_view data) { HandleEvent(data, *rc, st); });
    }
    rc->stream = nullptr;
    if (ec) {
      LinkFailure f{"", true, ec == beast::error::timeout};
      f.why = f.timed_out ? "no byte for " + std::to_string(options.silence_s) + " s mid-call (hung?)"
                          : "the connection broke mid-call: " + ec.message();
      End(*rc, [&] { rc->sink->OnError(ErrorOf(f)); });
    } else if (st.error) {
      End(*rc, [&] { rc->sink->OnError(Answered(*st.error)); });
    } else if (!st.got_usage) {
      End(*rc, [&] { rc->sink->OnError(UnreachableError(name, "its stream ended without a final chunk")); });
    } else {
      if (stream.keep_alive()) Pool(std::move(conn));
      End(*rc, [&] { rc->sink->OnDone(st.usage, st.finish_reason); });
    }
  }

  // A poll's GET: the body of a 200 answer within the poll timeout (the
  // connection kept for reuse), or nullopt.
  io::Task<std::optional<std::string>> PollGet(const std::string& target) {
    const OutgoingRequest req = MakeRequest("GET", target, host_header, options.poll_key, "");
    beast::flat_buffer buffer;
    std::unique_ptr<HeaderParser> header;
    LinkFailure failure;
    std::unique_ptr<Stream> conn = co_await Exchange(req, buffer, header, options.poll_timeout_s, nullptr, failure);
    if (conn == nullptr || header->get().result_int() != 200) co_return std::nullopt;
    http::response_parser<http::string_body> body{std::move(*header)};
    body.body_limit(kMaxTelemetryBytes);
    boost::system::error_code ec;
    conn->expires_after(WallSeconds(options.poll_timeout_s));
    co_await http::async_read(*conn, buffer, body, net::redirect_error(io::use_task, ec));
    if (ec) co_return std::nullopt;
    if (body.keep_alive()) Pool(std::move(conn));
    co_return std::move(body.get().body());
  }

  io::Task<void> RunPoll(std::function<void(std::optional<InstanceTelemetry>)> done) {
    std::optional<InstanceTelemetry> result;
    if (auto text = co_await PollGet("/v1/telemetry")) result = ParseTelemetry(*text);
    const bool answered = result.has_value();
    done(std::move(result));
    // While a dashboard watches: the timeline's new segments too.
    std::uint64_t after = 0;
    if (answered && timeline.Wanted(std::chrono::steady_clock::now(), after)) co_await PollTimeline(after);
  }

  io::Task<void> PollTimeline(std::uint64_t after) {
    const auto text = co_await PollGet("/v1/timeline?after=" + std::to_string(after));
    if (!text) co_return;
    const json j = json::parse(*text, nullptr, /*allow_exceptions=*/false);
    const json* entry = nullptr;
    if (j.is_object() && j.contains("instances") && j["instances"].is_array() && j["instances"].size() == 1) {
      entry = &j["instances"][0];
    }
    if (entry == nullptr || !timeline.Merge(*entry, std::chrono::steady_clock::now())) {
      std::fprintf(stderr, "talaria gateway: bad timeline from '%s'\n", name.c_str());
    }
  }

  std::optional<InstanceTelemetry> ParseTelemetry(const std::string& text) {
    const json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
    std::string error;
    auto t = TelemetryFromJson(j, error);
    if (!t) std::fprintf(stderr, "talaria gateway: bad telemetry from '%s': %s\n", name.c_str(), error.c_str());
    return t;
  }
};

RemoteInstanceLink::RemoteInstanceLink(std::string name, const std::string& address, RemoteLinkOptions options,
                                       std::shared_ptr<IoLoop> loop)
    : name_(std::move(name)), impl_(std::make_unique<Impl>(name_, options, std::move(loop))) {
  const auto colon = address.rfind(':');
  boost::system::error_code ec;
  net::ip::address ip;
  int port = -1;
  if (colon != std::string::npos) {
    ip = net::ip::make_address(address.substr(0, colon), ec);
    try {
      std::size_t used = 0;
      port = std::stoi(address.substr(colon + 1), &used);
      if (used != address.size() - colon - 1) port = -1;
    } catch (const std::exception&) {
      port = -1;
    }
  }
  if (colon == std::string::npos || ec || port < 1 || port > 65535) {
    throw InputError("instance '" + name_ + "' address", "'" + address + "' is not IP:PORT (for example 127.0.0.1:8101)");
  }
  impl_->endpoint = tcp::endpoint(ip, static_cast<std::uint16_t>(port));
  impl_->host_header = address;
  impl_->OpenLink();
}

RemoteInstanceLink::~RemoteInstanceLink() { Stop(); }

void RemoteInstanceLink::Start() { impl_->loop->Start(); }

void RemoteInstanceLink::Stop() {
  impl_->loop->Stop();
  impl_->idle.clear();  // the loop's thread is gone: safe to touch here
}

void RemoteInstanceLink::Submit(std::shared_ptr<const LinkCall> call, std::shared_ptr<CompletionSink> sink) {
  auto rc = std::make_shared<RemoteCall>();
  rc->call = std::move(call);
  rc->sink = std::move(sink);
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    impl_->live[rc->call->id] = rc;
  }
  if (impl_->link == nullptr) return impl_->SubmitHttp(rc);
  net::dispatch(impl_->io, [impl = impl_.get(), rc] {
    if (impl->Cancelled(*rc)) return;  // (cancelled before it was placed)
    if (!impl->UseLink()) return impl->SubmitHttp(rc);
    rc->ticket = impl->link->Submit(*rc->call);
  });
}

bool RemoteInstanceLink::Cancel(std::int64_t id) {
  std::shared_ptr<RemoteCall> rc;
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    auto it = impl_->live.find(id);
    if (it == impl_->live.end()) return false;
    rc = it->second;
    rc->cancelled = true;
    impl_->live.erase(it);
  }
  // Closing the connection tells the instance server, which frees the call.
  net::post(impl_->io, [impl = impl_.get(), rc] {
    if (rc->stream != nullptr) {  // over HTTP
      boost::system::error_code ec;
      rc->stream->socket().close(ec);
    } else if (impl->link != nullptr) {
      impl->link->Cancel(rc->ticket);
    }
  });
  return true;
}

void RemoteInstanceLink::PollTelemetry(std::function<void(std::optional<InstanceTelemetry>)> done) {
  auto shared_done = std::make_shared<std::function<void(std::optional<InstanceTelemetry>)>>(std::move(done));
  net::co_spawn(impl_->io, impl_->RunPoll(*shared_done), [shared_done](std::exception_ptr e) {
    if (e != nullptr) (*shared_done)(std::nullopt);
  });
}

nlohmann::json RemoteInstanceLink::Timeline(std::uint64_t after) {
  const auto now = std::chrono::steady_clock::now();
  impl_->timeline.Want(now);
  return impl_->timeline.View(name_, after, now);
}

}  // namespace talaria
