#include "router/lease_book.h"

#include "router/router.h"

namespace talaria {

void LeaseBook::Install(std::string_view session_id, SessionEntry& entry, std::int32_t instance, std::int32_t model,
                        std::int64_t prefix_tokens, TimePoint now, TimePoint expires, double units,
                        const GapDistribution* gaps) {
  Drop(entry);
  entry.lease = Lease{instance, model, prefix_tokens, expires, now, next_id_++, units};
  owner_.emplace(entry.lease.id, std::string(session_id));
  expiry_.emplace(entry.lease.expires, entry.lease.id);
  if (gaps != nullptr) {
    recharge_.push(
        Recharge{now + (expires - now) / kRecharges, entry.lease.id, *gaps, gaps->Within(ToSeconds(expires - now)), 1});
  }
  view_.ChargeLease(instance, model, +1, units);
}

void LeaseBook::Drop(SessionEntry& entry) {
  if (entry.lease.id == 0) return;
  if (owner_.erase(entry.lease.id) > 0)
    view_.ChargeLease(entry.lease.instance, entry.lease.model, -1, -entry.lease.units);
  entry.lease = Lease{};
}

void LeaseBook::ExpireDue(TimePoint now, SessionTable& sessions, RouterCounters& counters) {
  // An adaptive lease still unused at `at` is used only if the return comes
  // in what is left of it: its units fall to that conditional chance.
  while (!recharge_.empty() && recharge_.top().at <= now) {
    Recharge r = recharge_.top();
    recharge_.pop();
    auto owner = owner_.find(r.id);
    if (owner == owner_.end()) continue;  // consumed, discarded or expired
    SessionEntry* s = sessions.Find(owner->second);
    if (s == nullptr || s->lease.id != r.id) continue;
    Lease& l = s->lease;
    const double units = GapDistribution::Given(r.gaps.Within(ToSeconds(r.at - l.installed)), r.by_end);
    view_.ChargeLease(l.instance, l.model, 0, units - l.units);
    l.units = units;
    if (++r.step < kRecharges) {
      r.at += (l.expires - l.installed) / kRecharges;
      recharge_.push(r);
    }
  }
  while (!expiry_.empty() && expiry_.top().first <= now) {
    const std::uint64_t id = expiry_.top().second;
    expiry_.pop();
    auto owner = owner_.find(id);
    if (owner == owner_.end()) continue;  // consumed or discarded already
    SessionEntry* s = sessions.Find(owner->second);
    if (s != nullptr && s->lease.id == id) {
      view_.ChargeLease(s->lease.instance, s->lease.model, -1, -s->lease.units);
      s->lease = Lease{};
    }
    owner_.erase(owner);
    ++counters.leases_expired;
  }
}

}  // namespace talaria
