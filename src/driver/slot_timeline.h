// What an instance's GPUs did over time: the steps its driver committed,
// merged into segments of one model and one phase (prefill P, session-
// prefill SP, decode D, a switch with its path, a slot held open for a
// return), each with the memory in use when it ended. The replay writes
// them as records (timeline.jsonl, read by `talaria report`); the
// real-time instance keeps the recent ones for the dashboard.
//
// A driver reports every Plan and Commit (InstanceRunner does when a
// timeline is attached). Consecutive steps of the same model and phase
// merge when the second starts within kMergeGap of the first's end (a
// real-time driver's steps are a little apart: its bookkeeping between
// them takes wall time); anything else closes the open segment and hands
// it to the sink. A hold runs from the first idle plan that holds the
// slot (Step::wake_at set) until the next step starts or an idle plan no
// longer holds it.
//
// Not synchronized: one driver thread per instance. Records nothing that
// allocates per step (model names are views of the profiles' names, which
// outlive the instance).
#pragma once

#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string_view>

#include "core/time.h"
#include "instance/instance.h"

namespace talaria {

enum class TimelinePhase : std::uint8_t { kPrefill, kSessionPrefill, kDecode, kSwitch, kHold };
// "prefill", "session_prefill", "decode", "switch", "hold".
const char* ToString(TimelinePhase p);

struct TimelineSegment {
  std::uint64_t seq = 0;   // 1, 2, ... in the order segments open
  std::string_view model;  // the slot's model; a switch's target
  TimelinePhase phase = TimelinePhase::kDecode;
  SwitchPath path = SwitchPath::kD2d;  // kSwitch only
  TimePoint start;
  TimePoint end;
  MemoryOccupancy memory;  // when it ended (so far, while open)
};

// {"seq", "model", "phase", "path" (switches only), "start_s", "end_s",
//  "kv_used_bytes", "kv_total_bytes", "host_kv_used_bytes",
//  "host_kv_capacity_bytes"}; times in seconds of the driver's clock.
nlohmann::ordered_json ToJson(const TimelineSegment& s);

class SlotTimeline {
 public:
  using Sink = std::function<void(const TimelineSegment&)>;
  static constexpr Duration kMergeGap = std::chrono::milliseconds(50);

  // `on_closed` hears each segment once, when it closes.
  explicit SlotTimeline(Sink on_closed) : on_closed_(std::move(on_closed)) {}

  // After Instance::Plan at `now` returned `step`.
  void OnPlan(const Instance::Step& step, TimePoint now, const Instance& instance);
  // After the planned `step` (started at `start`) was committed at `end`.
  void OnCommit(const Instance::Step& step, TimePoint start, TimePoint end, const Instance& instance);
  // Closes the open segment (at the end of a run).
  void Flush();
  // The segment still open, if any (a decode in progress, a hold).
  const std::optional<TimelineSegment>& open() const { return open_; }

 private:
  void Close();
  void Extend(std::string_view model, TimelinePhase phase, SwitchPath path, TimePoint start, TimePoint end,
              const Instance& instance);

  Sink on_closed_;
  std::optional<TimelineSegment> open_;
  std::uint64_t next_seq_ = 1;
};

}  // namespace talaria
