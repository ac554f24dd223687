#include "driver/timer.h"

#include <algorithm>

namespace talaria {

void ManualTimer::At(TimePoint at, std::function<void()> fn) {
  std::lock_guard<std::mutex> lock(mu_);
  queue_.push(Entry{at, next_seq_++, std::move(fn)});
}

void ManualTimer::Advance(Duration d) { AdvanceTo(clock_.Now() + d); }

void ManualTimer::AdvanceTo(TimePoint t) {
  for (;;) {
    std::function<void()> fn;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (queue_.empty() || queue_.top().at > t) break;
      clock_.AdvanceTo(std::max(clock_.Now(), queue_.top().at));
      fn = std::move(const_cast<Entry&>(queue_.top()).fn);
      queue_.pop();
    }
    fn();
  }
  clock_.AdvanceTo(std::max(clock_.Now(), t));
}

std::size_t ManualTimer::pending() const {
  std::lock_guard<std::mutex> lock(mu_);
  return queue_.size();
}

}  // namespace talaria
