// The shared session store on Redis (server/session_store.h), through
// hiredis' blocking API with a timeout on every connect, read and write.
//
// Layout (every key of one session carries the same hash tag, so the layout
// works on Redis Cluster; H is the 32-hex XXH3-128 of the scoped session id,
// so ids of any length or bytes make fixed, tenant-distinct keys):
//   talaria:s:{H}              hash: instance, model, kv, ctx_len, ctx_hash,
//                              done_ms (Redis' clock); expires keep_s after
//                              the last completion
//   talaria:l:{H}              the live lease: a string with a millisecond
//                              expiry (tau); taken by GET+DEL in one script
//   talaria:ll:{INSTANCE}:MODEL sorted set of live leases on the pair, scored
//                              by expiry (Redis' clock)
// A take and a completion are one server-side script each; the lease-count
// update that goes with them is pipelined with it (a completion) or written
// after the answer without waiting for its reply (a take). A batch of
// operations (Run) is one write and one round trip, however many calls it
// serves. Times that matter across
// replicas (lease expiry, a completion's age) are read off Redis' clock in
// the scripts, so replicas need no synchronised clocks.
//
// Connections are pooled (one per concurrent caller); a connection that
// errs or times out is closed and the operation reports kUnavailable.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "server/session_store.h"

struct redisContext;
struct redisReply;

namespace talaria {

struct RedisAddress {
  std::string host;
  int port = 6379;
  int db = 0;
  std::string user;  // empty: the default user
  std::string password;
};
// Parses "redis://[[USER]:PASSWORD@]HOST[:PORT][/DB]"; false with `error`
// set when it cannot.
bool ParseRedisUrl(const std::string& url, RedisAddress& out, std::string& error);

class RedisSessionStore final : public SessionStore {
 public:
  RedisSessionStore(RedisAddress address, double timeout_s, double time_scale);
  ~RedisSessionStore() override;
  RedisSessionStore(const RedisSessionStore&) = delete;
  RedisSessionStore& operator=(const RedisSessionStore&) = delete;

  Status Run(std::span<StoreOp> ops) override;
  Status CountLeases(std::vector<LeaseCount>& pairs) override;
  Status Ping() override;
  std::string Describe() const override;

  // The keys of a session (for tests and the docs' examples).
  static std::string SessionKey(std::string_view session);
  static std::string LeaseKey(std::string_view session);
  static std::string LeaseSetKey(std::string_view instance, std::string_view model);

 private:
  struct Connection;
  // A pooled connection (a new one, connected and with the scripts loaded,
  // when none is free); null when Redis cannot be reached.
  std::unique_ptr<Connection> Borrow();
  void Return(std::unique_ptr<Connection> c);
  // Closes every pooled connection; kUnavailable.
  Status Failed();
  std::int64_t WallMs(double seconds) const;
  // How many replies an operation's commands get.
  std::size_t Replies(const StoreOp& op) const;
  // A take's reply into `op`.
  void ParseTake(const redisReply* r, StoreOp& op) const;

  RedisAddress address_;
  double timeout_s_;
  double time_scale_;
  std::mutex mu_;
  std::vector<std::unique_ptr<Connection>> free_;
};

}  // namespace talaria
