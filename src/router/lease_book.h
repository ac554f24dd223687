// The router's leases (paper §3.3, Algorithm 1 lines 1-9): a session's soft
// reservation, installed only when one of its calls completes, with
// t_exp = t_done + tau (or adopted from another gateway replica with the
// expiry it had there). While live it holds admission in its model's next
// slot on its instance (ClusterView::ChargeLease): one unit, or an adaptive
// lease's chance of being used, lowered as it ages. A return consumes it;
// a lease that expires, or is found unusable, is dropped. A lease is
// consumed or dropped once.
//
// Policy code: takes `now`, no clock, no I/O. Not synchronized.
#pragma once

#include <cstdint>
#include <functional>
#include <queue>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/time.h"
#include "router/cluster_view.h"
#include "router/session_table.h"

namespace talaria {

struct RouterCounters;

class LeaseBook {
 public:
  // `view` is charged for every live lease; it must outlive the book.
  explicit LeaseBook(ClusterView& view) : view_(view) {}

  // Installs `entry`'s successor lease (replacing a live one), live until
  // `expires`, holding `units` admission units (Lease::units). With `gaps`
  // (an adaptive lease's return model), the units fall as the lease ages
  // unused, at each kRecharges-th of its length, to the chance that the
  // return still comes within it.
  void Install(std::string_view session_id, SessionEntry& entry, std::int32_t instance, std::int32_t model,
               std::int64_t prefix_tokens, TimePoint now, TimePoint expires, double units = 1,
               const GapDistribution* gaps = nullptr);
  // Ends `entry`'s lease, if any (consumed, discarded, or its session
  // dropped from the table).
  void Drop(SessionEntry& entry);
  // Drops the leases that expired by `now`, counting them, and lowers the
  // units of adaptive leases that aged unused.
  void ExpireDue(TimePoint now, SessionTable& sessions, RouterCounters& counters);
  // Leases installed and not yet consumed, discarded or swept as expired
  // (expiry is swept at each routing decision).
  std::size_t live() const { return owner_.size(); }
  // Calls `visit(session_id)` for each live lease's session, in no order.
  template <typename Visit>
  void ForEachOwner(Visit&& visit) const {
    for (const auto& [id, session] : owner_) visit(std::string_view(session));
  }

 private:
  ClusterView& view_;
  std::unordered_map<std::uint64_t, std::string> owner_;  // live lease id -> session
  // Soonest expiry on top (adopted leases expire out of install order).
  using Due = std::pair<TimePoint, std::uint64_t>;
  std::priority_queue<Due, std::vector<Due>, std::greater<>> expiry_;
  // Adaptive leases' next lowering of their units, soonest on top. The
  // return model and step ride here, not in the lease, so a session entry
  // (read by every decision) stays as small for adaptive leases as fixed.
  struct Recharge {
    TimePoint at;
    std::uint64_t id;
    GapDistribution gaps;
    double by_end;      // gaps.Within(the lease's length), evaluated once at install
    std::int32_t step;  // 1 .. kRecharges - 1
    bool operator>(const Recharge& o) const { return at > o.at; }
  };
  std::priority_queue<Recharge, std::vector<Recharge>, std::greater<>> recharge_;
  std::uint64_t next_id_ = 1;
  static constexpr int kRecharges = 4;  // units lowered at 1/4, 1/2 and 3/4 of the lease
};

}  // namespace talaria
