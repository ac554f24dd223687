// The servers' Timer (driver/timer.h): callbacks fire on one I/O thread of
// its own (an IoLoop with Boost.Asio steady timers) when a Clock's timeline
// reaches their time. The clock may run faster than the wall
// (`time_scale`, the sim engine's emulated seconds per wall second), so a
// callback due `d` emulated seconds from now fires after d / time_scale of
// wall time.
//
// Thread safety: At may be called from any thread; callbacks run on the
// timer's thread, one at a time. After Stop no callback runs.
#pragma once

#include <functional>
#include <memory>

#include "core/clock.h"
#include "driver/timer.h"
#include "server/io_loop.h"

namespace talaria {

class AsioTimer final : public Timer {
 public:
  // REQUIRES: clock != nullptr, time_scale > 0.
  AsioTimer(std::shared_ptr<const Clock> clock, double time_scale);
  ~AsioTimer() override;
  AsioTimer(const AsioTimer&) = delete;
  AsioTimer& operator=(const AsioTimer&) = delete;

  void Start() { loop_.Start(); }
  // Stops the thread; pending callbacks never run. Idempotent.
  void Stop() { loop_.Stop(); }
  void At(TimePoint at, std::function<void()> fn) override;

 private:
  std::shared_ptr<const Clock> clock_;
  double time_scale_;
  IoLoop loop_;
};

}  // namespace talaria
