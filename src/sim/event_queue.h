// The discrete-event queue of the simulator: events ordered by (time,
// insertion sequence), so events at the same virtual time fire in the order
// they were scheduled and every run replays exactly. The payload is a small
// value type the driver dispatches on; no per-event allocation beyond the
// queue's own storage. Not synchronized.
#pragma once

#include <cstdint>
#include <queue>
#include <vector>

#include "core/time.h"

namespace talaria {

template <typename Payload>
class EventQueue {
 public:
  struct Event {
    TimePoint at;
    std::uint64_t seq = 0;
    Payload payload;
  };

  void Push(TimePoint at, Payload payload) { heap_.push(Event{at, next_seq_++, payload}); }
  bool empty() const { return heap_.empty(); }
  std::size_t size() const { return heap_.size(); }
  // REQUIRES: !empty().
  const Event& Top() const { return heap_.top(); }
  Event Pop() {
    Event e = heap_.top();
    heap_.pop();
    return e;
  }
  // The time of the next event, or TimePoint::max() when there is none.
  TimePoint NextTime() const { return heap_.empty() ? TimePoint::max() : heap_.top().at; }

 private:
  struct Later {
    bool operator()(const Event& a, const Event& b) const {
      return a.at != b.at ? a.at > b.at : a.seq > b.seq;
    }
  };
  std::priority_queue<Event, std::vector<Event>, Later> heap_;
  std::uint64_t next_seq_ = 0;
};

}  // namespace talaria
