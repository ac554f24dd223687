#include <utility>  // before Boost 1.74's asio (see http_server.cc)

#include "server/link_server.h"

#include <boost/asio.hpp>
#include <boost/beast.hpp>
#include <algorithm>
#include <cstdio>
#include <mutex>
#include <unordered_map>

#include "server/http_responses.h"
#include "server/io_loop.h"
#include "server/link_frames.h"
#include "server/openai_encode.h"

namespace talaria {
namespace {

namespace net = boost::asio;
using link::AppendFrame;
using link::FrameType;

}  // namespace

// One upgraded connection. The frames waiting to go out and the calls in
// flight are shared with the calls' sinks (any thread) under `mu`; the
// rest is the I/O thread's. Holds no asio object, so the last reference may
// drop on any thread.
struct LinkServer::Session {
  std::mutex mu;
  std::string pending;       // frames not yet written
  bool wake_posted = false;  // a wake-up of the writer is on its way
  bool closed = false;       // the link is gone: frames are dropped
  // Calls in flight: the gateway's id -> the service's handle (-1 while
  // Submit runs). A call leaves when its last frame is queued, or when it
  // is cancelled; frames of a call not here are dropped.
  std::unordered_map<std::uint64_t, std::int64_t> calls;

  std::weak_ptr<io::Timer> wake;  // the writer waits on it between writes
  double ping_s = 1;
  bool stopping = false;
  bool writer_done = false;
  io::Timer* writer_ended = nullptr;  // cancelled when the writer ends

  // Queues frames (`write` appends them to `pending`) and wakes the writer;
  // `last` ends call `id` (0: frames of no call). False when dropped.
  template <typename F>
  bool Queue(http_front::PostGate& gate, std::uint64_t id, bool last, F&& write) {
    {
      std::lock_guard<std::mutex> lock(mu);
      if (closed) return false;
      if (id != 0) {
        auto it = calls.find(id);
        if (it == calls.end()) return false;  // cancelled
        if (last) calls.erase(it);
      }
      write(pending);
      if (wake_posted) return true;
      wake_posted = true;
    }
    std::lock_guard<std::mutex> lock(gate.mu);
    if (gate.open) {
      net::post(gate.ex, [w = wake] {
        if (auto timer = w.lock()) timer->cancel();
      });
    }
    return true;
  }
};

// A call's reports, as frames on its link. A call that does not stream
// keeps its text until the end: one frame instead of one per token.
class LinkServer::CallSink final : public CompletionSink {
 public:
  CallSink(std::shared_ptr<Session> session, std::shared_ptr<http_front::PostGate> gate, ServerMetrics& metrics,
           std::uint64_t id, bool stream)
      : session_(std::move(session)), gate_(std::move(gate)), metrics_(metrics), id_(id), stream_(stream) {}

  void OnDelta(const std::string& text) override {
    if (!stream_) {
      text_ += text;
      return;
    }
    session_->Queue(*gate_, id_, false, [&](std::string& out) { AppendFrame(out, FrameType::kDelta, id_, text); });
  }
  void OnDone(const Usage& usage, const std::string& finish_reason) override {
    const bool sent = session_->Queue(*gate_, id_, true, [&](std::string& out) {
      if (!text_.empty()) AppendFrame(out, FrameType::kDelta, id_, text_);
      link::AppendDone(out, id_, usage, finish_reason);
    });
    if (sent) metrics_.requests.Add(kDoneLabel);
  }
  void OnError(const ApiError& error) override {
    const bool sent = session_->Queue(*gate_, id_, true, [&](std::string& out) {
      AppendFrame(out, FrameType::kError, id_, ErrorBodyWithStatus(error));
    });
    if (sent) metrics_.requests.Add(std::string(link::kPath) + "," + std::to_string(error.status));
  }

 private:
  static inline const std::string kDoneLabel = std::string(link::kPath) + ",200";
  std::shared_ptr<Session> session_;
  std::shared_ptr<http_front::PostGate> gate_;
  ServerMetrics& metrics_;
  std::uint64_t id_;
  bool stream_;
  std::string text_;
};

LinkServer::LinkServer(CompletionService& service, ServerMetrics& metrics, const HttpLimits& limits,
                       std::shared_ptr<http_front::PostGate> gate)
    : service_(service), metrics_(metrics), limits_(limits), gate_(std::move(gate)) {}

LinkServer::~LinkServer() = default;

io::Task<void> LinkServer::Serve(io::Stream& stream, std::string received, double ping_s) {
  auto s = std::make_shared<Session>();
  auto wake = std::make_shared<io::Timer>(stream.get_executor());
  io::Timer writer_ended(stream.get_executor(), std::chrono::steady_clock::time_point::max());
  s->wake = wake;
  s->ping_s = ping_s;
  s->writer_ended = &writer_ended;
  sessions_.insert(s.get());  // (a draining server upgrades no connection)
  net::co_spawn(stream.get_executor(), WriteFrames(s, stream), net::detached);

  link::FrameReader reader(static_cast<std::size_t>(limits_.max_body_bytes + limits_.max_header_bytes));
  std::copy(received.begin(), received.end(), reader.Prepare(received.size()));
  reader.Commit(received.size());
  boost::system::error_code ec;
  while (!s->stopping) {
    while (auto f = reader.Next()) {
      switch (f->type) {
        case FrameType::kCall:
          HandleCall(s, f->id, f->payload);
          break;
        case FrameType::kCancel: {
          std::int64_t handle = -1;
          {
            std::lock_guard<std::mutex> lock(s->mu);
            if (auto it = s->calls.find(f->id); it != s->calls.end()) {
              handle = it->second;
              s->calls.erase(it);
            }
          }
          if (handle >= 0) service_.Cancel(handle);
          break;
        }
        case FrameType::kPing:
          break;
        default:  // output frames go the other way
          std::fprintf(stderr, "talaria: instance link: the gateway sent a frame of type %d; closing the link\n",
                       static_cast<int>(f->type));
          s->stopping = true;
          break;
      }
      if (s->stopping) break;
    }
    if (reader.Failed()) {
      std::fprintf(stderr, "talaria: instance link: %s; closing the link\n", reader.error().c_str());
      break;
    }
    if (s->stopping) break;
    // Quiet past idle_timeout_s, and past three of its pings: gone.
    stream.expires_after(WallSeconds(std::max(limits_.idle_timeout_s, 3 * s->ping_s)));
    const std::size_t n = co_await stream.async_read_some(
        net::buffer(reader.Prepare(link::kReadBytes), link::kReadBytes), net::redirect_error(io::use_task, ec));
    if (ec) break;
    reader.Commit(n);
  }

  // The link is gone (or broken): its calls are cancelled, as a client's
  // hangup would, and the writer stops.
  std::unordered_map<std::uint64_t, std::int64_t> orphans;
  {
    std::lock_guard<std::mutex> lock(s->mu);
    s->closed = true;
    orphans.swap(s->calls);
  }
  for (const auto& [id, handle] : orphans) {
    if (handle >= 0) service_.Cancel(handle);
  }
  s->stopping = true;
  wake->cancel();
  stream.cancel();
  while (!s->writer_done) co_await writer_ended.async_wait(net::redirect_error(io::use_task, ec));
  sessions_.erase(s.get());
}

io::Task<void> LinkServer::WriteFrames(std::shared_ptr<Session> s, io::Stream& stream) {
  const std::shared_ptr<io::Timer> wake = s->wake.lock();
  std::string writing;
  boost::system::error_code ec;
  while (!s->stopping) {
    {
      std::lock_guard<std::mutex> lock(s->mu);
      writing.swap(s->pending);
      s->wake_posted = false;
    }
    if (!writing.empty()) {
      stream.expires_after(WallSeconds(limits_.write_timeout_s));
      co_await net::async_write(stream, net::buffer(writing), net::redirect_error(io::use_task, ec));
      if (ec) break;
      writing.clear();
      continue;
    }
    // Nothing to write: wait for a call's frames, or ping after a quiet period.
    wake->expires_after(WallSeconds(s->ping_s));
    co_await wake->async_wait(net::redirect_error(io::use_task, ec));
    if (!ec) {
      std::lock_guard<std::mutex> lock(s->mu);
      if (s->pending.empty()) AppendFrame(s->pending, FrameType::kPing, 0);
    }
  }
  if (ec && !s->stopping) stream.close();  // a write failed: the reader ends too
  s->writer_done = true;
  s->writer_ended->cancel();
}

void LinkServer::HandleCall(const std::shared_ptr<Session>& s, std::uint64_t id, std::string_view payload) {
  const auto refuse = [&](const ApiError& e) {
    metrics_.requests.Add(std::string(link::kPath) + "," + std::to_string(e.status));
    s->Queue(*gate_, 0, false,
             [&](std::string& out) { AppendFrame(out, FrameType::kError, id, ErrorBodyWithStatus(e)); });
  };
  if (id == 0)
    return refuse(http_front::MakeError(400, "invalid_request_error", "bad_link_frame", "call id 0 is reserved"));
  if (draining_) return refuse(http_front::ShuttingDown("the server is shutting down; retry elsewhere"));
  link::CallFields fields;
  std::string why;
  if (!link::ReadCall(payload, fields, why)) {
    return refuse(http_front::MakeError(400, "invalid_request_error", "bad_link_frame", why));
  }
  const std::string key(fields.api_key);
  if (service_.RequiresApiKey() && !service_.ApiKeyAccepted(key)) return refuse(http_front::Unauthorized(key.empty()));
  auto parsed = ParseCompletion(fields.body, "");
  if (auto* e = std::get_if<ApiError>(&parsed)) return refuse(*e);
  CompletionRequest& request = std::get<CompletionRequest>(parsed);
  request.session_end = request.session_end || fields.session_end;
  if (fields.expected_tool_s >= 0) request.expected_tool_s = fields.expected_tool_s;
  bool duplicate = false, full = false;
  {
    std::lock_guard<std::mutex> lock(s->mu);
    duplicate = s->calls.contains(id);
    full = s->calls.size() >= static_cast<std::size_t>(limits_.max_connections);
    if (!duplicate && !full) s->calls.emplace(id, -1);
  }
  if (duplicate) {
    return refuse(http_front::MakeError(400, "invalid_request_error", "bad_link_frame",
                                        "call id " + std::to_string(id) + " is in flight already"));
  }
  if (full) {
    return refuse(
        http_front::MakeError(503, "server_error", "too_many_calls",
                              "the link carries " + std::to_string(limits_.max_connections) + " calls; retry later"));
  }
  const std::int64_t handle =
      service_.Submit(request, key, std::make_shared<CallSink>(s, gate_, metrics_, id, request.stream));
  std::lock_guard<std::mutex> lock(s->mu);
  if (auto it = s->calls.find(id); it != s->calls.end()) it->second = handle;  // still running
}

std::size_t LinkServer::BeginDrain() {
  draining_ = true;
  std::size_t in_flight = 0;
  for (Session* s : sessions_) {
    {
      std::lock_guard<std::mutex> lock(s->mu);
      in_flight += s->calls.size();
    }
    s->Queue(*gate_, 0, false, [](std::string& out) {
      AppendFrame(out, FrameType::kError, 0, ErrorBodyWithStatus(http_front::ShuttingDown("the server is draining")));
    });
  }
  return in_flight;
}

std::size_t LinkServer::CutCalls(const std::string& why) {
  std::size_t cut = 0;
  for (Session* s : sessions_) {
    std::vector<std::pair<std::uint64_t, std::int64_t>> calls;
    {
      std::lock_guard<std::mutex> lock(s->mu);
      calls.assign(s->calls.begin(), s->calls.end());
    }
    for (const auto& [id, handle] : calls) {
      if (handle < 0 || !service_.Cancel(handle)) continue;  // finishing anyway
      const ApiError e = http_front::ShuttingDown(why);
      if (s->Queue(*gate_, id, true,
                   [&](std::string& out) { AppendFrame(out, FrameType::kError, id, ErrorBodyWithStatus(e)); })) {
        ++cut;
      }
    }
  }
  return cut;
}

}  // namespace talaria
