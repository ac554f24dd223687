// The gateway's end of the instance link (server/link_frames.h): the calls
// a gateway places on one instance share one upgraded connection instead of
// one HTTP exchange each (RemoteInstanceLink uses it unless
// upstream_protocol = "http").
//
// The connection opens on the first call (GET /v1/link, Upgrade:
// talaria-link/1, the operator key) and is kept. Calls placed while it
// opens wait for it; frames of calls placed together go out in one write.
// Both sides ping in every keep-alive period they have nothing else to
// send, so with keep-alives on, silence_s without a byte means a hung
// instance.
//
// Failures, as RemoteInstanceLink's (server/remote_instance.h): the link
// cannot be opened or upgraded, or goes silent (hung): the calls on it fail
// undelivered or timed out (503 instance_unreachable, retried elsewhere);
// an upgrade refused as unknown (404, 405, 501, or 400 bad_upgrade: the
// Upgrade header did not reach the instance) fails them as unsupported;
// it breaks after a call's frame went out whole: that call fails delivered
// (502 instance_failed, never retried). A draining instance says so on the
// link (an error frame of call 0): no new call goes on that connection, a
// fresh one is opened for the next (which a draining server refuses), and
// the old one closes when its calls have ended.
//
// Everything here runs on the I/O thread of `ex`.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include <boost/asio/ip/tcp.hpp>

#include "server/asio_io.h"
#include "server/instance_link.h"
#include "server/openai_api.h"

namespace talaria {

// Why the link ended a call it could not finish.
struct LinkFailure {
  std::string why;
  bool delivered = false;  // its frame went out whole: the instance may have taken it
  bool timed_out = false;  // silence, not a close, ended it
  // The instance does not offer the link (it predates it, or a proxy on
  // the way dropped the upgrade): the call never went out, and may go over
  // HTTP instead.
  bool unsupported = false;
};

// What the link hears of its calls, named by the gateway's call ids.
class LinkCallEvents {
 public:
  virtual ~LinkCallEvents() = default;
  virtual void Delta(std::int64_t id, std::string_view text) = 0;
  virtual void Done(std::int64_t id, const Usage& usage, const std::string& finish_reason) = 0;
  virtual void Answered(std::int64_t id, const ApiError& error) = 0;  // the instance ended it with an error
  virtual void Failed(std::int64_t id, const LinkFailure& failure) = 0;
};

struct LinkClientOptions {
  double connect_timeout_s = 1.0;
  double ping_s = 1.0;     // both sides' ping period (0.1 to 60)
  double silence_s = 5.0;  // no byte for this long: hung (0: no bound)
  double write_timeout_s = 30;
  std::string key;  // bearer key of the upgrade (the operator's)
  std::size_t max_frame_bytes = 64ull << 20;
};

class LinkClient {
 public:
  struct Conn;
  // Where a call went, for Cancel.
  struct Ticket {
    std::weak_ptr<Conn> conn;
    std::uint64_t wire_id = 0;
  };

  LinkClient(io::Executor ex, boost::asio::ip::tcp::endpoint endpoint, std::string host_header,
             LinkClientOptions options, LinkCallEvents& events);
  ~LinkClient();
  LinkClient(const LinkClient&) = delete;
  LinkClient& operator=(const LinkClient&) = delete;

  // Places `call` on the current connection (opening one when there is
  // none, or it is retiring or broken).
  Ticket Submit(const LinkCall& call);
  // Drops a call in flight and tells the instance; false when it had ended.
  bool Cancel(const Ticket& ticket);

 private:
  io::Task<void> Run(std::shared_ptr<Conn> c);
  io::Task<bool> Upgrade(Conn& c);
  void HandleFrames(Conn& c);
  void Flush(const std::shared_ptr<Conn>& c);
  void SchedulePing(const std::shared_ptr<Conn>& c);
  void Fail(Conn& c, const std::string& why, bool timed_out, bool unsupported = false);
  void Retire(Conn& c);

  io::Executor ex_;
  boost::asio::ip::tcp::endpoint endpoint_;
  std::string host_header_;
  LinkClientOptions options_;
  LinkCallEvents& events_;
  std::shared_ptr<Conn> current_;
  std::uint64_t next_wire_id_ = 1;
};

}  // namespace talaria
