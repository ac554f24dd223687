#include "driver/instance_runner.h"

#include "core/error.h"

namespace talaria {

void InstanceEventBuffer::OnFirstToken(std::int64_t call_id, TimePoint at) {
  order_.push_back(Entry{Kind::kFirstToken, call_id, 0, at, 0});
}

void InstanceEventBuffer::OnTokens(std::int64_t call_id, std::int64_t generated, TimePoint at) {
  order_.push_back(Entry{Kind::kTokens, call_id, generated, at, 0});
}

template <typename Record>
std::size_t InstanceEventBuffer::Keep(std::vector<Record>& slots, std::size_t& used, const Record& record) {
  if (used < slots.size()) {
    slots[used] = record;
  } else {
    slots.push_back(record);
  }
  return used++;
}

void InstanceEventBuffer::OnFinished(const CallRecord& record) {
  order_.push_back(Entry{Kind::kFinished, 0, 0, {}, Keep(finished_, finished_used_, record)});
}

void InstanceEventBuffer::OnSwitch(const SwitchRecord& record) {
  order_.push_back(Entry{Kind::kSwitch, 0, 0, {}, Keep(switches_, switches_used_, record)});
}

void InstanceEventBuffer::OnRound(const RoundRecord& record) {
  order_.push_back(Entry{Kind::kRound, 0, 0, {}, Keep(rounds_, rounds_used_, record)});
}

void InstanceEventBuffer::DeliverTo(InstanceEvents& to) {
  for (const Entry& e : order_) {
    switch (e.kind) {
      case Kind::kFirstToken:
        to.OnFirstToken(e.call_id, e.at);
        break;
      case Kind::kTokens:
        to.OnTokens(e.call_id, e.generated, e.at);
        break;
      case Kind::kFinished:
        to.OnFinished(finished_[e.record]);
        break;
      case Kind::kSwitch:
        to.OnSwitch(switches_[e.record]);
        break;
      case Kind::kRound:
        to.OnRound(rounds_[e.record]);
        break;
    }
  }
  order_.clear();
  finished_used_ = switches_used_ = rounds_used_ = 0;
}

Duration InstanceRunner::Execute() {
  const Instance::Step& step = instance_.step_in_flight();
  timing_ = SwitchTiming{};
  Duration took{};
  Duration model{};
  StepFidelity::Phase phase = StepFidelity::kPrefill;
  switch (step.kind) {
    case Instance::Step::Kind::kPrefill:
    case Instance::Step::Kind::kSessionPrefill:
      took = engine_.Prefill(step.prefill);
      if (computes_) model = model_.Prefill(step.prefill);
      if (step.kind == Instance::Step::Kind::kSessionPrefill) phase = StepFidelity::kSessionPrefill;
      break;
    case Instance::Step::Kind::kDecode:
      took = engine_.Decode(step.decode);
      if (computes_) model = model_.Decode(step.decode);
      phase = StepFidelity::kDecode;
      break;
    case Instance::Step::Kind::kSwitch:
      timing_ = engine_.Switch(step.switch_step);
      took = FromSeconds(timing_.total_s());
      if (computes_) model = FromSeconds(model_.Switch(step.switch_step).total_s());
      phase = StepFidelity::kSwitch;
      break;
    case Instance::Step::Kind::kIdle:
      TALARIA_CHECK(false, "InstanceRunner::Execute: no step planned");
  }
  // Counted at the commit: a driver may run a computing step with its lock
  // released, and reads fidelity() under that lock.
  measured_ = computes_ ? std::optional<MeasuredStep>(MeasuredStep{phase, took, model}) : std::nullopt;
  return took;
}

void InstanceRunner::Commit(TimePoint end) {
  instance_.Commit(end, timing_, buffer_);
  if (timeline_ != nullptr) timeline_->OnCommit(instance_.step_in_flight(), instance_.step_started(), end, instance_);
  if (measured_) {
    StepFidelity::Totals& t = fidelity_.phases[measured_->phase];
    ++t.steps;
    t.measured_s += ToSeconds(measured_->took);
    t.model_s += ToSeconds(measured_->model);
    measured_.reset();
  }
}

}  // namespace talaria
