// The router's session table (paper §3.3): session id -> last instance,
// model, KV length, last use, its lease, and where the instances' snapshots
// say its prefix is held. Bounded: entries idle for session_table_idle_s,
// and the least recently used beyond session_table_size, are dropped when a
// new session needs room.
//
// Policy code: takes `now`, no clock, no I/O. Not synchronized.
#pragma once

#include <cstdint>
#include <list>
#include <string>
#include <string_view>
#include <vector>

#include <absl/container/flat_hash_map.h>

#include "core/strings.h"
#include "core/time.h"
#include "router/cluster_view.h"
#include "telemetry/telemetry.h"

namespace talaria {

// A soft reservation: (session, model, instance, prefix, t_exp).
struct Lease {
  std::int32_t instance = -1;
  std::int32_t model = -1;
  std::int64_t prefix_tokens = 0;
  TimePoint expires;
  TimePoint installed;
  std::uint64_t id = 0;  // 0: no lease
};

// Where a session's prefix is held, from the latest snapshots.
struct PrefixLocation {
  std::int32_t instance;
  std::int32_t model;
  KvState state;
  std::int64_t tokens;
};

struct SessionEntry {
  std::int32_t last_instance = -1;
  std::int32_t first_instance = -1;  // session-sticky's pin
  std::int32_t model = -1;
  std::int64_t kv_tokens = 0;
  TimePoint last_use;
  TimePoint last_done;  // completion seen by the router (newer than a snapshot?)
  Lease lease;
  std::vector<PrefixLocation> held;  // where snapshots say its prefix is
  std::list<std::string>::iterator lru;
};

class SessionTable {
 public:
  std::size_t size() const { return entries_.size(); }
  SessionEntry* Find(std::string_view id) {
    auto it = entries_.find(id);
    return it == entries_.end() ? nullptr : &it->second;
  }
  const SessionEntry* Find(std::string_view id) const {
    auto it = entries_.find(id);
    return it == entries_.end() ? nullptr : &it->second;
  }
  // The entry of a session being routed, made the most recently used. A new
  // one first makes room: entries idle longer than `idle_s` and the least
  // recently used beyond `max_sessions` go, each handed to `drop` first.
  template <typename Drop>
  SessionEntry& Route(std::string_view id, TimePoint now, std::size_t max_sessions, double idle_s, Drop drop);
  // Forgets a session, handing its entry to `drop` first; false when unknown.
  template <typename Drop>
  bool Erase(std::string_view id, Drop drop);
  // Marks an entry most recently used.
  void Touch(SessionEntry& e) { lru_.splice(lru_.end(), lru_, e.lru); }

  // A full snapshot's sessions replace everything instance `index` was
  // said to hold (`indexed`: the ids it was indexed under).
  void Reindex(std::int32_t index, ClusterView& view, const InstanceTelemetry& t);
  // A delta snapshot's changes, on top of the index.
  void ApplyDelta(std::int32_t index, ClusterView& view, const InstanceTelemetry& t);

 private:
  // The entry for a session, created (most recently used) if absent.
  SessionEntry& Entry(std::string_view id, TimePoint now);

  // Open addressing (one probe of contiguous slots per lookup, the key and
  // entry inline): a decision looks its session up among ~100,000.
  absl::flat_hash_map<std::string, SessionEntry, StringHash, std::equal_to<>> entries_;
  std::list<std::string> lru_;  // front = least recently used
};

// Where instance `index` holds the session's prefix for `model` (tokens in
// `tokens`): a completion there since its snapshot means on device;
// otherwise what the snapshots said.
KvState CachedState(const ClusterView& view, std::int32_t index, const SessionEntry& entry, std::int32_t model,
                    std::int64_t& tokens);

template <typename Drop>
SessionEntry& SessionTable::Route(std::string_view id, TimePoint now, std::size_t max_sessions, double idle_s,
                                  Drop drop) {
  auto found = entries_.find(id);
  if (found != entries_.end()) {
    Touch(found->second);
    return found->second;
  }
  while (!lru_.empty() && (entries_.size() >= max_sessions ||
                           ToSeconds(now - entries_.find(lru_.front())->second.last_use) > idle_s)) {
    auto victim = entries_.find(lru_.front());
    drop(victim->second);
    entries_.erase(victim);
    lru_.pop_front();
  }
  found = entries_.emplace(std::string(id), SessionEntry{}).first;
  found->second.lru = lru_.insert(lru_.end(), found->first);
  return found->second;
}

template <typename Drop>
bool SessionTable::Erase(std::string_view id, Drop drop) {
  auto found = entries_.find(id);
  if (found == entries_.end()) return false;
  drop(found->second);
  lru_.erase(found->second.lru);
  entries_.erase(found);
  return true;
}

}  // namespace talaria
