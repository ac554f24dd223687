#include "router/session_table.h"

#include <algorithm>

namespace talaria {
namespace {

void ForgetAt(HeldLocations& held, std::int32_t index) {
  held.erase(std::remove_if(held.begin(), held.end(), [&](const PrefixLocation& l) { return l.instance == index; }),
             held.end());
}

}  // namespace

SessionEntry& SessionTable::Add(std::string_view id, TimePoint now) {
  SessionEntry& e = entries_.emplace(std::string(id), SessionEntry{}).first->second;
  e.last_use = e.queued_use = now;
  fifo_.push_back(Queued{std::string(id), now});
  return e;
}

SessionEntry& SessionTable::Entry(std::string_view id, TimePoint now) {
  auto it = entries_.find(id);
  return it == entries_.end() ? Add(id, now) : it->second;
}

void SessionTable::Reindex(std::int32_t index, ClusterView& view, const InstanceTelemetry& t) {
  auto& indexed = view.IndexedSessions(index);
  for (const auto& id : indexed) {
    auto it = entries_.find(id);
    if (it != entries_.end()) {
      ForgetAt(it->second.held, index);
    }
  }
  indexed.clear();
  const TimePoint at = view.status(index).snapshot_at;
  for (const auto& [id, c] : t.sessions) {
    const std::int32_t model = view.ModelId(c.model);
    Entry(id, at).held.push_back(PrefixLocation{index, model, c.state, c.tokens});
    indexed.insert(id);
  }
}

void SessionTable::ApplyDelta(std::int32_t index, ClusterView& view, const InstanceTelemetry& t) {
  auto& indexed = view.IndexedSessions(index);
  const TimePoint at = view.status(index).snapshot_at;
  for (const auto& [id, c] : t.sessions) {
    if (c.state == KvState::kMissing) {
      if (auto it = entries_.find(id); it != entries_.end()) {
        ForgetAt(it->second.held, index);
      }
      indexed.erase(id);
      continue;
    }
    const std::int32_t model = view.ModelId(c.model);
    HeldLocations& held = Entry(id, at).held;
    auto l = std::find_if(held.begin(), held.end(), [&](const PrefixLocation& x) { return x.instance == index; });
    if (l == held.end()) {
      held.push_back(PrefixLocation{index, model, c.state, c.tokens});
      indexed.insert(id);  // copies the id only if absent
    } else {
      *l = PrefixLocation{index, model, c.state, c.tokens};
    }
  }
}

KvState CachedState(const ClusterView& view, std::int32_t index, const SessionEntry& entry, std::int32_t model,
                    std::int64_t& tokens) {
  tokens = 0;
  // Completions after the snapshot: the router knows the KV is on device there.
  if (entry.last_instance == index && entry.model == model && entry.last_done > view.status(index).snapshot_at) {
    tokens = entry.kv_tokens;
    return KvState::kDevice;
  }
  for (const PrefixLocation& l : entry.held) {
    if (l.instance == index && l.model == model) {
      tokens = l.tokens;
      return l.state;
    }
  }
  return KvState::kMissing;
}

}  // namespace talaria
