#include "instance/session_book.h"

#include <algorithm>

#include "instance/instance_parts.h"

namespace talaria {

SessionBook::Session& SessionBook::Add(const std::string& id) {
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

SessionBook::Session* SessionBook::ByOwner(ChainOwner owner) {
  auto it = by_owner_.find(owner);
  return it == by_owner_.end() ? nullptr : it->second;
}

void SessionBook::TrackDevice(Session& s) {
  if (!s.blocks.empty() && s.device_index < 0) {
    s.device_index = static_cast<std::int32_t>(device_holders_.size());
    device_holders_.push_back(&s);
  } else if (s.blocks.empty() && s.device_index >= 0) {
    Session* last = device_holders_.back();
    device_holders_[static_cast<std::size_t>(s.device_index)] = last;
    last->device_index = s.device_index;
    device_holders_.pop_back();
    s.device_index = -1;
  }
}

void SessionBook::ClearDeviceHolders() {
  for (Session* s : device_holders_) s->device_index = -1;
  device_holders_.clear();
}

void SessionBook::Finished(Session& s, TimePoint now, Duration hold) {
  by_use_.splice(by_use_.end(), by_use_, s.by_use);
  while (!recent_finishes_.empty() && recent_finishes_.front().first + hold <= now) recent_finishes_.pop_front();
  recent_finishes_.emplace_back(now, &s);
}

void SessionBook::Forget(Session& s) {
  by_owner_.erase(s.owner);
  std::erase_if(recent_finishes_, [&](const auto& f) { return f.second == &s; });
  if (s.dirty) std::erase(dirty_, &s);
  by_use_.erase(s.by_use);
  sessions_.erase(sessions_.find(s.id));
}

// The scheduler's side: a request finds its session once.

Instance::Session* Instance::FindSession(const Request& r) {
  if (!r.session_looked_up) {
    r.session_looked_up = true;
    if (Session* s = sessions_.Find(r.call.session_id)) {
      r.session = s;
      ++r.session->requests;
    }
  }
  return r.session;
}

Instance::Session& Instance::AddSession(const Request& r) {
  if (Session* s = FindSession(r)) return *s;
  Session& s = sessions_.Add(r.call.session_id);
  r.session = &s;
  ++s.requests;
  return s;
}

}  // namespace talaria
