// A test double of the shared session store (server/session_store.h): the
// Redis store's semantics (a record per session, a lease taken once, leases
// that expire, live-lease counts per pair) kept in this process on the
// test's manual clock, so two gateway replicas on one ManualClock can share
// it. `down` makes every operation report kUnavailable, like a Redis that
// does not answer.
#pragma once

#include <map>
#include <mutex>
#include <string>

#include "core/clock.h"
#include "server/session_store.h"

namespace talaria::testing {

class MemorySessionStore final : public SessionStore {
 public:
  explicit MemorySessionStore(const Clock& clock) : clock_(clock) {}

  Status Take(std::string_view session, std::optional<SessionRecord>& out) override {
    std::lock_guard<std::mutex> lock(mu_);
    out.reset();
    if (down) return Status::kUnavailable;
    auto it = records_.find(std::string(session));
    if (it == records_.end()) return Status::kOk;
    const TimePoint now = clock_.Now();
    SessionRecord r = it->second.record;
    r.done_age_s = ToSeconds(now - it->second.done);
    r.lease = it->second.lease_expires > now;
    r.lease_left_s = r.lease ? ToSeconds(it->second.lease_expires - now) : 0;
    it->second.lease_expires = TimePoint{};  // taken
    out = r;
    return Status::kOk;
  }
  Status Complete(std::string_view session, const SessionRecord& record, double lease_s, double) override {
    std::lock_guard<std::mutex> lock(mu_);
    if (down) return Status::kUnavailable;
    const TimePoint now = clock_.Now();
    Entry& e = records_[std::string(session)];
    e.record = record;
    e.done = now - FromSeconds(record.done_age_s);
    e.lease_expires = lease_s > 0 ? now + FromSeconds(lease_s) : TimePoint{};
    ++completes;
    return Status::kOk;
  }
  Status End(std::string_view session, const SessionRecord&) override {
    std::lock_guard<std::mutex> lock(mu_);
    if (down) return Status::kUnavailable;
    records_.erase(std::string(session));
    return Status::kOk;
  }
  Status CountLeases(std::vector<LeaseCount>& pairs) override {
    std::lock_guard<std::mutex> lock(mu_);
    if (down) return Status::kUnavailable;
    const TimePoint now = clock_.Now();
    for (auto& p : pairs) {
      p.live = 0;
      for (const auto& [id, e] : records_) {
        if (e.record.instance == p.instance && e.record.model == p.model && e.lease_expires > now) ++p.live;
      }
    }
    return Status::kOk;
  }
  Status Ping() override {
    std::lock_guard<std::mutex> lock(mu_);
    return down ? Status::kUnavailable : Status::kOk;
  }
  std::string Describe() const override { return "memory"; }

  bool Has(const std::string& session) {
    std::lock_guard<std::mutex> lock(mu_);
    return records_.count(session) > 0;
  }

  bool down = false;  // set only while no gateway thread runs
  int completes = 0;

 private:
  struct Entry {
    SessionRecord record;
    TimePoint done;
    TimePoint lease_expires;
  };
  const Clock& clock_;
  std::mutex mu_;
  std::map<std::string, Entry> records_;
};

}  // namespace talaria::testing
