// Boost 1.74's asio/awaitable.hpp uses std::exchange without including
// <utility>; include it first (fixed in later Boost releases).
#include <utility>

#include "server/http_server.h"

#include <algorithm>
#include <boost/asio.hpp>
#include <boost/beast.hpp>
#include <chrono>
#include <cstdio>
#include <deque>
#include <nlohmann/json.hpp>
#include <thread>
#include <variant>

#include "core/error.h"
#include "server/openai_encode.h"

namespace talaria {
namespace {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = net::ip::tcp;
using nlohmann::json;

using Request = http::request<http::string_body>;
using Response = http::response<http::string_body>;

std::int64_t UnixNow() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// A JSON response whose body is already serialized.
Response TextResponse(const Request& req, http::status status, std::string body) {
  Response res{status, req.version()};
  res.set(http::field::content_type, "application/json");
  res.set(http::field::server, "talaria");
  res.keep_alive(req.keep_alive());
  res.body() = std::move(body);
  res.prepare_payload();
  return res;
}

Response JsonResponse(const Request& req, http::status status, const json& body) {
  // Replace, never throw: no byte a client sent can make an answer unwritable.
  return TextResponse(req, status, body.dump(-1, ' ', false, json::error_handler_t::replace));
}

Response ErrorResponse(const Request& req, const ApiError& e) {
  Response res = JsonResponse(req, static_cast<http::status>(e.status), e.Body());
  if (e.status == 429) res.set(http::field::retry_after, "1");
  return res;
}

ApiError MakeError(int status, std::string type, std::string code, std::string message) {
  ApiError e;
  e.status = status;
  e.type = std::move(type);
  e.code = std::move(code);
  e.message = std::move(message);
  return e;
}

// What a call's sink reports, marshalled onto the connection's executor.
struct Event {
  enum class Kind { kDelta, kDone, kError } kind;
  std::string text;
  Usage usage;
  std::string finish_reason;
  ApiError error;
};

struct CallChannel {
  explicit CallChannel(net::any_io_executor ex) : timer(ex, std::chrono::steady_clock::time_point::max()) {}
  std::deque<Event> events;
  net::steady_timer timer;  // cancelled to wake the waiting coroutine
};

// The channel belongs to the connection's coroutine (its timer to the
// server's io_context): the sink, which the service may release on any
// thread and after the server is gone, holds it weakly, so the last
// reference never drops on a foreign thread.
class Sink final : public CompletionSink {
 public:
  Sink(net::any_io_executor ex, std::weak_ptr<CallChannel> channel) : ex_(ex), channel_(std::move(channel)) {}
  void OnDelta(const std::string& text) override { Post(Event{Event::Kind::kDelta, text, {}, {}, {}}); }
  void OnDone(const Usage& usage, const std::string& finish_reason) override {
    Post(Event{Event::Kind::kDone, {}, usage, finish_reason, {}});
  }
  void OnError(const ApiError& error) override { Post(Event{Event::Kind::kError, {}, {}, {}, error}); }

 private:
  void Post(Event e) {
    // A call outliving its connection (the server stopped) reports nowhere.
    // (Until the servers stop in order, issue 20, a report racing the
    // server's destruction can still reach its executor.)
    if (channel_.expired()) return;
    net::post(ex_, [weak = channel_, e = std::move(e)]() mutable {
      const std::shared_ptr<CallChannel> channel = weak.lock();
      if (channel == nullptr) return;  // the connection is gone
      channel->events.push_back(std::move(e));
      channel->timer.cancel();
    });
  }
  net::any_io_executor ex_;
  std::weak_ptr<CallChannel> channel_;
};

// Waits for the next event of a call.
net::awaitable<Event> NextEvent(CallChannel& channel) {
  while (channel.events.empty()) {
    boost::system::error_code ec;
    channel.timer.expires_at(std::chrono::steady_clock::time_point::max());
    co_await channel.timer.async_wait(net::redirect_error(net::use_awaitable, ec));
  }
  Event e = std::move(channel.events.front());
  channel.events.pop_front();
  co_return e;
}

// JSON is built outside the coroutines: GCC 12 miscompiles brace-initialised
// string literals inside coroutine bodies ("array used as initializer").
Response HealthResponse(const Request& req) { return JsonResponse(req, http::status::ok, json{{"status", "ok"}}); }

Response ModelsResponse(const Request& req, const std::vector<std::string>& models) {
  json data = json::array();
  for (const auto& m : models) {
    data.push_back(json{{"id", m}, {"object", "model"}, {"created", 0}, {"owned_by", "talaria"}});
  }
  return JsonResponse(req, http::status::ok, json{{"object", "list"}, {"data", data}});
}

Response CompletionResponse(const Request& req, const AnswerHead& head, const std::string& text, const Event& done) {
  return TextResponse(req, http::status::ok, CompletionBody(head, text, done.finish_reason, done.usage));
}

// One server-sent event of a stream: a delta, the final chunk with usage, or
// an error.
std::string StreamEvent(const AnswerHead& head, const Event& e, bool first_delta) {
  switch (e.kind) {
    case Event::Kind::kDelta: return StreamDelta(head, e.text, first_delta);
    case Event::Kind::kDone: return StreamFinal(head, e.finish_reason, e.usage);
    case Event::Kind::kError: return StreamError(e.error);
  }
  return {};
}

Response MetricsResponse(const Request& req, std::string text) {
  Response res{http::status::ok, req.version()};
  res.set(http::field::content_type, "text/plain; version=0.0.4");
  res.keep_alive(req.keep_alive());
  res.body() = std::move(text);
  res.prepare_payload();
  return res;
}

Response AdminResponse(const Request& req, const std::variant<json, ApiError>& result) {
  if (const auto* e = std::get_if<ApiError>(&result)) return ErrorResponse(req, *e);
  return JsonResponse(req, http::status::ok, std::get<json>(result));
}

// "/admin/models/{model}/{action}" -> model, action; false for other paths.
bool ParseAdminPath(const std::string& path, std::string& model, std::string& action) {
  static const std::string kPrefix = "/admin/models/";
  if (path.rfind(kPrefix, 0) != 0) return false;
  const auto slash = path.rfind('/');
  if (slash <= kPrefix.size()) return false;
  model = path.substr(kPrefix.size(), slash - kPrefix.size());
  action = path.substr(slash + 1);
  return !model.empty() && model.find('/') == std::string::npos;
}

ApiError NotFound(const std::string& path) {
  return MakeError(404, "invalid_request_error", "not_found", "unknown path " + path);
}

ApiError MethodNotAllowed(const char* use) {
  return MakeError(405, "invalid_request_error", "method_not_allowed", std::string("use ") + use);
}

ApiError Forbidden() {
  return MakeError(403, "invalid_request_error", "permission_denied", "only the operator key may use /admin");
}

// A tenant's view of telemetry: only the sessions its key scoped (the
// instance's own snapshot, or each instance's in the gateway's list).
void ScopeSessions(json& telemetry, const std::string& scope) {
  auto keep_own = [&](json& t) {
    auto s = t.find("sessions");
    if (s == t.end() || !s->is_object()) return;
    for (auto it = s->begin(); it != s->end();) {
      it = it.key().rfind(scope, 0) == 0 ? std::next(it) : s->erase(it);
    }
  };
  keep_own(telemetry);
  if (auto list = telemetry.find("instances"); list != telemetry.end() && list->is_array()) {
    for (json& t : *list) keep_own(t);
  }
}

ApiError Unauthorized(bool missing) {
  return MakeError(401, "invalid_request_error", "invalid_api_key",
                   missing ? "missing API key (Authorization: Bearer ...)" : "incorrect API key");
}

}  // namespace

struct HttpServer::Impl {
  CompletionService& service;
  std::string host;
  std::uint16_t port;
  std::shared_ptr<IoLoop> loop;
  net::io_context& io;
  tcp::acceptor acceptor{io};
  std::int64_t next_id = 0;

  ServerMetrics& metrics;         // the service's, looked up once
  HttpLimits limits;
  std::int64_t connections = 0;  // open now (the I/O thread's alone)

  Impl(CompletionService& s, std::string h, std::uint16_t p, std::shared_ptr<IoLoop> l, HttpLimits lim)
      : service(s), host(std::move(h)), port(p), loop(l ? std::move(l) : std::make_shared<IoLoop>()), io(loop->context()),
        metrics(s.metrics()), limits(lim) {}

  net::awaitable<void> Accept() {
    std::chrono::milliseconds backoff{0};
    net::steady_timer pause(io);
    for (;;) {
      boost::system::error_code ec;
      tcp::socket socket = co_await acceptor.async_accept(net::redirect_error(net::use_awaitable, ec));
      if (ec == net::error::operation_aborted || !acceptor.is_open()) co_return;
      if (ec) {
        // Out of descriptors (EMFILE, ENFILE), buffers or memory, for now:
        // try again after a pause that doubles up to a second.
        backoff = std::clamp(backoff * 2, std::chrono::milliseconds(10), std::chrono::milliseconds(1000));
        metrics.requests.Add("accept,error");
        pause.expires_after(backoff);
        co_await pause.async_wait(net::redirect_error(net::use_awaitable, ec));
        continue;
      }
      backoff = std::chrono::milliseconds(0);
      // Streams are many small writes: without this, Nagle's algorithm and
      // the peer's delayed ACK hold each chunk back by tens of milliseconds.
      socket.set_option(tcp::no_delay(true), ec);
      net::co_spawn(io, Connection(std::move(socket)), net::detached);
    }
  }

  // An answer to a request that could not be read whole: the connection
  // closes after it.
  net::awaitable<void> Refuse(beast::tcp_stream& stream, int status, const char* code, const std::string& message) {
    Request req;
    req.version(11);
    req.keep_alive(false);
    ApiError e = MakeError(status, "invalid_request_error", code, message);
    Response res = ErrorResponse(req, e);
    res.keep_alive(false);
    stream.expires_after(std::chrono::seconds(5));
    boost::system::error_code ec;
    metrics.requests.Add("other," + std::to_string(status));
    co_await http::async_write(stream, res, net::redirect_error(net::use_awaitable, ec));
  }

  net::awaitable<void> Connection(tcp::socket socket) {
    beast::tcp_stream stream(std::move(socket));
    beast::flat_buffer buffer;
    ++connections;
    const auto timeout = std::chrono::milliseconds(static_cast<std::int64_t>(limits.request_timeout_s * 1000));
    try {
      if (connections > limits.max_connections) {
        co_await Refuse(stream, 503, "too_many_connections",
                        "the server holds " + std::to_string(limits.max_connections) + " connections; retry later");
      } else {
        for (;;) {
          http::request_parser<http::string_body> parser;
          parser.header_limit(static_cast<std::uint32_t>(limits.max_header_bytes));
          parser.body_limit(static_cast<std::uint64_t>(limits.max_body_bytes));
          stream.expires_after(timeout);
          boost::system::error_code ec;
          co_await http::async_read(stream, buffer, parser, net::redirect_error(net::use_awaitable, ec));
          if (ec) {
            co_await RefuseUnread(stream, ec);
            break;
          }
          stream.expires_never();
          Request req = parser.release();
          const bool keep_alive = req.keep_alive();
          co_await Handle(stream, req);
          if (!keep_alive) break;
        }
      }
    } catch (const boost::system::system_error&) {
      // Client closed or timed out mid-answer: nothing more to say.
    }
    --connections;
    boost::system::error_code ec;
    stream.socket().shutdown(tcp::socket::shutdown_send, ec);
  }

  // Why a request could not be read, answered where the client is still
  // there to hear it (a closed or idle connection gets nothing).
  // (A timeout has closed the socket already: beast's stream closes it.)
  net::awaitable<void> RefuseUnread(beast::tcp_stream& stream, const boost::system::error_code& ec) {
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

  net::awaitable<void> Write(beast::tcp_stream& stream, Response res, const std::string& endpoint) {
    metrics.requests.Add(endpoint + "," + std::to_string(res.result_int()));
    co_await http::async_write(stream, res, net::use_awaitable);
  }

  // One endpoint: its method, path (or path prefix), whether it needs an
  // API key when keys are configured, its metrics label, and its handler.
  // What a handler learns of the request beyond its body: the path, the
  // client's API key ("" when none) and the route's metrics label.
  struct Target {
    std::string path;
    std::string key;
    std::string label;
  };
  using Handler = net::awaitable<void> (Impl::*)(beast::tcp_stream&, const Request&, const Target&);
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
        {http::verb::post, "/v1/chat/completions", false, true, "/v1/chat/completions", &Impl::Completion},
        {http::verb::post, "/v1/completions", false, true, "/v1/completions", &Impl::Completion},
        {http::verb::post, "/admin/models/", true, true, "/admin", &Impl::Admin},
    };
    return routes;
  }

  net::awaitable<void> Handle(beast::tcp_stream& stream, const Request& req) {
    const std::string target(req.target());
    const std::string path = target.substr(0, target.find('?'));
    const Route* route = nullptr;
    for (const Route& r : Routes()) {
      if (r.prefix ? path.rfind(r.path, 0) == 0 : path == r.path) {
        route = &r;
        break;
      }
    }
    if (route == nullptr) co_return co_await Write(stream, ErrorResponse(req, NotFound(path)), "other");
    Target t{path, {}, std::string(route->label)};
    // Client endpoints need a key when keys are configured.
    if (auto auth = req.find(http::field::authorization); auth != req.end()) {
      const std::string value(auth->value());
      if (value.rfind("Bearer ", 0) == 0) t.key = value.substr(7);
    }
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

  net::awaitable<void> Health(beast::tcp_stream& stream, const Request& req, const Target& t) {
    Response res = HealthResponse(req);
    if (req.method() != http::verb::head) co_return co_await Write(stream, std::move(res), t.label);
    // HEAD (load balancers' probes): the GET answer's head, no body.
    metrics.requests.Add(t.label + ",200");
    http::response_serializer<http::string_body> serializer{res};
    co_await http::async_write_header(stream, serializer, net::use_awaitable);
  }

  net::awaitable<void> Metrics(beast::tcp_stream& stream, const Request& req, const Target& t) {
    co_await Write(stream, MetricsResponse(req, metrics.Render()), t.label);
  }

  net::awaitable<void> Models(beast::tcp_stream& stream, const Request& req, const Target& t) {
    co_await Write(stream, ModelsResponse(req, service.Models()), t.label);
  }

  net::awaitable<void> Telemetry(beast::tcp_stream& stream, const Request& req, const Target& t) {
    json body = service.Telemetry();
    if (!service.IsOperator(t.key)) ScopeSessions(body, SessionScope(t.key));
    co_await Write(stream, JsonResponse(req, http::status::ok, body), t.label);
  }

  net::awaitable<void> Admin(beast::tcp_stream& stream, const Request& req, const Target& t) {
    if (!service.IsOperator(t.key)) {
      co_return co_await Write(stream, ErrorResponse(req, Forbidden()), t.label);
    }
    std::string model, action;
    if (!ParseAdminPath(t.path, model, action)) {
      co_return co_await Write(stream, ErrorResponse(req, NotFound(t.path)), t.label);
    }
    co_await Write(stream, AdminResponse(req, service.Admin(model, action)), t.label);
  }

  // While a client waits for its call's first event (or, not streaming, its
  // whole answer), nothing is written to it, so a client that left is seen
  // only by watching its socket: at end of stream (or a reset) the call is
  // cancelled (counted failed, its slot and KV freed) and the waiting
  // coroutine woken. Bytes that arrive instead (a pipelined request) end the
  // watch. The returned flag stops it: clear it before the socket can go.
  std::shared_ptr<bool> WatchForHangup(beast::tcp_stream& stream, std::int64_t handle,
                                       const std::shared_ptr<CallChannel>& channel) {
    auto watching = std::make_shared<bool>(true);
    tcp::socket* socket = &stream.socket();
    socket->async_wait(tcp::socket::wait_read, [this, socket, handle, watching, channel](boost::system::error_code ec) {
      if (ec || !*watching) return;
      char c;
      const std::size_t n = socket->receive(net::buffer(&c, 1), tcp::socket::message_peek, ec);
      if (n > 0 && !ec) return;  // a pipelined request: the client is there
      service.Cancel(handle);
      ApiError left = MakeError(499, "invalid_request_error", "client_closed", "the client closed the connection");
      channel->events.push_back(Event{Event::Kind::kError, {}, {}, {}, left});
      channel->timer.cancel();
    });
    return watching;
  }
  static void StopWatching(beast::tcp_stream& stream, std::shared_ptr<bool>& watching) {
    if (!watching || !*watching) return;
    *watching = false;
    boost::system::error_code ec;
    stream.socket().cancel(ec);  // the pending wait ends (aborted)
  }

  // POST /v1/chat/completions and /v1/completions: one call, answered at
  // once or streamed as server-sent events.
  net::awaitable<void> Completion(beast::tcp_stream& stream, const Request& req, const Target& t) {
    const bool chat = t.path == "/v1/chat/completions";
    const std::string& label = t.label;
    std::string session_header;
    if (auto it = req.find("X-Session-Id"); it != req.end()) session_header = std::string(it->value());
    auto parsed = chat ? ParseChatCompletion(req.body(), session_header) : ParseCompletion(req.body(), session_header);
    if (auto* e = std::get_if<ApiError>(&parsed)) co_return co_await Write(stream, ErrorResponse(req, *e), label);
    const CompletionRequest request = std::get<CompletionRequest>(parsed);

    auto executor = co_await net::this_coro::executor;
    auto channel = std::make_shared<CallChannel>(executor);
    const std::int64_t handle = service.Submit(request, t.key, std::make_shared<Sink>(executor, channel));
    std::shared_ptr<bool> watching = handle >= 0 ? WatchForHangup(stream, handle, channel) : nullptr;
    AnswerHead answer;
    answer.chat = chat;
    answer.id = std::string(chat ? "chatcmpl-" : "cmpl-") + std::to_string(next_id++);
    answer.created = UnixNow();
    answer.model = request.model;

    if (!request.stream) {
      std::string text;
      for (;;) {
        Event e = co_await NextEvent(*channel);
        if (e.kind == Event::Kind::kDelta) {
          text += e.text;
          continue;
        }
        StopWatching(stream, watching);
        if (e.kind == Event::Kind::kError) co_return co_await Write(stream, ErrorResponse(req, e.error), label);
        co_return co_await Write(stream, CompletionResponse(req, answer, text, e), label);
      }
    }

    // Streaming: the first event decides between an error response and SSE;
    // from then on a write notices a client that left.
    Event e = co_await NextEvent(*channel);
    StopWatching(stream, watching);
    if (e.kind == Event::Kind::kError) co_return co_await Write(stream, ErrorResponse(req, e.error), label);
    http::response<http::empty_body> head{http::status::ok, req.version()};
    head.set(http::field::content_type, "text/event-stream");
    head.set(http::field::cache_control, "no-cache");
    head.set(http::field::server, "talaria");
    head.keep_alive(req.keep_alive());
    head.chunked(true);
    http::response_serializer<http::empty_body> serializer{head};
    metrics.requests.Add(label + ",200");
    try {
      co_await http::async_write_header(stream, serializer, net::use_awaitable);
      bool first_delta = true;
      for (;;) {
        const std::string line = StreamEvent(answer, e, first_delta);
        if (e.kind == Event::Kind::kDelta) first_delta = false;
        co_await net::async_write(stream.socket(), http::make_chunk(net::buffer(line)), net::use_awaitable);
        if (e.kind != Event::Kind::kDelta) break;  // done, or an error reported in-stream
        e = co_await NextEvent(*channel);
      }
    } catch (const boost::system::system_error&) {
      service.Cancel(handle);  // the client left mid-stream: free its slot and KV
      throw;
    }
    co_await net::async_write(stream.socket(), http::make_chunk(net::buffer(kStreamDone.data(), kStreamDone.size())),
                              net::use_awaitable);
    co_await net::async_write(stream.socket(), http::make_chunk_last(), net::use_awaitable);
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
  net::co_spawn(impl_->io, impl_->Accept(), net::detached);
  impl_->loop->Start();
  return impl_->acceptor.local_endpoint().port();
}

void HttpServer::Stop() {
  if (!impl_) return;
  impl_->loop->Stop();
}

void HttpServer::WaitForSignal() {
  net::io_context signals_io;
  net::signal_set signals(signals_io, SIGINT, SIGTERM);
  signals.async_wait([](const boost::system::error_code&, int) {});
  signals_io.run();
}

}  // namespace talaria
