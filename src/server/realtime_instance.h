// The real-time driver of one instance: the same Instance scheduler the
// simulator drives in virtual time, driven here by a steady clock on its own
// thread, with an engine executing each planned step (DESIGN.md rule 1: one
// policy object, two drivers). The servers submit calls from any thread and
// get first-token and completion callbacks.
//
// With the sim engine this is an emulation, not a GPU: a step lasts its
// profiled duration divided by `time_scale` (virtual seconds per wall
// second; 1 = real time, 100 = a hundred times faster). Times reported to
// callbacks and in telemetry are virtual seconds since Start().
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
#include <thread>
#include <unordered_map>
#include <vector>

#include "core/clock.h"
#include "engine/engine.h"
#include "instance/instance.h"

namespace talaria {

class RealtimeInstance {
 public:
  struct Callbacks {
    std::function<void(TimePoint)> on_first_token;
    // Output tokens generated so far, after each decode step.
    std::function<void(std::int64_t, TimePoint)> on_tokens;
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

  // Queues a call; `call.chain` is copied, so the caller need not keep it.
  void Submit(CallRequest call, Callbacks callbacks);
  // Drops a call that has not finished: no further callbacks for it, and its
  // slot and KV are freed at the next step boundary. False if it already
  // finished (its completion callback runs or has run).
  bool Cancel(std::int64_t call_id);
  InstanceTelemetry Snapshot();
  // Operator residency control (see Instance::AdminOpen / AdminClose).
  Instance::AdminResult Admin(const std::string& model, bool open);
  bool Hosts(const std::string& model) const { return instance_.Hosts(model); }
  const std::string& name() const { return instance_.name(); }
  // Virtual time now.
  TimePoint Now() const;

 private:
  struct Pending {
    CallRequest call;
    std::vector<PrefixHash> chain;
    Callbacks callbacks;
  };
  class Events;

  void Loop();

  Instance instance_;
  std::unique_ptr<Engine> engine_;
  double time_scale_;
  std::shared_ptr<const SteadyClock> clock_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::unique_ptr<Pending>> inbox_;            // guarded by mu_
  std::unordered_map<std::int64_t, std::unique_ptr<Pending>> in_flight_;  // guarded by mu_
  std::vector<std::int64_t> cancels_;                                     // guarded by mu_
  bool stop_ = false;                                      // guarded by mu_
  std::vector<std::function<void()>> deferred_;            // callbacks to run unlocked
  std::function<void(const SwitchRecord&)> on_switch_;
  std::thread thread_;
};

}  // namespace talaria
