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

net::awaitable<std::optional<Event>> NextEvent(CallChannel& channel, std::chrono::steady_clock::time_point deadline) {
  while (channel.events.empty()) {
    if (std::chrono::steady_clock::now() >= deadline) co_return std::nullopt;
    boost::system::error_code ec;
    channel.timer.expires_at(deadline);
    co_await channel.timer.async_wait(net::redirect_error(net::use_awaitable, ec));
  }
  Event e = std::move(channel.events.front());
  channel.events.pop_front();
  co_return e;
}

void Sink::Post(Event e) {
  if (channel_.expired()) return;  // the connection is gone
  std::lock_guard<std::mutex> lock(gate_->mu);
  if (!gate_->open) return;  // the server has stopped
  net::post(gate_->ex, [weak = channel_, e = std::move(e)]() mutable {
    const std::shared_ptr<CallChannel> channel = weak.lock();
    if (channel == nullptr) return;  // the connection is gone
    channel->events.push_back(std::move(e));
    channel->timer.cancel();
  });
}

}  // namespace talaria::http_front
