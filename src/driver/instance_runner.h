// Runs one instance's scheduler on an engine: the one Plan -> Engine ->
// Commit dispatch that every driver uses (the simulator in virtual time, the
// real-time instance servers, the scheduler's tests).
//
// A driver plans a step, has the engine execute it (the sim engine models
// its duration from the profile; a computing engine runs it and measures),
// waits the duration out in its own time, then commits it. The events of a
// commit (first tokens, tokens, finished calls, switches, rounds) are
// buffered and handed over only when the driver calls Deliver, after the
// scheduler's state is consistent again. That is the one re-entrancy rule:
// an event handler may enqueue or cancel calls on this instance (a session's
// next call, a router's completion hook), and never runs inside the
// scheduler. The simulator delivers at once; the real-time driver delivers
// with its lock released.
//
// Not synchronized: one driver thread per instance.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "driver/slot_timeline.h"
#include "driver/step_fidelity.h"
#include "engine/engine.h"
#include "engine/sim_engine.h"
#include "instance/instance.h"

namespace talaria {

// Instance events kept in the order they happened, to hand over later.
class InstanceEventBuffer final : public InstanceEvents {
 public:
  void OnFirstToken(std::int64_t call_id, TimePoint at) override;
  void OnTokens(std::int64_t call_id, std::int64_t generated, TimePoint at) override;
  void OnFinished(const CallRecord& record) override;
  void OnSwitch(const SwitchRecord& record) override;
  void OnRound(const RoundRecord& record) override;

  // Hands every buffered event to `to`, in order, and empties the buffer
  // (keeping its storage). REQUIRES: the handlers commit no step of the
  // instance whose events these are (the driver alone does that).
  void DeliverTo(InstanceEvents& to);
  bool empty() const { return order_.empty(); }

 private:
  enum class Kind : std::uint8_t { kFirstToken, kTokens, kFinished, kSwitch, kRound };
  struct Entry {
    Kind kind;
    std::int64_t call_id = 0;    // kFirstToken, kTokens
    std::int64_t generated = 0;  // kTokens
    TimePoint at;                // kFirstToken, kTokens
    std::size_t record = 0;      // kFinished, kSwitch, kRound: index into its vector
  };
  // Records are copied into slots kept from earlier commits (the first
  // `*_used_`): assigning over a kept record reuses its strings' storage, so
  // a warm buffer allocates nothing.
  template <typename Record>
  static std::size_t Keep(std::vector<Record>& slots, std::size_t& used, const Record& record);

  std::vector<Entry> order_;
  std::vector<CallRecord> finished_;
  std::vector<SwitchRecord> switches_;
  std::vector<RoundRecord> rounds_;
  std::size_t finished_used_ = 0;
  std::size_t switches_used_ = 0;
  std::size_t rounds_used_ = 0;
};

class InstanceRunner {
 public:
  // Both must outlive the runner.
  InstanceRunner(Instance& instance, Engine& engine)
      : instance_(instance), engine_(engine), computes_(!engine.emulated()) {}
  InstanceRunner(const InstanceRunner&) = delete;
  InstanceRunner& operator=(const InstanceRunner&) = delete;

  Instance& instance() { return instance_; }
  const Instance& instance() const { return instance_; }

  // The next step from `now` (Instance::Plan; `horizon` bounds decode
  // batches). kIdle: nothing to run until an arrival or step.wake_at.
  const Instance::Step& Plan(TimePoint now, TimePoint horizon) {
    const Instance::Step& step = instance_.Plan(now, horizon);
    if (timeline_ != nullptr) timeline_->OnPlan(step, now, instance_);
    return step;
  }
  // Runs the planned step on the engine and returns how long it takes; a
  // switch's phases are kept for the commit. With an engine that computes,
  // the measured duration and the sim engine's for the same step are added
  // to fidelity() at its commit.
  // REQUIRES: a planned step that is not kIdle.
  Duration Execute();
  // The step ended at `end`: commits it (with the switch phases Execute
  // measured), buffering its events for Deliver.
  void Commit(TimePoint end);
  // Commits the first `first` iterations of the decode step in flight as
  // ending at `first_end` (Instance::SplitDecode), buffering events.
  void SplitDecode(TimePoint first_end, std::int32_t first) {
    const TimePoint start = instance_.step_started();
    instance_.SplitDecode(first_end, first, buffer_);
    if (timeline_ != nullptr) timeline_->OnCommit(instance_.step_in_flight(), start, first_end, instance_);
  }
  // Reports every Plan and Commit to `timeline` from now on (null: none).
  // It must outlive the runner or be detached first.
  void SetTimeline(SlotTimeline* timeline) { timeline_ = timeline; }
  // Ends the round in progress so its record is buffered (Instance::Flush).
  void Flush() { instance_.Flush(buffer_); }
  // Hands the buffered events to `to` (see the header comment).
  void Deliver(InstanceEvents& to) { buffer_.DeliverTo(to); }
  // Measured against modelled step time so far; a driver adds its own
  // boundary time here.
  StepFidelity& fidelity() { return fidelity_; }
  const StepFidelity& fidelity() const { return fidelity_; }

 private:
  Instance& instance_;
  Engine& engine_;
  const bool computes_;  // the engine measures its steps (fidelity_ counts them)
  SwitchTiming timing_;
  InstanceEventBuffer buffer_;
  SimEngine model_;  // what the simulator would charge (fidelity_)
  struct MeasuredStep {
    StepFidelity::Phase phase;
    Duration took;
    Duration model;
  };
  std::optional<MeasuredStep> measured_;  // the computing step in flight, counted at its commit
  StepFidelity fidelity_;
  SlotTimeline* timeline_ = nullptr;
};

}  // namespace talaria
