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
// Store round trips are never made on the caller's thread while the store
// answers: operations queue for `threads` worker threads of their own, and
// a worker sends everything queued as one pipelined batch (one round trip
// however many calls it serves), then reports each outcome to its callback
// there. While the store is down, or with threads = 0 (tests), operations
// run at once on the caller's thread.
//
// Thread-safe. Without a store every callback runs at once with nothing.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
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
  static constexpr std::size_t kDefaultThreads = 2;
  SharedSessions(std::unique_ptr<SessionStore> store, double lease_tau_s, double keep_s,
                 std::size_t threads = kDefaultThreads,
                 std::size_t max_pending = 100'000);
  ~SharedSessions();
  SharedSessions(const SharedSessions&) = delete;
  SharedSessions& operator=(const SharedSessions&) = delete;
  bool enabled() const { return store_ != nullptr; }
  bool up() const { return up_.load(); }
  std::string Describe() const { return store_ ? store_->Describe() : std::string(); }

  // Before a session's call is first placed: `done` hears its shared record,
  // its lease taken (now the caller's); nullopt when the store has none, is
  // down or is not configured.
  void TakeAsync(std::string session, std::function<void(std::optional<SessionRecord>)> done);
  // A call of the session completed at `now`: writes its record and lease
  // (or keeps them for the resync while the store is down), then `done`.
  // `lease_s`: the successor lease's length (the router's LeaseSeconds;
  // < 0: the configured tau).
  void CompleteAsync(std::string session, SessionRecord record, TimePoint now, std::function<void()> done,
                     double lease_s = -1);
  // The session ended (a client hint; `last` names its last instance and
  // model): removes its record and lease, then `done`.
  void EndAsync(std::string session, SessionRecord last, std::function<void()> done);
  // Runs what is queued, then stops the worker threads (later operations
  // run on the caller's thread).
  void Stop();

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
    double lease_s = 0;  // the lease the completion was given
  };
  // A queued operation and whom to tell.
  struct Task {
    StoreOp op;
    TimePoint now;  // kComplete: when the call completed
    std::function<void(std::optional<SessionRecord>)> taken;  // kTake
    std::function<void()> done;                              // kComplete, kEnd
  };
  void Count(Op op, Result r) { ops_[op][r].fetch_add(1, std::memory_order_relaxed); }
  static Op OpOf(const StoreOp& op);
  // An operation failed: the store is down until a heartbeat finds it back.
  void MarkDown();
  // Keeps a completion or an end for the resync (the lock held).
  void KeepLocked(const std::string& session, Pending p);
  // Writes what was kept while the store was down; false if it failed again.
  bool Resync(TimePoint now);
  // Queues `task` for a worker, or runs it now (no workers, or the store is down).
  void Submit(Task task);
  // Runs a batch against the store (or, while it is down, without it) and
  // tells each task's callback.
  void Execute(std::vector<Task>& batch);
  void Work();

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
  Histogram batch_s_;  // wall seconds of one batch's round trip

  std::mutex queue_mu_;
  std::condition_variable queue_cv_;
  std::deque<Task> queue_;                   // guarded by queue_mu_
  bool closing_ = false;                     // guarded by queue_mu_
  std::vector<std::thread> workers_;
};

}  // namespace talaria
