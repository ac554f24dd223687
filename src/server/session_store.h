// The session state gateway replicas share (docs/serving.md "Gateway
// replicas"): per session, its last completion (instance, model, KV length,
// a fingerprint of its context) and its successor lease; per (instance,
// model), how many leases are live. The Redis implementation is
// server/redis_session_store.h; without `[serve] state` a gateway keeps all
// of it in its own router and uses no store.
//
// Every operation either completes or reports kUnavailable within the
// store's timeout; the caller then falls back to its local state
// (server/shared_sessions.h). Durations are in the gateway's seconds (its
// timeline: emulated seconds under serve.time_scale); a store converts
// them to its own clock. Sessions are named by their scoped id (the API
// key's scope, then the client's id), so two keys never share a record.
//
// Implementations are thread-safe.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace talaria {

// One session's shared record.
struct SessionRecord {
  std::string instance;  // the instance that served the last call (its name)
  std::string model;
  std::int64_t kv_tokens = 0;  // the session's context length there
  // The previous context's length and XXH3-64 of its token ids: a replica
  // that never saw the session finds its reusable prefix by hashing as many
  // leading tokens of the new prompt.
  std::int64_t context_tokens = 0;
  std::uint64_t context_hash = 0;
  double done_age_s = 0;  // seconds since that completion (Take's answer)
  // The successor lease: Take's answer says whether one was live (and is
  // now the caller's), and for how long more.
  bool lease = false;
  double lease_left_s = 0;
};

// SessionRecord::context_hash of a context of token ids (XXH3-64 of their
// bytes): what a replica compares with the same many leading prompt tokens.
std::uint64_t ContextFingerprint(std::span<const std::int32_t> tokens);

// One operation of a batch (SessionStore::Run).
struct StoreOp {
  enum class Kind : std::uint8_t {
    kTake,      // the session's record (into `record`, `found`), its live lease taken
    kComplete,  // writes `record`; its lease lives lease_s; the record keep_s
    kEnd,       // removes the session's record and lease (`record` names its last pair)
  };
  Kind kind = Kind::kTake;
  std::string session;
  SessionRecord record;
  bool found = false;  // kTake: the session had a record
  double lease_s = 0;  // kComplete
  double keep_s = 0;   // kComplete
};

// Live leases on one (instance, model).
struct LeaseCount {
  std::string instance;
  std::string model;
  std::int32_t live = 0;
};

class SessionStore {
 public:
  enum class Status { kOk, kUnavailable };
  virtual ~SessionStore() = default;

  // Runs `ops` in order, pipelined: one round trip for all of them.
  //   kTake: the session's record (found = false when it has none), and its
  //     live lease, taken: a lease is handed to one caller only, ever.
  //   kComplete: the record replaces the old one, and its lease (lease_s >
  //     0) lives lease_s; the record outlives its last completion by keep_s.
  //     `record.done_age_s` > 0 back-dates the completion (a record written
  //     late, after an outage).
  //   kEnd: the session ended (a client hint): its record and lease go.
  // kUnavailable when not every answer came: the outcomes are then unknown
  // (each operation may or may not have taken effect; all are idempotent
  // except a take, whose lease is then lost: a recomputation at worst).
  virtual Status Run(std::span<StoreOp> ops) = 0;
  // The live leases on each (instance, model) of `pairs` (their `live`
  // fields are filled in), expired ones swept.
  virtual Status CountLeases(std::vector<LeaseCount>& pairs) = 0;
  // Whether the store answers now (a cheap round trip).
  virtual Status Ping() = 0;
  // Where the store is, for logs and errors ("redis://host:port/db").
  virtual std::string Describe() const = 0;

  // One operation each (Run with a batch of one).
  Status Take(std::string_view session, std::optional<SessionRecord>& out);
  Status Complete(std::string_view session, const SessionRecord& record, double lease_s, double keep_s);
  Status End(std::string_view session, const SessionRecord& last);
};

// The store a `[serve] state` URL names: "redis://[[USER]:PASSWORD@]HOST[:PORT][/DB]"
// (server/redis_session_store.h). `timeout_s` bounds every operation (wall
// seconds); `time_scale` is the gateway's emulated seconds per wall second.
// Throws InputError naming `field` for a URL it cannot use. Connecting is
// lazy: a store that is down now is not an error here.
std::unique_ptr<SessionStore> MakeSessionStore(const std::string& url, double timeout_s, double time_scale,
                                               const std::string& field);

}  // namespace talaria
