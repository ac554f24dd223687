// The discrete-event queue of the simulator: events ordered by (time,
// insertion sequence), so events at the same virtual time fire in the order
// they were scheduled and every run replays exactly. The payload is a small
// value type the driver dispatches on; no per-event allocation beyond the
// queue's own storage. Not synchronized.
//
// Events known up front in bulk (a trace's first arrivals, one per session)
// go in through PushMany: they wait in one array sorted once and consumed
// from its front, and only the events scheduled as the run goes (steps,
// timers, next calls) live in the heap. At cluster scale that keeps the heap
// small enough to stay in cache instead of sifting every pop through a
// hundred thousand arrivals. The order is the same as pushing each one.
#pragma once

#include <algorithm>
#include <cstdint>
#include <queue>
#include <span>
#include <utility>
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
  // As Push for each event in the order given (their sequence numbers
  // follow it), held in the sorted array instead of the heap.
  void PushMany(std::span<const std::pair<TimePoint, Payload>> events) {
    batch_.erase(batch_.begin(), batch_.begin() + static_cast<std::ptrdiff_t>(batch_next_));
    batch_next_ = 0;
    const auto middle = static_cast<std::ptrdiff_t>(batch_.size());
    for (const auto& [at, payload] : events) batch_.push_back(Event{at, next_seq_++, payload});
    std::sort(batch_.begin() + middle, batch_.end(), Earlier{});
    std::inplace_merge(batch_.begin(), batch_.begin() + middle, batch_.end(), Earlier{});
  }
  bool empty() const { return heap_.empty() && batch_next_ == batch_.size(); }
  std::size_t size() const { return heap_.size() + (batch_.size() - batch_next_); }
  // REQUIRES: !empty().
  const Event& Top() const { return FromBatch() ? batch_[batch_next_] : heap_.top(); }
  Event Pop() {
    if (FromBatch()) {
      const Event e = batch_[batch_next_++];
      if (batch_next_ == batch_.size()) {
        batch_.clear();
        batch_next_ = 0;
      }
      return e;
    }
    Event e = heap_.top();
    heap_.pop();
    return e;
  }
  // The time of the next event, or TimePoint::max() when there is none.
  TimePoint NextTime() const { return empty() ? TimePoint::max() : Top().at; }

 private:
  struct Earlier {
    bool operator()(const Event& a, const Event& b) const {
      return a.at != b.at ? a.at < b.at : a.seq < b.seq;
    }
  };
  struct Later {
    bool operator()(const Event& a, const Event& b) const { return Earlier{}(b, a); }
  };
  // Whether the next event is the batch's (sequence numbers are unique, so
  // the two never tie).
  bool FromBatch() const {
    return batch_next_ < batch_.size() && (heap_.empty() || Earlier{}(batch_[batch_next_], heap_.top()));
  }

  std::priority_queue<Event, std::vector<Event>, Later> heap_;
  std::vector<Event> batch_;  // PushMany's, sorted; consumed up to batch_next_
  std::size_t batch_next_ = 0;
  std::uint64_t next_seq_ = 0;
};

}  // namespace talaria
