#include "server/redis_session_store.h"

#include <hiredis/hiredis.h>
#include <sys/time.h>
#include <xxhash.h>

#include <charconv>
#include <cmath>
#include <initializer_list>
#include <string_view>

#include "core/error.h"
#include "core/hex.h"

namespace talaria {
namespace {

using ReplyPtr = std::unique_ptr<redisReply, void (*)(void*)>;

// Redis' clock in milliseconds, inside a script.
#define TALARIA_REDIS_NOW                                 \
  "local t = redis.call('TIME')\n"                        \
  "local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)\n"

// KEYS: session, lease. The record (nil when none) with the completion's
// age, and the lease's remaining milliseconds (-1: none), the lease taken.
constexpr const char* kTakeScript = TALARIA_REDIS_NOW
    "local r = redis.call('HMGET', KEYS[1], 'instance', 'model', 'kv', 'ctx_len', 'ctx_hash', 'done_ms')\n"
    "if not r[1] then return false end\n"
    "local left = redis.call('PTTL', KEYS[2])\n"
    "if left > 0 then redis.call('DEL', KEYS[2]) else left = -1 end\n"
    "return {r[1], r[2], r[3], r[4], r[5], tostring(now - tonumber(r[6])), left}\n";

// KEYS: session, lease. ARGV: instance, model, kv, ctx_len, ctx_hash,
// lease_ms (0: none), keep_ms, age_ms.
constexpr const char* kCompleteScript = TALARIA_REDIS_NOW
    "redis.call('HSET', KEYS[1], 'instance', ARGV[1], 'model', ARGV[2], 'kv', ARGV[3], 'ctx_len', ARGV[4],\n"
    "           'ctx_hash', ARGV[5], 'done_ms', now - tonumber(ARGV[8]))\n"
    "redis.call('PEXPIRE', KEYS[1], ARGV[7])\n"
    "if tonumber(ARGV[6]) > 0 then redis.call('SET', KEYS[2], ARGV[1], 'PX', ARGV[6])\n"
    "else redis.call('DEL', KEYS[2]) end\n"
    "return 1\n";

// KEYS: lease set. ARGV: member, lease_ms. The set itself outlives its
// latest lease by a minute.
constexpr const char* kLeaseAddScript = TALARIA_REDIS_NOW
    "redis.call('ZADD', KEYS[1], now + tonumber(ARGV[2]), ARGV[1])\n"
    "local keep = tonumber(ARGV[2]) + 60000\n"
    "if redis.call('PTTL', KEYS[1]) < keep then redis.call('PEXPIRE', KEYS[1], keep) end\n"
    "return 1\n";

// KEYS: lease set. Sweeps the expired, counts the rest.
constexpr const char* kCountScript = TALARIA_REDIS_NOW
    "redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)\n"
    "return redis.call('ZCARD', KEYS[1])\n";

enum Script : std::size_t { kTake, kComplete, kLeaseAdd, kCount, kScripts };
constexpr const char* kScriptText[kScripts] = {kTakeScript, kCompleteScript, kLeaseAddScript, kCountScript};

std::string SessionHash(std::string_view session) {
  const XXH128_hash_t h = XXH3_128bits(session.data(), session.size());
  std::string out;
  AppendHex64(out, h.high64);
  AppendHex64(out, h.low64);
  return out;
}

// A session's keys from its hash (SessionHash): the hash tag is the hash.
std::string SessionKeyOf(const std::string& hash) { return "talaria:s:{" + hash + "}"; }
std::string LeaseKeyOf(const std::string& hash) { return "talaria:l:{" + hash + "}"; }

timeval ToTimeval(double seconds) {
  timeval tv{};
  tv.tv_sec = static_cast<time_t>(seconds);
  tv.tv_usec = static_cast<suseconds_t>((seconds - static_cast<double>(tv.tv_sec)) * 1e6);
  return tv;
}

template <typename T>
bool ParseNumber(const redisReply* r, T& out) {
  if (r == nullptr) return false;
  if (r->type == REDIS_REPLY_INTEGER) {
    out = static_cast<T>(r->integer);
    return true;
  }
  if (r->type != REDIS_REPLY_STRING) return false;
  const auto res = std::from_chars(r->str, r->str + r->len, out);
  return res.ec == std::errc() && res.ptr == r->str + r->len;
}

std::string Text(const redisReply* r) {
  return r != nullptr && r->type == REDIS_REPLY_STRING ? std::string(r->str, r->len) : std::string();
}

}  // namespace

bool ParseRedisUrl(const std::string& url, RedisAddress& out, std::string& error) {
  constexpr std::string_view kScheme = "redis://";
  if (url.rfind(kScheme, 0) != 0) {
    error = "must start with redis:// (redis://[[USER]:PASSWORD@]HOST[:PORT][/DB])";
    return false;
  }
  std::string rest = url.substr(kScheme.size());
  if (const auto at = rest.rfind('@'); at != std::string::npos) {
    // ":PASSWORD" (the default user) or "USER:PASSWORD" (an ACL user).
    const std::string auth = rest.substr(0, at);
    const auto colon = auth.find(':');
    if (colon == std::string::npos) {
      error = "credentials must be :PASSWORD or USER:PASSWORD before the @";
      return false;
    }
    out.user = auth.substr(0, colon);
    out.password = auth.substr(colon + 1);
    rest.erase(0, at + 1);
  }
  if (const auto slash = rest.find('/'); slash != std::string::npos) {
    const std::string db = rest.substr(slash + 1);
    const auto res = std::from_chars(db.data(), db.data() + db.size(), out.db);
    if (db.empty() || res.ec != std::errc() || res.ptr != db.data() + db.size() || out.db < 0 || out.db > 15) {
      error = "database '" + db + "' must be a number from 0 to 15";
      return false;
    }
    rest.erase(slash);
  }
  if (const auto colon = rest.rfind(':'); colon != std::string::npos) {
    const std::string port = rest.substr(colon + 1);
    const auto res = std::from_chars(port.data(), port.data() + port.size(), out.port);
    if (port.empty() || res.ec != std::errc() || res.ptr != port.data() + port.size() || out.port < 1 ||
        out.port > 65535) {
      error = "port '" + port + "' must be a number from 1 to 65535";
      return false;
    }
    rest.erase(colon);
  }
  if (rest.empty()) {
    error = "names no host";
    return false;
  }
  out.host = rest;
  return true;
}

std::unique_ptr<SessionStore> MakeSessionStore(const std::string& url, double timeout_s, double time_scale,
                                               const std::string& field) {
  RedisAddress address;
  std::string error;
  if (!ParseRedisUrl(url, address, error)) throw InputError(field, "'" + url + "' " + error);
  return std::make_unique<RedisSessionStore>(std::move(address), timeout_s, time_scale);
}

struct RedisSessionStore::Connection {
  redisContext* ctx = nullptr;
  int unread = 0;  // replies of commands sent without waiting: skipped first
  std::string sha[kScripts];

  ~Connection() {
    if (ctx != nullptr) redisFree(ctx);
  }
  void Append(std::initializer_list<std::string_view> args) {
    const char* argv[16];
    std::size_t len[16];
    std::size_t n = 0;
    for (std::string_view a : args) {
      argv[n] = a.data();
      len[n++] = a.size();
    }
    redisAppendCommandArgv(ctx, static_cast<int>(n), argv, len);
  }
  // Sends what was appended without waiting for the answers.
  bool Flush() {
    int done = 0;
    while (done == 0) {
      if (redisBufferWrite(ctx, &done) != REDIS_OK) return false;
    }
    return true;
  }
  // The next reply (sending what was appended first); null on an error or
  // a timeout (the connection is then unusable).
  ReplyPtr Read() {
    while (unread > 0) {
      void* skipped = nullptr;
      if (redisGetReply(ctx, &skipped) != REDIS_OK) return ReplyPtr(nullptr, freeReplyObject);
      freeReplyObject(skipped);
      --unread;
    }
    void* reply = nullptr;
    if (redisGetReply(ctx, &reply) != REDIS_OK) return ReplyPtr(nullptr, freeReplyObject);
    return ReplyPtr(static_cast<redisReply*>(reply), freeReplyObject);
  }
  // A reply that is neither missing nor an error.
  ReplyPtr ReadOk() {
    ReplyPtr r = Read();
    if (r && r->type == REDIS_REPLY_ERROR) r.reset();
    return r;
  }
};

RedisSessionStore::RedisSessionStore(RedisAddress address, double timeout_s, double time_scale)
    : address_(std::move(address)), timeout_s_(timeout_s), time_scale_(time_scale) {}

RedisSessionStore::~RedisSessionStore() = default;

std::string RedisSessionStore::Describe() const {
  return "redis://" + address_.host + ":" + std::to_string(address_.port) + "/" + std::to_string(address_.db);
}

std::string RedisSessionStore::SessionKey(std::string_view session) { return SessionKeyOf(SessionHash(session)); }
std::string RedisSessionStore::LeaseKey(std::string_view session) { return LeaseKeyOf(SessionHash(session)); }
std::string RedisSessionStore::LeaseSetKey(std::string_view instance, std::string_view model) {
  return "talaria:ll:{" + std::string(instance) + "}:" + std::string(model);
}

std::int64_t RedisSessionStore::WallMs(double seconds) const {
  if (!(seconds > 0)) return 0;
  return std::max<std::int64_t>(1, std::llround(seconds / time_scale_ * 1000));
}

std::unique_ptr<RedisSessionStore::Connection> RedisSessionStore::Borrow() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!free_.empty()) {
      auto c = std::move(free_.back());
      free_.pop_back();
      return c;
    }
  }
  auto c = std::make_unique<Connection>();
  c->ctx = redisConnectWithTimeout(address_.host.c_str(), address_.port, ToTimeval(timeout_s_));
  if (c->ctx == nullptr || c->ctx->err != 0 || redisSetTimeout(c->ctx, ToTimeval(timeout_s_)) != REDIS_OK) return nullptr;
  if (!address_.password.empty()) {
    if (address_.user.empty()) {
      c->Append({"AUTH", address_.password});
    } else {
      c->Append({"AUTH", address_.user, address_.password});
    }
    if (!c->ReadOk()) return nullptr;
  }
  if (address_.db != 0) {
    const std::string db = std::to_string(address_.db);
    c->Append({"SELECT", db});
    if (!c->ReadOk()) return nullptr;
  }
  for (std::size_t s = 0; s < kScripts; ++s) c->Append({"SCRIPT", "LOAD", kScriptText[s]});
  for (std::size_t s = 0; s < kScripts; ++s) {
    ReplyPtr r = c->ReadOk();
    if (!r || r->type != REDIS_REPLY_STRING) return nullptr;
    c->sha[s] = Text(r.get());
  }
  return c;
}

SessionStore::Status RedisSessionStore::Failed() {
  // One connection failing means the others are likely dead too (a Redis
  // restart closes them all): the next operation connects afresh.
  std::vector<std::unique_ptr<Connection>> stale;
  {
    std::lock_guard<std::mutex> lock(mu_);
    stale.swap(free_);
  }
  return Status::kUnavailable;
}

void RedisSessionStore::Return(std::unique_ptr<Connection> c) {
  std::lock_guard<std::mutex> lock(mu_);
  free_.push_back(std::move(c));
}

void RedisSessionStore::ParseTake(const redisReply* r, StoreOp& op) const {
  op.found = false;
  if (r->type == REDIS_REPLY_NIL) return;
  SessionRecord& rec = op.record;
  std::int64_t age_ms = 0;
  std::int64_t left_ms = -1;
  if (r->type != REDIS_REPLY_ARRAY || r->elements != 7 || !ParseNumber(r->element[2], rec.kv_tokens) ||
      !ParseNumber(r->element[3], rec.context_tokens) || !ParseNumber(r->element[4], rec.context_hash) ||
      !ParseNumber(r->element[5], age_ms) || !ParseNumber(r->element[6], left_ms)) {
    // Not what this version writes: no record (it is replaced at the
    // session's next completion).
    return;
  }
  op.found = true;
  rec.instance = Text(r->element[0]);
  rec.model = Text(r->element[1]);
  rec.done_age_s = static_cast<double>(std::max<std::int64_t>(0, age_ms)) / 1000 * time_scale_;
  rec.lease = left_ms > 0;
  rec.lease_left_s = rec.lease ? static_cast<double>(left_ms) / 1000 * time_scale_ : 0;
}

SessionStore::Status RedisSessionStore::Run(std::span<StoreOp> ops) {
  auto c = Borrow();
  if (!c) return Failed();
  // Every operation's commands first (one write), then every answer.
  std::vector<std::string> hashes;  // each session's, once: its keys and its lease-set member
  hashes.reserve(ops.size());
  for (const StoreOp& op : ops) {
    const std::string& hash = hashes.emplace_back(SessionHash(op.session));
    const std::string skey = SessionKeyOf(hash);
    const std::string lkey = LeaseKeyOf(hash);
    const SessionRecord& rec = op.record;
    switch (op.kind) {
      case StoreOp::Kind::kTake:
        c->Append({"EVALSHA", c->sha[kTake], "2", skey, lkey});
        break;
      case StoreOp::Kind::kComplete: {
        const std::string kv = std::to_string(rec.kv_tokens);
        const std::string ctx_len = std::to_string(rec.context_tokens);
        const std::string ctx_hash = std::to_string(rec.context_hash);
        const std::int64_t lease_ms = WallMs(op.lease_s);
        const std::string lease = std::to_string(lease_ms);
        const std::string keep = std::to_string(std::max<std::int64_t>(1000, WallMs(op.keep_s)));
        const std::string age = std::to_string(WallMs(rec.done_age_s));
        c->Append({"EVALSHA", c->sha[kComplete], "2", skey, lkey, rec.instance, rec.model, kv, ctx_len, ctx_hash,
                   lease, keep, age});
        if (lease_ms > 0) {
          c->Append({"EVALSHA", c->sha[kLeaseAdd], "1", LeaseSetKey(rec.instance, rec.model),
                     hash, lease});
        }
        break;
      }
      case StoreOp::Kind::kEnd:
        c->Append({"DEL", skey, lkey});
        c->Append({"ZREM", LeaseSetKey(rec.instance, rec.model), hash});
        break;
    }
  }
  for (StoreOp& op : ops) {
    const std::size_t n = Replies(op);
    for (std::size_t k = 0; k < n; ++k) {
      ReplyPtr r = c->ReadOk();
      if (!r) return Failed();
      if (k == 0 && op.kind == StoreOp::Kind::kTake) ParseTake(r.get(), op);
    }
  }
  // Taken leases leave their pairs' counts; those answers are read (and
  // dropped) before this connection's next ones.
  int released = 0;
  for (std::size_t i = 0; i < ops.size(); ++i) {
    const StoreOp& op = ops[i];
    if (op.kind != StoreOp::Kind::kTake || !op.found || !op.record.lease) continue;
    c->Append({"ZREM", LeaseSetKey(op.record.instance, op.record.model), hashes[i]});
    ++released;
  }
  if (released > 0) {
    if (!c->Flush()) {
      Failed();
      return Status::kOk;  // the takes themselves succeeded; the connection goes
    }
    c->unread += released;
  }
  Return(std::move(c));
  return Status::kOk;
}

std::size_t RedisSessionStore::Replies(const StoreOp& op) const {
  switch (op.kind) {
    case StoreOp::Kind::kTake: return 1;
    case StoreOp::Kind::kComplete: return WallMs(op.lease_s) > 0 ? 2 : 1;
    case StoreOp::Kind::kEnd: return 2;
  }
  return 1;
}

SessionStore::Status RedisSessionStore::CountLeases(std::vector<LeaseCount>& pairs) {
  auto c = Borrow();
  if (!c) return Failed();
  std::vector<std::string> keys;
  keys.reserve(pairs.size());
  for (const auto& p : pairs) {
    keys.push_back(LeaseSetKey(p.instance, p.model));
    c->Append({"EVALSHA", c->sha[kCount], "1", keys.back()});
  }
  for (auto& p : pairs) {
    ReplyPtr r = c->ReadOk();
    if (!r || !ParseNumber(r.get(), p.live)) return Failed();
  }
  Return(std::move(c));
  return Status::kOk;
}

SessionStore::Status RedisSessionStore::Ping() {
  auto c = Borrow();
  if (!c) return Failed();
  c->Append({"PING"});
  if (!c->ReadOk()) return Failed();
  Return(std::move(c));
  return Status::kOk;
}

}  // namespace talaria
