#include "server/shared_sessions.h"

#include <algorithm>
#include <chrono>
#include <cstdio>

namespace talaria {
namespace {

constexpr const char* kOpNames[] = {"take", "complete", "end", "count"};
constexpr const char* kResultNames[] = {"ok", "failed", "skipped"};

}  // namespace

SharedSessions::SharedSessions(std::unique_ptr<SessionStore> store, double lease_tau_s, double keep_s,
                               std::size_t threads, std::size_t max_pending)
    : store_(std::move(store)),
      lease_tau_s_(lease_tau_s),
      keep_s_(keep_s),
      max_pending_(max_pending),
      batch_s_({5e-5, 1e-4, 2e-4, 5e-4, 1e-3, 2e-3, 5e-3, 1e-2, 5e-2, 0.1}) {
  if (!store_) return;
  for (std::size_t i = 0; i < threads; ++i) workers_.emplace_back([this] { Work(); });
}

SharedSessions::~SharedSessions() { Stop(); }

void SharedSessions::Stop() {
  {
    std::lock_guard<std::mutex> lock(queue_mu_);
    closing_ = true;
  }
  queue_cv_.notify_all();
  for (auto& w : workers_) w.join();
  workers_.clear();
}

SharedSessions::Op SharedSessions::OpOf(const StoreOp& op) {
  switch (op.kind) {
    case StoreOp::Kind::kTake: return kTake;
    case StoreOp::Kind::kComplete: return kComplete;
    case StoreOp::Kind::kEnd: return kEnd;
  }
  return kTake;
}

void SharedSessions::MarkDown() {
  if (up_.exchange(false)) {
    std::fprintf(stderr, "talaria gateway: state store %s does not answer; routing on local state until it does\n",
                 store_->Describe().c_str());
  }
}

void SharedSessions::KeepLocked(const std::string& session, Pending p) {
  auto it = pending_.find(session);
  if (it != pending_.end()) {
    it->second = std::move(p);
  } else if (pending_.size() < max_pending_) {
    pending_.emplace(session, std::move(p));
  } else {
    pending_dropped_.fetch_add(1, std::memory_order_relaxed);
  }
}

void SharedSessions::TakeAsync(std::string session, std::function<void(std::optional<SessionRecord>)> done) {
  if (!store_) return done(std::nullopt);
  Task t;
  t.op.kind = StoreOp::Kind::kTake;
  t.op.session = std::move(session);
  t.taken = std::move(done);
  Submit(std::move(t));
}

void SharedSessions::CompleteAsync(std::string session, SessionRecord record, TimePoint now,
                                   std::function<void()> done, double lease_s) {
  if (!store_) return done();
  Task t;
  t.op.kind = StoreOp::Kind::kComplete;
  t.op.session = std::move(session);
  t.op.record = std::move(record);
  t.op.lease_s = lease_s < 0 ? lease_tau_s_ : std::min(lease_s, lease_tau_s_);
  t.op.keep_s = keep_s_;
  t.now = now;
  t.done = std::move(done);
  Submit(std::move(t));
}

void SharedSessions::EndAsync(std::string session, SessionRecord last, std::function<void()> done) {
  if (!store_) return done();
  Task t;
  t.op.kind = StoreOp::Kind::kEnd;
  t.op.session = std::move(session);
  t.op.record = std::move(last);
  t.done = std::move(done);
  Submit(std::move(t));
}

void SharedSessions::Submit(Task task) {
  if (up_) {
    std::unique_lock<std::mutex> lock(queue_mu_);
    if (!closing_ && !workers_.empty()) {
      queue_.push_back(std::move(task));
      lock.unlock();
      queue_cv_.notify_one();
      return;
    }
  }
  std::vector<Task> one;
  one.push_back(std::move(task));
  Execute(one);
}

void SharedSessions::Work() {
  constexpr std::size_t kMaxBatch = 256;
  std::vector<Task> batch;
  while (true) {
    {
      std::unique_lock<std::mutex> lock(queue_mu_);
      queue_cv_.wait(lock, [&] { return closing_ || !queue_.empty(); });
      if (queue_.empty()) return;  // closing, and everything queued has run
      while (!queue_.empty() && batch.size() < kMaxBatch) {
        batch.push_back(std::move(queue_.front()));
        queue_.pop_front();
      }
    }
    Execute(batch);
    batch.clear();
  }
}

void SharedSessions::Execute(std::vector<Task>& batch) {
  // Completions and ends the store did not take are kept for the resync.
  auto keep = [&] {
    for (auto& t : batch) {
      if (t.op.kind == StoreOp::Kind::kComplete) KeepLocked(t.op.session, Pending{t.op.record, t.now, false, t.op.lease_s});
      if (t.op.kind == StoreOp::Kind::kEnd) KeepLocked(t.op.session, Pending{t.op.record, TimePoint{}, true, 0});
    }
  };
  bool answered = false;
  bool down = false;
  {
    // Down is decided under the lock Resync turns the store up under, so
    // nothing is kept after a resync has emptied what was kept.
    std::lock_guard<std::mutex> lock(mu_);
    if (!up_) {
      down = true;
      keep();
      for (auto& t : batch) Count(OpOf(t.op), kSkipped);
    }
  }
  if (!down) {
    std::vector<StoreOp> ops;
    ops.reserve(batch.size());
    for (auto& t : batch) ops.push_back(std::move(t.op));
    const auto start = std::chrono::steady_clock::now();
    answered = store_->Run(ops) == SessionStore::Status::kOk;
    batch_s_.Observe(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    for (std::size_t i = 0; i < batch.size(); ++i) batch[i].op = std::move(ops[i]);
    for (auto& t : batch) Count(OpOf(t.op), answered ? kOk : kFailed);
    if (!answered) {
      std::lock_guard<std::mutex> lock(mu_);
      keep();
      MarkDown();
    }
  }
  for (auto& t : batch) {
    if (t.op.kind != StoreOp::Kind::kTake) {
      t.done();
    } else if (answered && t.op.found) {
      if (t.op.record.lease) leases_taken_.fetch_add(1, std::memory_order_relaxed);
      t.taken(std::move(t.op.record));
    } else {
      t.taken(std::nullopt);
    }
  }
}

bool SharedSessions::Resync(TimePoint now) {
  constexpr std::size_t kChunk = 256;  // operations per round trip
  std::size_t written = 0;
  while (true) {
    std::vector<std::pair<std::string, Pending>> kept;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (pending_.empty()) {
        up_ = true;
        break;
      }
      for (auto& entry : pending_) kept.emplace_back(entry.first, std::move(entry.second));
      pending_.clear();
    }
    for (std::size_t from = 0; from < kept.size(); from += kChunk) {
      const std::size_t to = std::min(kept.size(), from + kChunk);
      std::vector<StoreOp> ops(to - from);
      for (std::size_t i = from; i < to; ++i) {
        StoreOp& op = ops[i - from];
        const Pending& p = kept[i].second;
        op.session = kept[i].first;
        op.record = p.record;
        if (p.ended) {
          op.kind = StoreOp::Kind::kEnd;
          continue;
        }
        op.kind = StoreOp::Kind::kComplete;
        op.record.done_age_s = std::max(0.0, ToSeconds(now - p.done));
        // The lease keeps what is left of its length; an expired one is not written.
        op.lease_s = std::max(0.0, p.lease_s - op.record.done_age_s);
        op.keep_s = keep_s_;
      }
      if (store_->Run(ops) != SessionStore::Status::kOk) {
        std::lock_guard<std::mutex> lock(mu_);
        // What was not written is kept again, unless a newer one came meanwhile.
        for (std::size_t i = from; i < kept.size(); ++i) pending_.try_emplace(kept[i].first, std::move(kept[i].second));
        return false;
      }
      written += to - from;
      resynced_.fetch_add(to - from, std::memory_order_relaxed);
    }
  }
  std::fprintf(stderr, "talaria gateway: state store %s answers again; %zu session%s resynchronised\n",
               store_->Describe().c_str(), written, written == 1 ? "" : "s");
  return true;
}

bool SharedSessions::Refresh(std::vector<LeaseCount>& pairs, TimePoint now) {
  if (!store_) return false;
  if (!up_ && (store_->Ping() != SessionStore::Status::kOk || !Resync(now))) return false;
  if (store_->CountLeases(pairs) != SessionStore::Status::kOk) {
    Count(kCount, kFailed);
    MarkDown();
    return false;
  }
  Count(kCount, kOk);
  return true;
}

void SharedSessions::RenderMetrics(std::string& out) const {
  if (!store_) return;
  FamilyHeader(out, "talaria_state_up", "gauge", "1 while the shared session store ([serve] state) answers");
  out += std::string("talaria_state_up ") + (up_ ? "1" : "0") + "\n";
  FamilyHeader(out, "talaria_state_operations_total", "counter",
               "operations on the shared session store by op (take before routing, complete, end, count of live "
               "leases) and result: ok; failed (no answer within state_timeout_s: local state was used); skipped "
               "(the store was down: local state, without waiting)");
  for (std::size_t op = 0; op < kOps; ++op) {
    for (std::size_t r = 0; r < kResults; ++r) {
      out += std::string("talaria_state_operations_total{op=\"") + kOpNames[op] + "\",result=\"" + kResultNames[r] +
             "\"} " + std::to_string(ops_[op][r].load(std::memory_order_relaxed)) + "\n";
    }
  }
  batch_s_.Render(out, "talaria_state_batch_seconds",
                 "wall time of one pipelined batch of store operations (one round trip; a routed call waits for "
                 "one before it is placed and one before it is answered)");
  FamilyHeader(out, "talaria_state_leases_taken_total", "counter",
               "leases this replica took from the shared store (a lease is taken by one replica only)");
  out += "talaria_state_leases_taken_total " + std::to_string(leases_taken_.load()) + "\n";
  std::size_t pending = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    pending = pending_.size();
  }
  FamilyHeader(out, "talaria_state_pending_sessions", "gauge",
               "completions kept while the store was down, written when it answers again");
  out += "talaria_state_pending_sessions " + std::to_string(pending) + "\n";
  FamilyHeader(out, "talaria_state_resynced_sessions_total", "counter",
               "kept completions written once the store answered again");
  out += "talaria_state_resynced_sessions_total " + std::to_string(resynced_.load()) + "\n";
  FamilyHeader(out, "talaria_state_pending_dropped_total", "counter",
               "completions not kept during an outage because max_pending were kept already");
  out += "talaria_state_pending_dropped_total " + std::to_string(pending_dropped_.load()) + "\n";
}

}  // namespace talaria
