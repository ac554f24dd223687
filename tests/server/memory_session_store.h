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

  Status Run(std::span<StoreOp> ops) override {
    std::lock_guard<std::mutex> lock(mu_);
    if (down) return Status::kUnavailable;
    const TimePoint now = clock_.Now();
    for (StoreOp& op : ops) {
      switch (op.kind) {
        case StoreOp::Kind::kTake: {
          auto it = records_.find(op.session);
          op.found = it != records_.end();
          if (!op.found) break;
          op.record = it->second.record;
          op.record.done_age_s = ToSeconds(now - it->second.done);
          op.record.lease = it->second.lease_expires > now;
          op.record.lease_left_s = op.record.lease ? ToSeconds(it->second.lease_expires - now) : 0;
          it->second.lease_expires = TimePoint{};  // taken
          break;
        }
        case StoreOp::Kind::kComplete: {
          Entry& e = records_[op.session];
          e.record = op.record;
          e.done = now - FromSeconds(op.record.done_age_s);
          e.lease_expires = op.lease_s > 0 ? now + FromSeconds(op.lease_s) : TimePoint{};
          ++completes;
          break;
        }
        case StoreOp::Kind::kEnd:
          records_.erase(op.session);
          break;
      }
    }
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
