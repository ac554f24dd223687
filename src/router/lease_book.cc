#include "router/lease_book.h"

#include "router/router.h"

namespace talaria {

void LeaseBook::Install(std::string_view session_id, SessionEntry& entry, std::int32_t instance,
                        std::int32_t model, std::int64_t prefix_tokens, TimePoint now, double tau_s) {
  Drop(entry);
  entry.lease = Lease{instance, model, prefix_tokens, now + FromSeconds(tau_s), now, next_id_++};
  owner_.emplace(entry.lease.id, std::string(session_id));
  expiry_.emplace_back(entry.lease.expires, entry.lease.id);
  view_.ChargeLease(instance, model, +1);
}

void LeaseBook::Drop(SessionEntry& entry) {
  if (entry.lease.id == 0) return;
  if (owner_.erase(entry.lease.id) > 0) view_.ChargeLease(entry.lease.instance, entry.lease.model, -1);
  entry.lease = Lease{};
}

void LeaseBook::ExpireDue(TimePoint now, SessionTable& sessions, RouterCounters& counters) {
  while (!expiry_.empty() && expiry_.front().first <= now) {
    const std::uint64_t id = expiry_.front().second;
    expiry_.pop_front();
    auto owner = owner_.find(id);
    if (owner == owner_.end()) continue;  // consumed or discarded already
    SessionEntry* s = sessions.Find(owner->second);
    if (s != nullptr && s->lease.id == id) {
      view_.ChargeLease(s->lease.instance, s->lease.model, -1);
      s->lease = Lease{};
    }
    owner_.erase(owner);
    ++counters.leases_expired;
  }
}

}  // namespace talaria
