// Boost 1.74's asio/awaitable.hpp uses std::exchange without including
// <utility>; include it first (fixed in later Boost releases).
#include <utility>

#include "server/http_server.h"

#include <algorithm>
#include <atomic>
#include <boost/asio.hpp>
#include <boost/beast.hpp>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <future>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <unordered_map>
#include <variant>

#include "core/error.h"
#include "server/http_call_answer.h"
#include "server/http_call_channel.h"
#include "server/http_responses.h"
#include "server/http_wire.h"
#include "server/link_frames.h"
#include "server/link_server.h"
#include "server/timeline_json.h"

namespace talaria {
namespace {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = net::ip::tcp;
using nlohmann::json;

using namespace http_front;  // NOLINT: this file serves those answers

std::int64_t UnixNow() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace

struct HttpServer::Impl {
  CompletionService& service;
  std::string host;
  std::uint16_t port;
  std::shared_ptr<IoLoop> loop;
  net::io_context& io;
  io::Acceptor acceptor{io};
  std::shared_ptr<PostGate> gate;
  std::int64_t next_id = 0;
  bool started = false;
  std::atomic<bool> stopped{false};

  ServerMetrics& metrics;  // the service's, looked up once
  HttpLimits limits;

  // What a drain waits for and ends (the I/O thread's alone).
  struct Open {
    io::Stream* stream = nullptr;
    bool idle = true;  // waiting for the first byte of a request
  };
  struct Active {
    std::int64_t handle = -1;  // the service's id
    std::weak_ptr<CallChannel> channel;
  };
  std::unordered_map<std::uint64_t, Open> open;      // connections, by serial
  std::unordered_map<std::uint64_t, Active> active;  // calls in flight, by serial
  std::uint64_t next_serial = 0;
  bool draining = false;
  std::string drain_note;  // why a cut call ended
  CallAnswer calls{service, metrics, limits, draining};  // the completion endpoints' answers
  LinkServer links{service, metrics, limits, gate};      // gateways' upgraded connections

  std::mutex quiet_mu;
  std::condition_variable quiet_cv;
  bool quiet = false;  // draining and no connection left; guarded by quiet_mu

  Impl(CompletionService& s, std::string h, std::uint16_t p, std::shared_ptr<IoLoop> l, HttpLimits lim)
      : service(s), host(std::move(h)), port(p), loop(l ? std::move(l) : std::make_shared<IoLoop>()), io(loop->context()),
        gate(std::make_shared<PostGate>(io.get_executor())), metrics(s.metrics()), limits(lim) {}

  io::Task<void> Accept() {
    std::chrono::milliseconds backoff{0};
    io::Timer pause(io);
    for (;;) {
      boost::system::error_code ec;
      io::Socket socket = co_await acceptor.async_accept(net::redirect_error(io::use_task, ec));
      if (ec == net::error::operation_aborted || !acceptor.is_open()) co_return;
      if (ec) {
        // Out of descriptors (EMFILE, ENFILE), buffers or memory, for now:
        // try again after a pause that doubles up to a second.
        backoff = std::clamp(backoff * 2, std::chrono::milliseconds(10), std::chrono::milliseconds(1000));
        metrics.requests.Add("accept,error");
        pause.expires_after(backoff);
        co_await pause.async_wait(net::redirect_error(io::use_task, ec));
        continue;
      }
      backoff = std::chrono::milliseconds(0);
      // Streams are many small writes: without this, Nagle's algorithm and
      // the peer's delayed ACK hold each chunk back by tens of milliseconds.
      socket.set_option(tcp::no_delay(true), ec);
      net::co_spawn(io, Connection(std::move(socket)), net::detached);
    }
  }

  // --- Shutdown (server/http_server.h: Drain) -----------------------------

  // Stops accepting and closes the connections that wait for a request;
  // returns the calls in flight.
  std::size_t BeginDrain() {
    draining = true;
    boost::system::error_code ec;
    acceptor.close(ec);
    for (auto& [serial, o] : open) {
      if (o.idle) o.stream->cancel();  // its read ends; the connection closes
    }
    const std::size_t on_links = links.BeginDrain();
    CheckQuiet();
    return active.size() + on_links;
  }

  // The drain time is up: every call still in flight is cancelled (counted
  // failed) and its client told, by an error event and [DONE] on a stream,
  // or a 503 answer. Returns how many were cut.
  std::size_t CutCalls() {
    std::size_t cut = 0;
    for (auto& [serial, a] : active) {
      const std::shared_ptr<CallChannel> channel = a.channel.lock();
      if (channel == nullptr || !service.Cancel(a.handle)) continue;  // finishing anyway
      channel->Push(Event{Event::Kind::kError, {}, {}, {}, ShuttingDown(drain_note)});
      channel->timer.cancel();
      ++cut;
    }
    return cut + links.CutCalls(drain_note);
  }

  void CheckQuiet() {
    if (!draining || !open.empty()) return;
    {
      std::lock_guard<std::mutex> lock(quiet_mu);
      quiet = true;
    }
    quiet_cv.notify_all();
  }

  bool WaitQuiet(std::chrono::steady_clock::time_point until) {
    std::unique_lock<std::mutex> lock(quiet_mu);
    return quiet_cv.wait_until(lock, until, [&] { return quiet; });
  }

  // Runs `f` on the I/O thread and returns its result (the loop runs).
  template <typename F>
  auto OnLoop(F f) {
    std::packaged_task<decltype(f())()> task(std::move(f));
    auto result = task.get_future();
    net::post(io, [&task] { task(); });
    return result.get();
  }

  // --- Connections ----------------------------------------------------------

  // An answer to a request that could not be read whole: the connection
  // closes after it.
  io::Task<void> Refuse(io::Stream& stream, int status, const char* code, const std::string& message) {
    Request req;
    req.version(11);
    req.keep_alive(false);
    ApiError e = MakeError(status, "invalid_request_error", code, message);
    Response res = ErrorResponse(req, e);
    res.keep_alive(false);
    stream.expires_after(std::chrono::seconds(5));
    boost::system::error_code ec;
    metrics.requests.Add("other," + std::to_string(status));
    co_await http::async_write(stream, res, net::redirect_error(io::use_task, ec));
  }

  io::Task<void> Connection(io::Socket socket) {
    io::Stream stream(std::move(socket));
    beast::flat_buffer buffer;
    const std::uint64_t serial = next_serial++;
    Open& self = open[serial];  // references into the map survive rehashing
    self.stream = &stream;
    ++metrics.connections;
    try {
      if (open.size() > static_cast<std::size_t>(limits.max_connections)) {
        co_await Refuse(stream, 503, "too_many_connections",
                        "the server holds " + std::to_string(limits.max_connections) + " connections; retry later");
      } else {
        for (;;) {
          boost::system::error_code ec;
          if (buffer.size() == 0) {
            // Between requests: the next one's first byte has idle_timeout_s.
            if (draining) break;
            self.idle = true;
            stream.expires_after(WallSeconds(limits.idle_timeout_s));
            const std::size_t n =
                co_await stream.async_read_some(buffer.prepare(1024), net::redirect_error(io::use_task, ec));
            self.idle = false;
            if (ec) break;  // the client closed, stayed idle too long, or a drain closed it
            buffer.commit(n);
          }
          // From its first byte, a request has header_timeout_s for its
          // header block and request_timeout_s to arrive whole.
          const auto first_byte = std::chrono::steady_clock::now();
          http::request_parser<http::string_body> parser;
          parser.header_limit(static_cast<std::uint32_t>(limits.max_header_bytes));
          parser.body_limit(static_cast<std::uint64_t>(limits.max_body_bytes));
          stream.expires_at(first_byte + WallSeconds(std::min(limits.header_timeout_s, limits.request_timeout_s)));
          co_await http::async_read_header(stream, buffer, parser, net::redirect_error(io::use_task, ec));
          if (!ec && !parser.is_done()) {
            stream.expires_at(first_byte + WallSeconds(limits.request_timeout_s));
            co_await http::async_read(stream, buffer, parser, net::redirect_error(io::use_task, ec));
          }
          if (ec) {
            co_await RefuseUnread(stream, ec);
            break;
          }
          stream.expires_never();
          Request req = parser.release();
          if (req.method() == http::verb::get &&
              std::string_view(req.target().data(), req.target().size()) == link::kPath) {
            co_await UpgradeToLink(stream, req, buffer);
            break;  // the link has ended: so does the connection
          }
          const bool keep_alive = req.keep_alive();
          co_await Handle(stream, req);
          if (!keep_alive || draining) break;
        }
      }
    } catch (const boost::system::system_error&) {
      // Client closed or timed out mid-answer: nothing more to say.
    }
    open.erase(serial);
    --metrics.connections;
    boost::system::error_code ec;
    stream.socket().shutdown(io::Socket::shutdown_send, ec);
    CheckQuiet();
  }

  // Why a request could not be read, answered where the client is still
  // there to hear it (a closed or idle connection gets nothing).
  // (A timeout has closed the socket already: beast's stream closes it.)
  io::Task<void> RefuseUnread(io::Stream& stream, const boost::system::error_code& ec) {
    if (ec == http::error::header_limit) {
      co_return co_await Refuse(stream, 431, "header_too_large",
                                "the request's header block exceeds " + std::to_string(limits.max_header_bytes) +
                                    " bytes");
    }
    if (ec == http::error::body_limit) {
      co_return co_await Refuse(stream, 413, "body_too_large",
                                "the request body exceeds " + std::to_string(limits.max_body_bytes) + " bytes");
    }
    if (ec == http::error::end_of_stream || ec == http::error::partial_message) co_return;  // the client left
    if (ec.category() == boost::system::error_code(http::error::bad_version).category()) {
      co_return co_await Refuse(stream, 400, "malformed_request", "malformed HTTP request: " + ec.message());
    }
    // Reset, broken pipe and the like: nobody to answer.
  }

  // GET /v1/link (server/link_server.h): a gateway's connection upgraded
  // to carry many calls at once.
  io::Task<void> UpgradeToLink(io::Stream& stream, const Request& req, beast::flat_buffer& buffer) {
    const std::string label(link::kPath);
    if (draining) {
      co_return co_await Write(stream, ErrorResponse(req, ShuttingDown("the server is shutting down; retry elsewhere")),
                               label);
    }
    const std::string key = BearerKey(req);
    if (service.RequiresApiKey() && !service.ApiKeyAccepted(key)) {
      co_return co_await Write(stream, ErrorResponse(req, Unauthorized(key.empty())), label);
    }
    const auto upgrade = req.find(http::field::upgrade);
    const bool to_link = upgrade != req.end() && std::string_view(upgrade->value().data(), upgrade->value().size()) ==
                                                     link::kProtocol;
    const double ping_s = KeepaliveSeconds(req);
    if (!to_link || ping_s <= 0) {
      const ApiError bad = MakeError(400, "invalid_request_error", "bad_upgrade",
                                     std::string("GET ") + std::string(link::kPath) + " upgrades to " +
                                         std::string(link::kProtocol) + " (Upgrade header) and needs " +
                                         kKeepaliveHeader + ": the ping period, 0.1 to 60 s");
      co_return co_await Write(stream, ErrorResponse(req, bad), label);
    }
    metrics.requests.Add(label + ",101");
    const std::string head = "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: " +
                             std::string(link::kProtocol) + "\r\n\r\n";
    stream.expires_after(WallSeconds(limits.write_timeout_s));
    boost::system::error_code ec;
    co_await net::async_write(stream, net::buffer(head), net::redirect_error(io::use_task, ec));
    if (ec) co_return;
    const auto* bytes = static_cast<const char*>(buffer.data().data());
    std::string received(bytes, bytes + buffer.size());  // frames sent right behind the request
    buffer.consume(buffer.size());
    co_await links.Serve(stream, std::move(received), ping_s);
  }

  static std::string BearerKey(const Request& req) {
    if (auto auth = req.find(http::field::authorization); auth != req.end()) {
      const std::string_view value(auth->value().data(), auth->value().size());
      if (value.starts_with("Bearer ")) return std::string(value.substr(7));
    }
    return {};
  }

  io::Task<void> Write(io::Stream& stream, Response res, const std::string& endpoint) {
    co_await calls.Write(stream, std::move(res), endpoint);
  }

  // One endpoint: its method, path (or path prefix), whether it needs an
  // API key when keys are configured, its metrics label, and its handler.
  // What a handler learns of the request beyond its body: the path, the
  // client's API key ("" when none) and the route's metrics label.
  struct Target {
    std::string path;
    std::string query;  // after '?', "" when none
    std::string key;
    std::string label;
  };
  using Handler = io::Task<void> (Impl::*)(io::Stream&, const Request&, const Target&);
  struct Route {
    http::verb method;
    std::string_view path;
    bool prefix;  // `path` is a prefix (the admin endpoints)
    bool needs_key;
    std::string_view label;  // bounded label values for the requests metric
    Handler handler;
  };
  static const std::vector<Route>& Routes() {
    static const std::vector<Route> routes = {
        {http::verb::get, "/health", false, false, "/health", &Impl::Health},
        {http::verb::get, "/metrics", false, false, "/metrics", &Impl::Metrics},
        {http::verb::get, "/v1/models", false, true, "/v1/models", &Impl::Models},
        {http::verb::get, "/v1/telemetry", false, true, "/v1/telemetry", &Impl::Telemetry},
        {http::verb::get, "/v1/timeline", false, true, "/v1/timeline", &Impl::Timeline},
        {http::verb::get, "/dashboard", false, false, "/dashboard", &Impl::Dashboard},
        {http::verb::get, "/dashboard/chart.js", false, false, "/dashboard", &Impl::Dashboard},
        {http::verb::post, "/v1/chat/completions", false, true, "/v1/chat/completions", &Impl::Completion},
        {http::verb::post, "/v1/completions", false, true, "/v1/completions", &Impl::Completion},
        {http::verb::post, "/admin/models/", true, true, "/admin", &Impl::Admin},
    };
    return routes;
  }

  io::Task<void> Handle(io::Stream& stream, const Request& req) {
    const std::string target(req.target());
    const auto question = target.find('?');
    const std::string path = target.substr(0, question);
    const Route* route = nullptr;
    for (const Route& r : Routes()) {
      if (r.prefix ? path.rfind(r.path, 0) == 0 : path == r.path) {
        route = &r;
        break;
      }
    }
    if (route == nullptr) co_return co_await Write(stream, ErrorResponse(req, NotFound(path)), "other");
    Target t{path, question == std::string::npos ? "" : target.substr(question + 1), {}, std::string(route->label)};
    if (draining) {  // load balancers' probes see it too, and take the server out
      co_return co_await Write(stream, ErrorResponse(req, ShuttingDown("the server is shutting down; retry elsewhere")),
                               t.label);
    }
    // Client endpoints need a key when keys are configured.
    t.key = BearerKey(req);
    if (route->needs_key && service.RequiresApiKey() && !service.ApiKeyAccepted(t.key)) {
      co_return co_await Write(stream, ErrorResponse(req, Unauthorized(t.key.empty())), t.label);
    }
    const bool head_of_get = req.method() == http::verb::head && route->method == http::verb::get;
    if (req.method() != route->method && !(head_of_get && route->handler == &Impl::Health)) {
      co_return co_await Write(stream, ErrorResponse(req, MethodNotAllowed(route->method == http::verb::get ? "GET" : "POST")),
                               t.label);
    }
    co_await (this->*route->handler)(stream, req, t);
  }

  io::Task<void> Health(io::Stream& stream, const Request& req, const Target& t) {
    Response res = HealthResponse(req);
    if (req.method() != http::verb::head) co_return co_await Write(stream, std::move(res), t.label);
    // HEAD (load balancers' probes): the GET answer's head, no body.
    metrics.requests.Add(t.label + ",200");
    stream.expires_after(WallSeconds(limits.write_timeout_s));
    boost::system::error_code ec;
    co_await http_wire::WriteHead(stream, res.base(), ec);
    if (ec) throw boost::system::system_error(ec);
    stream.expires_never();
  }

  io::Task<void> Metrics(io::Stream& stream, const Request& req, const Target& t) {
    co_await Write(stream, MetricsResponse(req, service.RenderMetrics()), t.label);
  }

  io::Task<void> Models(io::Stream& stream, const Request& req, const Target& t) {
    co_await Write(stream, ModelsResponse(req, service.Models()), t.label);
  }

  io::Task<void> Telemetry(io::Stream& stream, const Request& req, const Target& t) {
    json body = service.Telemetry();
    if (!service.IsOperator(t.key)) ScopeSessions(body, SessionScope(t.key));
    co_await Write(stream, JsonResponse(req, http::status::ok, body), t.label);
  }

  io::Task<void> Timeline(io::Stream& stream, const Request& req, const Target& t) {
    std::vector<std::uint64_t> after;
    std::string error;
    if (!ParseTimelineCursors(t.query, service.TimelineInstances(), after, error)) {
      co_return co_await Write(stream, ErrorResponse(req, MakeError(400, "invalid_request_error", "bad_query", error)),
                               t.label);
    }
    co_await Write(stream, JsonResponse(req, http::status::ok, service.Timeline(after)), t.label);
  }

  // The dashboard's page and Chart.js, built in (web/web_assets.h); the
  // page asks for a key itself when the data endpoints need one.
  io::Task<void> Dashboard(io::Stream& stream, const Request& req, const Target& t) {
    const auto asset = t.path == "/dashboard" ? DashboardAsset::kPage : DashboardAsset::kChartJs;
    co_await Write(stream, DashboardAssetResponse(req, asset), t.label);
  }

  io::Task<void> Admin(io::Stream& stream, const Request& req, const Target& t) {
    if (!service.IsOperator(t.key)) {
      co_return co_await Write(stream, ErrorResponse(req, Forbidden()), t.label);
    }
    std::string model, action;
    if (!ParseAdminPath(t.path, model, action)) {
      co_return co_await Write(stream, ErrorResponse(req, NotFound(t.path)), t.label);
    }
    co_await Write(stream, AdminResponse(req, service.Admin(model, action)), t.label);
  }

  // A call in flight, known to a drain until its answer is written.
  class ActiveCall {
   public:
    ActiveCall(Impl& impl, std::int64_t handle, const std::shared_ptr<CallChannel>& channel)
        : impl_(impl), serial_(impl.next_serial++) {
      if (handle >= 0) impl_.active[serial_] = Active{handle, channel};
    }
    ~ActiveCall() { impl_.active.erase(serial_); }
    ActiveCall(const ActiveCall&) = delete;
    ActiveCall& operator=(const ActiveCall&) = delete;

   private:
    Impl& impl_;
    std::uint64_t serial_;
  };

  // POST /v1/chat/completions and /v1/completions: one call, answered at
  // once or streamed as server-sent events.
  io::Task<void> Completion(io::Stream& stream, const Request& req, const Target& t) {
    const bool chat = t.path == "/v1/chat/completions";
    const std::string& label = t.label;
    const std::string session_header = SessionHeader(req);
    auto parsed = chat ? ParseChatCompletion(req.body(), session_header) : ParseCompletion(req.body(), session_header);
    if (auto* e = std::get_if<ApiError>(&parsed)) co_return co_await Write(stream, ErrorResponse(req, *e), label);
    CompletionRequest request = std::move(std::get<CompletionRequest>(parsed));
    if (auto bad = ReadHintHeaders(req, request)) co_return co_await Write(stream, ErrorResponse(req, *bad), label);

    auto channel = std::make_shared<CallChannel>(co_await net::this_coro::executor);
    const std::int64_t handle = service.Submit(request, t.key, std::make_shared<Sink>(gate, channel));
    const ActiveCall in_flight(*this, handle, channel);
    std::shared_ptr<bool> watching = handle >= 0 ? calls.WatchForHangup(stream, handle, channel) : nullptr;
    AnswerHead answer;
    answer.chat = chat;
    answer.id = std::string(chat ? "chatcmpl-" : "cmpl-") + std::to_string(next_id++);
    answer.created = UnixNow();
    answer.model = request.model;
    co_await calls.Answer(stream, req, request.stream, label, handle, *channel, watching, answer);
  }
};

bool IsLoopbackAddress(const std::string& host) {
  boost::system::error_code ec;
  const auto address = net::ip::make_address(host, ec);
  return !ec && address.is_loopback();
}

HttpServer::HttpServer(CompletionService& service, std::string host, std::uint16_t port, std::shared_ptr<IoLoop> loop,
                       HttpLimits limits)
    : impl_(std::make_unique<Impl>(service, std::move(host), port, std::move(loop), limits)) {}

HttpServer::~HttpServer() { Stop(); }

std::uint16_t HttpServer::Start() {
  boost::system::error_code ec;
  const auto address = net::ip::make_address(impl_->host, ec);
  if (ec) throw InputError("serve.host", "'" + impl_->host + "' is not an IP address");
  const tcp::endpoint endpoint{address, impl_->port};
  impl_->acceptor.open(endpoint.protocol(), ec);
  if (!ec) impl_->acceptor.set_option(net::socket_base::reuse_address(true), ec);
  if (!ec) impl_->acceptor.bind(endpoint, ec);
  if (!ec) impl_->acceptor.listen(net::socket_base::max_listen_connections, ec);
  if (ec) {
    throw InputError("serve", "cannot listen on " + impl_->host + ":" + std::to_string(impl_->port) + ": " +
                                  ec.message());
  }
  const std::uint16_t bound = impl_->acceptor.local_endpoint().port();
  net::co_spawn(impl_->io, impl_->Accept(), net::detached);
  impl_->loop->Start();
  impl_->started = true;
  return bound;
}

HttpServer::DrainReport HttpServer::Drain(double drain_s) {
  DrainReport report;
  if (!impl_ || !impl_->started || impl_->stopped) return report;  // no loop runs the drain
  char note[160];
  std::snprintf(note, sizeof note, "the server shut down before the call finished (drain time %g s)", drain_s);
  impl_->drain_note = note;  // read on the I/O thread after the post below
  report.in_flight = impl_->OnLoop([this] { return impl_->BeginDrain(); });
  const auto deadline = std::chrono::steady_clock::now() + WallSeconds(drain_s);
  if (!impl_->WaitQuiet(deadline)) {
    report.cut = impl_->OnLoop([this] { return impl_->CutCalls(); });
    // Cut calls end with an error answer or event at once; a client that
    // reads nothing holds its connection at most write_timeout_s.
    report.quiet = impl_->WaitQuiet(std::chrono::steady_clock::now() + WallSeconds(impl_->limits.write_timeout_s + 1));
  } else {
    report.quiet = true;
  }
  return report;
}

void HttpServer::Stop() {
  if (!impl_) return;
  impl_->stopped = true;
  {
    std::lock_guard<std::mutex> lock(impl_->gate->mu);
    impl_->gate->open = false;
  }
  impl_->loop->Stop();
}

void HttpServer::WaitForSignal() {
  net::io_context signals_io;
  net::signal_set signals(signals_io, SIGINT, SIGTERM);
  signals.async_wait([](const boost::system::error_code&, int) {});
  signals_io.run();
}

}  // namespace talaria
