// A call's reports on their way from the service's threads to the
// connection that answers it: the events (delta, done, error), the channel
// the connection's coroutine waits on, and the sink the service reports to,
// which posts each event onto the server's I/O thread through a gate that
// closes when the server stops. Used by server/http_server.cc only.
#pragma once

#include <utility>  // before Boost 1.74's asio (see http_server.cc)

#include <boost/asio.hpp>
#include <boost/container/small_vector.hpp>
#include <chrono>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "server/asio_io.h"
#include "server/http_responses.h"
#include "server/openai_api.h"
#include "server/openai_encode.h"
#include "server/service.h"

namespace talaria::http_front {

namespace net = boost::asio;

// What a call's sink reports, marshalled onto the connection's executor.
struct Event {
  enum class Kind { kDelta, kDone, kError } kind;
  std::string text;
  Usage usage;
  std::string finish_reason;
  ApiError error;
};

// A finished call's whole answer (not streaming), as JSON.
http_front::Response CompletionResponse(const Request& req, const AnswerHead& head, const std::string& text,
                                        const Event& done);
// One server-sent event of a stream: a delta, the final chunk with usage,
// or an error.
std::string StreamEvent(const AnswerHead& head, const Event& e, bool first_delta);

// A call's events in arrival order. A whole answer brings one or two, so
// the first two live inside the channel (a deque allocated a map and a
// block per call); a long stream's drained queue is reused from the start.
class CallChannel {
 public:
  explicit CallChannel(io::Executor ex) : timer(ex, std::chrono::steady_clock::time_point::max()) {}
  void Push(Event e) { events_.push_back(std::move(e)); }
  bool Empty() const { return next_ == events_.size(); }
  // The oldest event not yet taken; the channel must not be Empty().
  Event Pop() {
    Event e = std::move(events_[next_++]);
    if (Empty()) {
      events_.clear();
      next_ = 0;
    }
    return e;
  }

  io::Timer timer;  // cancelled to wake the waiting coroutine

 private:
  boost::container::small_vector<Event, 2> events_;
  std::size_t next_ = 0;
};

// Where calls' sinks post their reports: the server's executor while the
// server runs. Stop() closes it, so no report can reach an io_context that
// is gone, whichever of the server and the service a process tears down
// first (instance threads report until their service stops).
struct PostGate {
  explicit PostGate(io::Executor e) : ex(std::move(e)) {}
  std::mutex mu;
  bool open = true;  // guarded by mu
  io::Executor ex;
};

// The channel belongs to the connection's coroutine (its timer to the
// server's io_context): the sink, which the service may release on any
// thread and after the server is gone, holds it weakly, so the last
// reference never drops on a foreign thread.
class Sink final : public CompletionSink {
 public:
  Sink(std::shared_ptr<PostGate> gate, std::weak_ptr<CallChannel> channel)
      : gate_(std::move(gate)), channel_(std::move(channel)) {}
  void OnDelta(const std::string& text) override { Post(Event{Event::Kind::kDelta, text, {}, {}, {}}); }
  void OnDone(const Usage& usage, const std::string& finish_reason) override {
    Post(Event{Event::Kind::kDone, {}, usage, finish_reason, {}});
  }
  void OnError(const ApiError& error) override { Post(Event{Event::Kind::kError, {}, {}, {}, error}); }

 private:
  void Post(Event e);
  std::shared_ptr<PostGate> gate_;
  std::weak_ptr<CallChannel> channel_;
};

// Waits for the next event of a call; nullopt once `deadline` passes first.
io::Task<std::optional<Event>> NextEvent(
    CallChannel& channel, std::chrono::steady_clock::time_point deadline = std::chrono::steady_clock::time_point::max());

}  // namespace talaria::http_front
