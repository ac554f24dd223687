#include <utility>  // before Boost 1.74's asio (see http_server.cc)

#include "server/link_client.h"

#include <boost/asio.hpp>
#include <boost/beast.hpp>
#include <unordered_map>
#include <vector>

#include "server/io_loop.h"
#include "server/link_frames.h"
#include "server/openai_encode.h"

namespace talaria {
namespace {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using link::AppendFrame;
using link::FrameType;

}  // namespace

// One upgraded connection and the calls it carries (the I/O thread's).
struct LinkClient::Conn {
  Conn(io::Executor ex, std::size_t max_frame_bytes) : stream(ex), ping(ex), reader(max_frame_bytes) {}
  io::Stream stream;
  io::Timer ping;
  link::FrameReader reader;
  struct Call {
    std::int64_t id;       // the gateway's
    bool written = false;  // its frame went out whole
  };
  std::unordered_map<std::uint64_t, Call> calls;  // by wire id
  std::string pending;                            // frames waiting for the write in flight (or the upgrade)
  std::vector<std::uint64_t> queued;              // the calls whose frames `pending` holds
  std::string out;                                // the write in flight
  std::vector<std::uint64_t> sending;             // the calls whose frames `out` holds
  bool open = false;                              // upgraded
  bool writing = false;
  bool retiring = false;  // the instance drains: no new calls here
  bool dead = false;      // failed or closed
  bool wrote = false;     // since the last ping period began
};

LinkClient::LinkClient(io::Executor ex, boost::asio::ip::tcp::endpoint endpoint, std::string host_header,
                       LinkClientOptions options, LinkCallEvents& events)
    : ex_(std::move(ex)),
      endpoint_(endpoint),
      host_header_(std::move(host_header)),
      options_(std::move(options)),
      events_(events) {}

LinkClient::~LinkClient() = default;

LinkClient::Ticket LinkClient::Submit(const LinkCall& call) {
  if (current_ == nullptr || current_->retiring || current_->dead) {
    current_ = std::make_shared<Conn>(ex_, options_.max_frame_bytes);
    net::co_spawn(ex_, Run(current_), net::detached);
  }
  Conn& c = *current_;
  const std::uint64_t wire = next_wire_id_++;
  c.calls.emplace(wire, Conn::Call{call.id});
  const std::string body = TokenCompletionBody(call.model, call.prompt, call.max_tokens, call.stream, call.session_id);
  link::AppendCall(c.pending, wire, {call.session_end, call.expected_tool_s, call.api_key, body});
  c.queued.push_back(wire);
  Flush(current_);
  return {current_, wire};
}

bool LinkClient::Cancel(const Ticket& ticket) {
  const std::shared_ptr<Conn> c = ticket.conn.lock();
  if (c == nullptr || c->dead) return false;
  auto it = c->calls.find(ticket.wire_id);
  if (it == c->calls.end()) return false;
  c->calls.erase(it);
  // The instance frees the call's slot and KV (closing a retiring link
  // with nothing left on it does so too).
  AppendFrame(c->pending, FrameType::kCancel, ticket.wire_id);
  Flush(c);
  if (c->retiring && c->calls.empty()) Fail(*c, "retired", false);
  return true;
}

// Writes what is pending unless a write is in flight (its completion
// writes what came meanwhile: the frames of calls placed together go out
// in one write).
void LinkClient::Flush(const std::shared_ptr<Conn>& c) {
  if (!c->open || c->writing || c->dead || c->pending.empty()) return;
  c->out.swap(c->pending);
  c->sending.swap(c->queued);
  c->writing = true;
  c->wrote = true;
  c->stream.expires_after(WallSeconds(options_.write_timeout_s));
  net::async_write(c->stream, net::buffer(c->out), [this, c](boost::system::error_code ec, std::size_t) {
    c->writing = false;
    if (c->dead) return;
    if (ec) return Fail(*c, "sending to " + host_header_ + ": " + ec.message(), ec == beast::error::timeout);
    for (const std::uint64_t wire : c->sending) {
      if (auto it = c->calls.find(wire); it != c->calls.end()) it->second.written = true;
    }
    c->sending.clear();
    c->out.clear();
    Flush(c);
  });
}

// A ping in every period nothing else went out.
void LinkClient::SchedulePing(const std::shared_ptr<Conn>& c) {
  c->ping.expires_after(WallSeconds(options_.ping_s));
  c->ping.async_wait([this, c](boost::system::error_code ec) {
    if (ec || c->dead) return;
    if (!c->wrote) {
      AppendFrame(c->pending, FrameType::kPing, 0);
      Flush(c);
    }
    c->wrote = false;
    SchedulePing(c);
  });
}

void LinkClient::Fail(Conn& c, const std::string& why, bool timed_out, bool unsupported) {
  if (c.dead) return;
  c.dead = true;
  if (current_.get() == &c) current_.reset();
  boost::system::error_code ec;
  c.ping.cancel();
  c.stream.socket().close(ec);
  auto calls = std::move(c.calls);
  c.calls.clear();
  for (const auto& [wire, call] : calls) events_.Failed(call.id, {why, call.written, timed_out, unsupported});
}

void LinkClient::Retire(Conn& c) {
  c.retiring = true;
  if (current_.get() == &c) current_.reset();
  if (c.calls.empty()) Fail(c, "retired", false);
}

io::Task<bool> LinkClient::Upgrade(Conn& c) {
  boost::system::error_code ec;
  c.stream.expires_after(WallSeconds(options_.connect_timeout_s));
  co_await c.stream.async_connect(endpoint_, net::redirect_error(io::use_task, ec));
  if (ec) {
    Fail(c, "connect to " + host_header_ + ": " + ec.message(), false);
    co_return false;
  }
  c.stream.socket().set_option(net::ip::tcp::no_delay(true), ec);
  std::string req = "GET ";
  req.append(link::kPath).append(" HTTP/1.1\r\nHost: ").append(host_header_);
  req.append("\r\nUser-Agent: talaria-gateway\r\nConnection: Upgrade\r\nUpgrade: ").append(link::kProtocol);
  req.append("\r\n").append(kKeepaliveHeader).append(": ").append(std::to_string(options_.ping_s)).append("\r\n");
  if (!options_.key.empty()) req.append("Authorization: Bearer ").append(options_.key).append("\r\n");
  req.append("\r\n");
  co_await net::async_write(c.stream, net::buffer(req), net::redirect_error(io::use_task, ec));
  beast::flat_buffer buffer;
  http::response_parser<http::string_body> answer;
  answer.body_limit(64 * 1024);
  if (!ec) {
    c.stream.expires_after(WallSeconds(options_.silence_s > 0 ? options_.silence_s : options_.write_timeout_s));
    co_await http::async_read_header(c.stream, buffer, answer, net::redirect_error(io::use_task, ec));
  }
  if (!ec && answer.get().result_int() != 101 && !answer.is_done()) {
    co_await http::async_read(c.stream, buffer, answer, net::redirect_error(io::use_task, ec));
  }
  if (ec) {
    Fail(c, "opening the link to " + host_header_ + ": " + ec.message(), false);
    co_return false;
  }
  if (const int status = answer.get().result_int(); status != 101) {
    const ApiError e = ApiError::FromResponse(status, answer.get().body());
    // Not a refusal of this gateway (a key, a drain) but of the protocol:
    // the path or method is unknown there, or the Upgrade header was lost
    // on the way.
    const bool unsupported =
        status == 404 || status == 405 || status == 501 || (status == 400 && e.code == "bad_upgrade");
    Fail(c, "it refused the link (" + std::to_string(status) + "): " + e.message, false, unsupported);
    co_return false;
  }
  const auto* bytes = static_cast<const char*>(buffer.data().data());
  std::copy(bytes, bytes + buffer.size(), c.reader.Prepare(buffer.size()));  // frames right behind the answer
  c.reader.Commit(buffer.size());
  co_return true;
}

io::Task<void> LinkClient::Run(std::shared_ptr<Conn> c) {
  if (!co_await Upgrade(*c)) co_return;
  c->open = true;
  Flush(c);
  SchedulePing(c);
  boost::system::error_code ec;
  for (;;) {
    HandleFrames(*c);
    if (c->dead) break;
    if (c->reader.Failed()) {
      Fail(*c, "it broke the link protocol: " + c->reader.error(), false);
      break;
    }
    if (options_.silence_s > 0) {
      c->stream.expires_after(WallSeconds(options_.silence_s));
    } else {
      c->stream.expires_never();
    }
    const std::size_t n = co_await c->stream.async_read_some(
        net::buffer(c->reader.Prepare(link::kReadBytes), link::kReadBytes), net::redirect_error(io::use_task, ec));
    if (ec) {
      const bool hung = ec == beast::error::timeout;
      Fail(
          *c,
          hung ? "no byte for " + std::to_string(options_.silence_s) + " s (hung?)" : "the link broke: " + ec.message(),
          hung);
      break;
    }
    c->reader.Commit(n);
  }
}

void LinkClient::HandleFrames(Conn& c) {
  while (!c.dead) {
    const std::optional<link::Frame> f = c.reader.Next();
    if (!f) return;
    if (f->type == FrameType::kPing) continue;
    if (f->type == FrameType::kError && f->id == 0) {  // the instance drains
      Retire(c);
      continue;
    }
    if (f->type != FrameType::kDelta && f->type != FrameType::kDone && f->type != FrameType::kError) {
      return Fail(c, "it sent a frame of type " + std::to_string(static_cast<int>(f->type)), false);
    }
    auto it = c.calls.find(f->id);
    if (it == c.calls.end()) continue;  // cancelled
    const std::int64_t id = it->second.id;
    if (f->type == FrameType::kDelta) {
      events_.Delta(id, f->payload);
      continue;
    }
    c.calls.erase(it);
    if (f->type == FrameType::kDone) {
      Usage usage;
      std::string finish_reason;
      if (!link::ReadDone(f->payload, usage, finish_reason)) {
        events_.Failed(id, {"it sent a malformed final frame", true, false});
        return Fail(c, "it sent a malformed final frame", false);
      }
      events_.Done(id, usage, finish_reason);
    } else {
      events_.Answered(id, ApiError::FromResponse(502, f->payload));
    }
    if (c.retiring && c.calls.empty()) Fail(c, "retired", false);
  }
}

}  // namespace talaria
