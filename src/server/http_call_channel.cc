#include "server/http_call_channel.h"

namespace talaria::http_front {

Response CompletionResponse(const Request& req, const AnswerHead& head, const std::string& text, const Event& done) {
  return TextResponse(req, boost::beast::http::status::ok, CompletionBody(head, text, done.finish_reason, done.usage));
}

std::string StreamEvent(const AnswerHead& head, const Event& e, bool first_delta) {
  switch (e.kind) {
    case Event::Kind::kDelta: return StreamDelta(head, e.text, first_delta);
    case Event::Kind::kDone: return StreamFinal(head, e.finish_reason, e.usage);
    case Event::Kind::kError: return StreamError(e.error);
  }
  return {};
}

io::Task<std::optional<Event>> NextEvent(CallChannel& channel, std::chrono::steady_clock::time_point deadline) {
  while (channel.Empty()) {
    if (std::chrono::steady_clock::now() >= deadline) co_return std::nullopt;
    boost::system::error_code ec;
    channel.timer.expires_at(deadline);
    co_await channel.timer.async_wait(net::redirect_error(io::use_task, ec));
  }
  co_return channel.Pop();
}

void Sink::Post(Event e) {
  if (channel_.expired()) return;  // the connection is gone
  std::lock_guard<std::mutex> lock(gate_->mu);
  if (!gate_->open) return;  // the server has stopped
  // On the server's own thread (a gateway's instance links share it) the
  // event is delivered at once; from a service thread it is posted.
  net::dispatch(gate_->ex, [weak = channel_, e = std::move(e)]() mutable {
    const std::shared_ptr<CallChannel> channel = weak.lock();
    if (channel == nullptr) return;  // the connection is gone
    channel->Push(std::move(e));
    channel->timer.cancel();
  });
}

}  // namespace talaria::http_front
