// An instance's session book: every session it has served and still keeps
// (its context chain, the device KV blocks it holds, what the last snapshot
// said of it), with the indexes the scheduler reads: by id, by host-registry
// chain owner, least recently used first, the sessions holding device KV
// (for a switch's release and the eviction scan), those that finished within
// the slot hold, and those whose snapshot entry may have changed. Bounded:
// sessions idle for long with nothing on device are forgotten.
//
// Owns that state; the scheduler changes a session's fields and tells the
// book (TrackDevice, MarkDirty, Finished). Not synchronized.
#pragma once

#include <cstdint>
#include <deque>
#include <list>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <absl/container/flat_hash_map.h>

#include "core/return_model.h"
#include "core/time.h"
#include "memory/block_hashes.h"
#include "memory/host_kv_registry.h"
#include "memory/kv_pool.h"
#include "telemetry/telemetry.h"

namespace talaria {

struct InstanceSession {
  std::string id;
  ChainOwner owner = 0;     // its chains' owner in the host registry
  std::int32_t model = -1;  // model whose device KV `blocks` hold
  SharedChain chain_data;  // its last context's full blocks: the first chain_blocks (see chain())
  std::int32_t chain_blocks = 0;
  PrefixHash partial = 0;  // a hybrid context's partial last block, checkpointed with the chain (0: none)
  BlockList blocks;
  bool busy = false;
  TimePoint last_use;
  // Its gaps between a call finishing and the next arriving (adaptive
  // holds), and when its last call finished (finished: it has one).
  SessionGaps gaps;
  TimePoint last_finish;
  bool finished = false;
  // The last finished call's hints (CallRequest): its expected tool time
  // (< 0: none) and whether it said it was the session's last.
  double hint_tool_s = -1;
  bool hint_end = false;
  // Telemetry cache of the host-restorable prefix once its checkpoint's
  // copies land, shortened by the registry's drops (-1: probe again, a drop
  // that could not be placed on its chain); probed while copies are in flight.
  TimePoint checkpoint_done;
  std::int32_t host_blocks = -1;
  // What the last snapshot said of it, and whether that may be out of date.
  KvState reported = KvState::kMissing;
  std::int32_t reported_model = -1;
  std::int64_t reported_tokens = 0;
  bool dirty = false;
  std::int32_t device_index = -1;  // its place among the device holders, -1 when it holds no blocks
  std::list<InstanceSession*>::iterator by_use;  // its place in the use order
  std::int32_t requests = 0;  // requests that point at it: it is not forgotten while any do

  // Its last context's full blocks.
  std::span<const PrefixHash> chain() const {
    return ChainView(chain_data).first(chain_data != nullptr ? static_cast<std::size_t>(chain_blocks) : 0);
  }
  // The chain its host checkpoint registers.
  BlockChain host_chain() const { return partial != 0 ? BlockChain(chain(), partial) : BlockChain(chain()); }
};

class SessionBook {
 public:
  using Session = InstanceSession;

  // The session's entry, added (as the least recently used) if absent.
  Session& Add(const std::string& id);
  const Session* Find(const std::string& id) const {
    auto it = sessions_.find(id);
    return it == sessions_.end() ? nullptr : it->second.get();
  }
  Session* Find(const std::string& id) { return const_cast<Session*>(std::as_const(*this).Find(id)); }
  // The session whose chains the host registry keeps under `owner`, or null.
  Session* ByOwner(ChainOwner owner);
  std::size_t size() const { return sessions_.size(); }

  // Its snapshot entry may have changed: the next delta reports it.
  void MarkDirty(Session& s) {
    if (s.dirty) return;
    s.dirty = true;
    dirty_.push_back(&s);
  }
  // Any session's may have (a registry drop that names no session): the
  // next snapshot walks every session, probing host prefixes afresh.
  void MarkAllDirty() { all_dirty_ = true; }
  // Keeps the device holders in step with whether `s` holds blocks; call
  // after each change of its blocks.
  void TrackDevice(Session& s);
  // Sessions holding device KV blocks (unordered).
  const std::vector<Session*>& device_holders() const { return device_holders_; }
  // Every holder's blocks were released (a model's KV region went).
  void ClearDeviceHolders();
  // A call of `s` finished at `now`: it becomes the most recently used, and
  // one of the recently finished for a slot hold of `hold`.
  void Finished(Session& s, TimePoint now, Duration hold);
  // Sessions that finished within the slot hold, oldest first (a session
  // appears once per finish).
  const std::deque<std::pair<TimePoint, Session*>>& recent_finishes() const { return recent_finishes_; }

  // Hands the sessions whose snapshot entry may have changed to `report`
  // (every session when `all` or after MarkAllDirty, with their host
  // prefixes to be probed afresh), unmarking them first; `report` may mark a
  // session again, for the next snapshot.
  template <typename Report>
  void ReportChanged(bool all, Report report);
  // Forgets, least recently used first, the sessions unused for more than
  // `idle_s` that hold nothing (no call, no device blocks), at most every
  // idle_s / 8; `forgetting` hears each before it goes.
  template <typename Forgetting>
  void ForgetIdle(TimePoint now, double idle_s, Forgetting forgetting);
  // Every session, in the book's order.
  template <typename F>
  void ForEach(F f) const {
    for (const auto& [id, s] : sessions_) f(*s);
  }

 private:
  void Forget(Session& s);

  // Open addressing (absl): at cluster scale every instance's tables are
  // cold when touched, and a lookup costs one probe of contiguous slots.
  absl::flat_hash_map<std::string, std::unique_ptr<Session>> sessions_;
  absl::flat_hash_map<ChainOwner, Session*> by_owner_;
  ChainOwner next_owner_ = 1;
  std::vector<Session*> dirty_;
  std::vector<Session*> dirty_scratch_;
  bool all_dirty_ = true;
  std::deque<std::pair<TimePoint, Session*>> recent_finishes_;
  std::vector<Session*> device_holders_;
  std::list<Session*> by_use_;  // every session, least recently finished first
  TimePoint next_sweep_{};
};

template <typename Report>
void SessionBook::ReportChanged(bool all, Report report) {
  if (all || all_dirty_) {
    for (Session* s : dirty_) s->dirty = false;
    dirty_.clear();
    for (auto& [id, s] : sessions_) {
      if (all_dirty_) s->host_blocks = -1;
      report(*s);
    }
    all_dirty_ = false;
    return;
  }
  dirty_scratch_.swap(dirty_);
  dirty_.clear();
  for (Session* s : dirty_scratch_) {
    s->dirty = false;
    report(*s);
  }
  dirty_scratch_.clear();
}

template <typename Forgetting>
void SessionBook::ForgetIdle(TimePoint now, double idle_s, Forgetting forgetting) {
  if (now < next_sweep_) return;
  for (auto it = by_use_.begin(); it != by_use_.end() && ToSeconds(now - (*it)->last_use) > idle_s;) {
    Session& s = **it++;
    if (s.busy || !s.blocks.empty() || s.requests > 0) continue;
    forgetting(s);
    Forget(s);
  }
  next_sweep_ = now + FromSeconds(idle_s / 8);
}

}  // namespace talaria
