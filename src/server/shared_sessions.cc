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
                               std::size_t max_pending)
    : store_(std::move(store)),
      lease_tau_s_(lease_tau_s),
      keep_s_(keep_s),
      max_pending_(max_pending),
      take_s_({5e-5, 1e-4, 2e-4, 5e-4, 1e-3, 2e-3, 5e-3, 1e-2, 5e-2, 0.1}) {}

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

std::optional<SessionRecord> SharedSessions::Take(const std::string& session) {
  if (!store_) return std::nullopt;
  if (!up_) {
    Count(kTake, kSkipped);
    return std::nullopt;
  }
  std::optional<SessionRecord> record;
  const auto start = std::chrono::steady_clock::now();
  const SessionStore::Status status = store_->Take(session, record);
  take_s_.Observe(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  if (status != SessionStore::Status::kOk) {
    Count(kTake, kFailed);
    MarkDown();
    return std::nullopt;
  }
  Count(kTake, kOk);
  if (record && record->lease) leases_taken_.fetch_add(1, std::memory_order_relaxed);
  return record;
}

void SharedSessions::Complete(const std::string& session, SessionRecord record, TimePoint now) {
  if (!store_) return;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!up_) {
      KeepLocked(session, Pending{std::move(record), now, false});
      Count(kComplete, kSkipped);
      return;
    }
  }
  if (store_->Complete(session, record, lease_tau_s_, keep_s_) == SessionStore::Status::kOk) {
    Count(kComplete, kOk);
    return;
  }
  Count(kComplete, kFailed);
  std::lock_guard<std::mutex> lock(mu_);
  KeepLocked(session, Pending{std::move(record), now, false});
  MarkDown();
}

void SharedSessions::End(const std::string& session, const SessionRecord& last) {
  if (!store_) return;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!up_) {
      KeepLocked(session, Pending{last, TimePoint{}, true});
      Count(kEnd, kSkipped);
      return;
    }
  }
  if (store_->End(session, last) == SessionStore::Status::kOk) {
    Count(kEnd, kOk);
    return;
  }
  Count(kEnd, kFailed);
  std::lock_guard<std::mutex> lock(mu_);
  KeepLocked(session, Pending{last, TimePoint{}, true});
  MarkDown();
}

bool SharedSessions::Resync(TimePoint now) {
  std::size_t written = 0;
  while (true) {
    std::unordered_map<std::string, Pending> batch;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (pending_.empty()) {
        up_ = true;
        break;
      }
      batch.swap(pending_);
    }
    for (auto it = batch.begin(); it != batch.end(); ++it) {
      const Pending& p = it->second;
      SessionStore::Status status;
      if (p.ended) {
        status = store_->End(it->first, p.record);
      } else {
        SessionRecord record = p.record;
        record.done_age_s = std::max(0.0, ToSeconds(now - p.done));
        // The lease keeps what is left of tau; an expired one is not written.
        const double left_s = lease_tau_s_ - record.done_age_s;
        status = store_->Complete(it->first, record, left_s > 0 ? left_s : 0, keep_s_);
      }
      if (status != SessionStore::Status::kOk) {
        std::lock_guard<std::mutex> lock(mu_);
        // What was not written is kept again, unless a newer one came meanwhile.
        for (; it != batch.end(); ++it) pending_.try_emplace(it->first, std::move(it->second));
        return false;
      }
      ++written;
      resynced_.fetch_add(1, std::memory_order_relaxed);
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
  take_s_.Render(out, "talaria_state_take_seconds", "wall time of one take: a routed call's round trip to the store");
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
