// A gateway replica's use of the shared session store (server/session_store.h,
// docs/serving.md "Gateway replicas"): what it reads before routing a
// session's call, what it writes after a completion, the heartbeat's lease
// counts, and what happens when the store fails.
//
// Failure: an operation the store does not answer within its timeout falls
// back to the replica's local state (its router keeps every session it
// served) and marks the store down; while down, calls do not wait on it at
// all, completions are kept (bounded, max_pending) instead of written, and
// each heartbeat probes the store. When it answers again the kept records
// are written (each lease with what is left of it) before the replica uses
// the store again: it resynchronises. Every outcome is counted in /metrics.
//
// Thread-safe. Without a store every method does nothing.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/time.h"
#include "server/metrics.h"
#include "server/session_store.h"

namespace talaria {

class SharedSessions {
 public:
  // `lease_tau_s`: the lease a completion installs (0: none); `keep_s`: how
  // long a record outlives its session's last completion. Gateway seconds.
  SharedSessions(std::unique_ptr<SessionStore> store, double lease_tau_s, double keep_s,
                 std::size_t max_pending = 100'000);
  bool enabled() const { return store_ != nullptr; }
  bool up() const { return up_.load(); }
  std::string Describe() const { return store_ ? store_->Describe() : std::string(); }

  // Before a session's call is first placed: its shared record, its lease
  // taken (now the caller's). nullopt when the store has none, is down or
  // is not configured.
  std::optional<SessionRecord> Take(const std::string& session);
  // A call of the session completed at `now`: its record and lease.
  void Complete(const std::string& session, SessionRecord record, TimePoint now);
  // The session ended (a client hint); `last` names its last instance and model.
  void End(const std::string& session, const SessionRecord& last);
  // The heartbeat: while the store is down, probes it and resynchronises
  // when it answers; then counts the live leases of every pair in `pairs`.
  // False when the store did not answer (the counts are then untouched).
  bool Refresh(std::vector<LeaseCount>& pairs, TimePoint now);

  // The talaria_state_* families (nothing without a store).
  void RenderMetrics(std::string& out) const;

 private:
  enum Op : std::size_t { kTake, kComplete, kEnd, kCount, kOps };
  enum Result : std::size_t { kOk, kFailed, kSkipped, kResults };
  struct Pending {
    SessionRecord record;
    TimePoint done;
    bool ended = false;
  };
  void Count(Op op, Result r) { ops_[op][r].fetch_add(1, std::memory_order_relaxed); }
  // An operation failed: the store is down until a heartbeat finds it back.
  void MarkDown();
  // Keeps a completion or an end for the resync (the lock held).
  void KeepLocked(const std::string& session, Pending p);
  // Writes what was kept while the store was down; false if it failed again.
  bool Resync(TimePoint now);

  std::unique_ptr<SessionStore> store_;
  double lease_tau_s_;
  double keep_s_;
  std::size_t max_pending_;
  std::atomic<bool> up_{true};
  mutable std::mutex mu_;  // guards pending_; up_ turns true only under it
  std::unordered_map<std::string, Pending> pending_;
  std::atomic<std::uint64_t> ops_[kOps][kResults]{};
  std::atomic<std::uint64_t> leases_taken_{0};
  std::atomic<std::uint64_t> resynced_{0};
  std::atomic<std::uint64_t> pending_dropped_{0};
  Histogram take_s_;
};

}  // namespace talaria
