// The wire form of instances' slot timelines (driver/slot_timeline.h):
// GET /v1/timeline?after=N[,N...] on an instance server and on a gateway
// (`talaria serve` too), read by the dashboard. One entry per instance:
//   {"instance", "now_s", "segments": [closed segments after the cursor,
//    oldest first], "open": the segment still open, or null}
// Times are seconds of that instance's clock; "now_s" is that clock when
// the entry was read (a gateway's cached entry of a remote instance: at the
// last poll, moved on by the wall time since), so a viewer places
// segments as "seconds ago" without comparing clocks across processes.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/time.h"
#include "driver/slot_timeline.h"

namespace talaria {

nlohmann::json TimelineToJson(std::string_view instance, TimePoint now, std::span<const TimelineSegment> segments,
                              const std::optional<TimelineSegment>& open);

// The query's `after` cursors: "after=N[,N...]" among other parameters;
// none given: empty. At most `max` numbers. False with `error` naming the
// problem on anything else (a hostile query gets a 400, never a throw).
bool ParseTimelineCursors(std::string_view query, std::size_t max, std::vector<std::uint64_t>& out,
                          std::string& error);

// A gateway's copy of a remote instance's recent timeline, filled by its
// telemetry polls while someone watches (Want within kWatchFor), so an
// unwatched gateway costs instances nothing. Thread-safe.
class TimelineCache {
 public:
  using Clock = std::chrono::steady_clock;
  static constexpr auto kWatchFor = std::chrono::seconds(10);
  static constexpr std::size_t kKept = 2048;

  // A viewer asked: keep polling for the next kWatchFor.
  void Want(Clock::time_point now);
  // Whether to poll the instance's timeline now, and from which cursor.
  bool Wanted(Clock::time_point now, std::uint64_t& after) const;
  // Takes one entry of the instance's answer (TimelineToJson's form);
  // false (changing nothing) when it is malformed.
  bool Merge(const nlohmann::json& entry, Clock::time_point received);
  // The entry for a viewer with cursor `after`.
  nlohmann::json View(std::string_view instance, std::uint64_t after, Clock::time_point now) const;

 private:
  mutable std::mutex mu_;
  Clock::time_point watched_until_{};
  std::deque<nlohmann::json> segments_;  // closed, by seq
  std::uint64_t last_closed_ = 0;
  nlohmann::json open_;  // null when none
  double now_s_ = 0;     // the instance's clock at `received_`
  Clock::time_point received_{};
};

}  // namespace talaria
