// Timers on a driver's timeline: how the logic in driver/ (the control
// plane's heartbeat and its bounded overload wait) asks to run again later
// without reading a clock or sleeping. The simulator's timer is its event
// queue (virtual time); the servers' fires on an Asio loop in scaled wall
// time (server/asio_timer.h); tests use ManualTimer, which fires only when
// the test advances its clock, in (time, order of scheduling) order, as
// Envoy's simulated time system and Seastar's manual clock do.
#pragma once

#include <cstdint>
#include <functional>
#include <mutex>
#include <queue>
#include <vector>

#include "core/clock.h"
#include "core/time.h"

namespace talaria {

class Timer {
 public:
  virtual ~Timer() = default;
  // Runs `fn` once, at `at` on the driver's timeline (at once if that has
  // passed), on the driver's timer thread. Callbacks due at the same time
  // run in the order they were scheduled. A timer that is stopped runs none
  // of its pending callbacks.
  virtual void At(TimePoint at, std::function<void()> fn) = 0;
};

// A timer for tests over a ManualClock: nothing fires until Advance.
// At may be called from any thread; callbacks run on Advance's caller.
class ManualTimer final : public Timer {
 public:
  // `clock` must outlive the timer; only this timer should move it.
  explicit ManualTimer(ManualClock& clock) : clock_(clock) {}
  ManualTimer(const ManualTimer&) = delete;
  ManualTimer& operator=(const ManualTimer&) = delete;

  void At(TimePoint at, std::function<void()> fn) override;
  // Moves the clock forward by `d`, stopping at each due callback's time to
  // run it (callbacks they schedule run too, if due by the end).
  void Advance(Duration d);
  void AdvanceTo(TimePoint t);
  // Callbacks scheduled and not yet run.
  std::size_t pending() const;

 private:
  struct Entry {
    TimePoint at;
    std::uint64_t seq;
    std::function<void()> fn;
  };
  struct Later {
    bool operator()(const Entry& a, const Entry& b) const { return a.at != b.at ? a.at > b.at : a.seq > b.seq; }
  };
  ManualClock& clock_;
  mutable std::mutex mu_;  // guards the queue (At may come from other threads)
  std::priority_queue<Entry, std::vector<Entry>, Later> queue_;
  std::uint64_t next_seq_ = 0;
};

}  // namespace talaria
