// The instance's session book: each session's context chain, its device KV
// blocks, and the indexes the eviction scan and telemetry read.
#include "instance/instance_parts.h"

#include "core/error.h"

namespace talaria {

Instance::Session& Instance::AddSession(const std::string& id) {
  auto& slot = sessions_[id];
  if (slot == nullptr) {
    slot = std::make_unique<Session>();
    slot->id = id;
    slot->owner = next_owner_++;
    by_owner_.emplace(slot->owner, slot.get());
    slot->by_use = by_use_.insert(by_use_.begin(), slot.get());  // never used yet: the oldest
  }
  return *slot;
}

Instance::Session* Instance::FindSession(const Request& r) {
  if (!r.session_looked_up) {
    r.session_looked_up = true;
    if (auto it = sessions_.find(r.call.session_id); it != sessions_.end()) {
      r.session = it->second.get();
      ++r.session->requests;
    }
  }
  return r.session;
}

Instance::Session& Instance::AddSession(const Request& r) {
  if (Session* s = FindSession(r)) return *s;
  Session& s = AddSession(r.call.session_id);
  r.session = &s;
  ++s.requests;
  return s;
}

void Instance::MarkDirty(Session& s) {
  if (s.dirty) return;
  s.dirty = true;
  dirty_.push_back(&s);
}

void Instance::TrackDevice(Session& s) {
  if (!s.blocks.empty() && s.device_index < 0) {
    s.device_index = static_cast<std::int32_t>(device_sessions_.size());
    device_sessions_.push_back(&s);
  } else if (s.blocks.empty() && s.device_index >= 0) {
    Session* last = device_sessions_.back();
    device_sessions_[static_cast<std::size_t>(s.device_index)] = last;
    last->device_index = s.device_index;
    device_sessions_.pop_back();
    s.device_index = -1;
  }
}

}  // namespace talaria
