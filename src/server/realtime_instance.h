// The real-time driver of one instance: the same Instance scheduler the
// simulator drives in virtual time, driven here by a steady clock on its own
// thread, with an engine executing each planned step (DESIGN.md rule 1: one
// policy object, two drivers). The servers submit calls from any thread and
// get first-token and completion callbacks.
//
// With the sim engine this is an emulation, not a GPU: a step lasts its
// profiled duration divided by `time_scale` (virtual seconds per wall
// second; 1 = real time, 100 = a hundred times faster). Times reported to
// callbacks and in telemetry are virtual seconds since Start(). An engine
// that computes (the cpu engine) runs in real time (time_scale 1), with the
// driver's lock released while a step computes, and its generated token ids
// reach the callbacks.
//
// Thread safety: Submit, Snapshot and Stop may be called from any thread;
// callbacks run on the driver's thread and must not block.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <thread>
#include <unordered_map>
#include <vector>

#include "core/clock.h"
#include "driver/instance_runner.h"
#include "driver/slot_timeline.h"
#include "engine/engine.h"
#include "instance/instance.h"

namespace talaria {

class RealtimeInstance {
 public:
  struct Callbacks {
    // After each step that generated tokens for the call: how many it has
    // so far, and the ids of the new ones (empty when the engine only
    // models time). The first token comes with on_first_token.
    std::function<void(std::span<const std::int32_t>, TimePoint)> on_first_token;
    std::function<void(std::int64_t, std::span<const std::int32_t>, TimePoint)> on_tokens;
    std::function<void(const CallRecord&)> on_finished;
  };

  // `profiles` must outlive the driver. Throws InputError for a bad config.
  // `clock` may be shared so several drivers and a gateway agree on time.
  RealtimeInstance(InstanceConfig config, const ProfileSet& profiles, std::unique_ptr<Engine> engine,
                   double time_scale = 1.0, std::shared_ptr<const SteadyClock> clock = nullptr);
  ~RealtimeInstance();
  RealtimeInstance(const RealtimeInstance&) = delete;
  RealtimeInstance& operator=(const RealtimeInstance&) = delete;

  // Loads the first resident model (warm-up) and starts the driver thread.
  void Start();
  // Stops the thread; calls still in flight get no further callbacks.
  void Stop();

  // Called (on the driver thread, unlocked) after every model switch.
  // REQUIRES: before Start().
  void SetSwitchObserver(std::function<void(const SwitchRecord&)> observer) { on_switch_ = std::move(observer); }
  // The same after every round. REQUIRES: before Start().
  void SetRoundObserver(std::function<void(const RoundRecord&)> observer) { on_round_ = std::move(observer); }

  // Queues a call; `call.chain` and `call.prompt_ids` are copied, so the
  // caller need not keep them.
  void Submit(CallRequest call, Callbacks callbacks);
  // Drops a call that has not finished: no further callbacks for it, and its
  // slot and KV are freed at the next step boundary. False if it already
  // finished (its completion callback runs or has run).
  bool Cancel(std::int64_t call_id);
  InstanceTelemetry Snapshot();
  // The scheduler's counters so far (a copy).
  InstanceCounters Counters();
  // Measured against modelled step time, and the driver's time between
  // steps (driver/step_fidelity.h), so far (a copy).
  StepFidelity Fidelity();
  // Operator residency control (see Instance::AdminOpen / AdminClose).
  Instance::AdminResult Admin(const std::string& model, bool open);
  bool Hosts(const std::string& model) const { return instance_.Hosts(model); }
  const std::string& name() const { return instance_.name(); }
  // Virtual time now.
  TimePoint Now() const;

  // What the instance's GPUs did lately (driver/slot_timeline.h): the
  // closed segments numbered after `after` (0: every one kept; at most the
  // last kTimelineKept), oldest first; the one still open, if any (it may
  // grow: a poller asks again after the last closed one it has); and the
  // virtual time now.
  static constexpr std::size_t kTimelineKept = 2048;
  struct TimelineView {
    TimePoint now;
    std::vector<TimelineSegment> segments;
    std::optional<TimelineSegment> open;
  };
  TimelineView Timeline(std::uint64_t after);
  // Whether the engine computes real tokens (it needs prompt ids).
  bool computes_tokens() const { return !engine_->emulated(); }

 private:
  struct Pending {
    CallRequest call;
    std::vector<PrefixHash> chain;
    std::vector<std::int32_t> prompt;
    std::int64_t delivered = 0;  // output token ids passed to callbacks
    Callbacks callbacks;
  };
  class Events;

  void Loop();
  // The call in flight with this id, or null (finished or cancelled).
  Pending* Find(std::int64_t call_id);
  // Names finished calls' context blocks by their real tokens (before Commit).
  void NameContexts(const Instance::Step& step);
  // The engine's new output ids for a call since the last callback.
  std::vector<std::int32_t> NewTokens(Pending& p, std::int64_t generated);

  Instance instance_;
  std::unique_ptr<Engine> engine_;  // not null
  InstanceRunner runner_;
  double time_scale_;
  std::shared_ptr<const SteadyClock> clock_;
  std::mutex mu_;
  // Work arrived (a call, a cancel, an admin change, stop): notified only
  // while the loop waits idle for it (idle_). An emulated step sleeps on
  // stop_cv_ instead, which only Stop() wakes: under load a submission per
  // step used to wake the sleeping step for nothing (two futex calls and a
  // context switch each).
  std::condition_variable cv_;
  std::condition_variable stop_cv_;
  bool idle_ = false;                                     // guarded by mu_
  std::deque<std::unique_ptr<Pending>> inbox_;            // guarded by mu_
  std::unordered_map<std::int64_t, std::unique_ptr<Pending>> in_flight_;  // guarded by mu_
  std::vector<std::int64_t> cancels_;                                     // guarded by mu_
  // Cancelled calls, kept until the step in flight ends (it may read them).
  std::vector<std::unique_ptr<Pending>> cancelled_;                       // guarded by mu_
  bool stop_ = false;                                      // guarded by mu_
  std::function<void(const SwitchRecord&)> on_switch_;
  std::function<void(const RoundRecord&)> on_round_;
  std::deque<TimelineSegment> recent_;  // closed segments, the last kTimelineKept; guarded by mu_
  SlotTimeline timeline_;               // fed by runner_ under mu_
  std::thread thread_;
};

}  // namespace talaria
