// The router's session table (paper §3.3): session id -> last instance,
// model, KV length, last use, its lease, and where the instances' snapshots
// say its prefix is held. Bounded: entries idle for session_table_idle_s,
// and the least recently used beyond session_table_size, are dropped when a
// new session needs room.
//
// Recency is kept lazily, so a routing decision that touches its session
// writes only that session's entry (no list splice: three random cache
// lines fewer per decision at 100,000 sessions). Every entry sits once in
// a FIFO with the last-use time it had when queued; when room is needed
// the front is examined: an entry used since it was queued goes to the back
// with its newer time (a second chance), one that was not is the victim.
// The victim is therefore one not used since it was queued, and entries
// leave in the order of the times they were queued with: least recently
// used to within one pass of the FIFO. Each queue move pays for an earlier
// touch, so making room costs O(1) amortised per call.
//
// Policy code: takes `now`, no clock, no I/O. Not synchronized.
#pragma once

#include <cstdint>
#include <deque>
#include <string>
#include <string_view>
#include <vector>

#include <absl/container/flat_hash_map.h>
#include <absl/container/inlined_vector.h>

#include "core/return_model.h"
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
  // The admission units it holds in its model's next slot while live: 1
  // (the paper's), or for an adaptive lease the chance it is used (from
  // now to its expiry; LeaseBook lowers it as the lease ages unused).
  double units = 1;
};

// Where a session's prefix is held, from the latest snapshots.
struct PrefixLocation {
  std::int32_t instance;
  std::int32_t model;
  KvState state;
  std::int64_t tokens;
};

// Where a session's prefix is held: almost always one instance, kept
// inline in the entry (a second location, during a move, spills to the
// heap), so a decision reads its session's locations without a second
// random cache line.
using HeldLocations = absl::InlinedVector<PrefixLocation, 1>;

struct SessionEntry {
  // What every decision reads, first (the slot's key precedes them).
  std::int32_t last_instance = -1;
  std::int32_t model = -1;
  TimePoint last_use;
  TimePoint last_done;  // completion seen by the router (newer than a snapshot?)
  std::int64_t kv_tokens = 0;
  HeldLocations held;  // where snapshots say its prefix is
  Lease lease;
  std::int32_t first_instance = -1;  // session-sticky's pin
  // Adaptive leases: whether a completion's gap is still to be seen (the
  // next call's first routing closes it), with that call's tool-time hint
  // (< 0: none), and its gaps so far.
  bool return_pending = false;
  float pending_hint_s = -1;
  SessionGaps gaps;
  TimePoint queued_use;  // last_use when its FIFO place was taken (SessionTable)
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

  // A full snapshot's sessions replace everything instance `index` was
  // said to hold (`indexed`: the ids it was indexed under).
  void Reindex(std::int32_t index, ClusterView& view, const InstanceTelemetry& t);
  // A delta snapshot's changes, on top of the index.
  void ApplyDelta(std::int32_t index, ClusterView& view, const InstanceTelemetry& t);

 private:
  // The entry for a session, created (most recently used) if absent.
  SessionEntry& Entry(std::string_view id, TimePoint now);
  SessionEntry& Add(std::string_view id, TimePoint now);
  // Open addressing (one probe of contiguous slots per lookup, the key and
  // entry inline): a decision looks its session up among ~100,000.
  using Entries = absl::flat_hash_map<std::string, SessionEntry, StringHash, std::equal_to<>>;
  // The front of the FIFO that may go: an entry not used since it was
  // queued (others are requeued, places of erased entries dropped);
  // entries_.end() when the FIFO is empty.
  Entries::iterator Victim();

  Entries entries_;
  struct Queued {
    std::string id;
    TimePoint use;  // the entry's last_use when queued: its place is current iff equal to queued_use
  };
  std::deque<Queued> fifo_;  // every entry once (and places of erased ones, skipped)
};

// Where instance `index` holds the session's prefix for `model` (tokens in
// `tokens`): a completion there since its snapshot means on device;
// otherwise what the snapshots said.
KvState CachedState(const ClusterView& view, std::int32_t index, const SessionEntry& entry, std::int32_t model,
                    std::int64_t& tokens);

inline SessionTable::Entries::iterator SessionTable::Victim() {
  while (!fifo_.empty()) {
    auto it = entries_.find(fifo_.front().id);
    if (it == entries_.end() || it->second.queued_use != fifo_.front().use) {
      fifo_.pop_front();  // the place of an erased entry, or one it left for a newer place
      continue;
    }
    SessionEntry& e = it->second;
    if (e.last_use != e.queued_use) {  // used since it was queued: a second chance
      e.queued_use = e.last_use;
      fifo_.push_back(Queued{std::move(fifo_.front().id), e.last_use});
      fifo_.pop_front();
      continue;
    }
    return it;
  }
  return entries_.end();
}

template <typename Drop>
SessionEntry& SessionTable::Route(std::string_view id, TimePoint now, std::size_t max_sessions, double idle_s,
                                  Drop drop) {
  auto found = entries_.find(id);
  if (found != entries_.end()) return found->second;
  for (auto victim = Victim(); victim != entries_.end(); victim = Victim()) {
    if (entries_.size() < max_sessions && ToSeconds(now - victim->second.last_use) <= idle_s) break;
    drop(victim->second);
    fifo_.pop_front();
    entries_.erase(victim);
  }
  return Add(id, now);
}

template <typename Drop>
bool SessionTable::Erase(std::string_view id, Drop drop) {
  auto found = entries_.find(id);
  if (found == entries_.end()) return false;
  drop(found->second);
  entries_.erase(found);  // its FIFO place is skipped when reached
  return true;
}

}  // namespace talaria
