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
  switch (step.kind) {
    case Instance::Step::Kind::kPrefill:
    case Instance::Step::Kind::kSessionPrefill:
      return engine_.Prefill(step.prefill);
    case Instance::Step::Kind::kDecode:
      return engine_.Decode(step.decode);
    case Instance::Step::Kind::kSwitch:
      timing_ = engine_.Switch(step.switch_step);
      return FromSeconds(timing_.total_s());
    case Instance::Step::Kind::kIdle:
      break;
  }
  TALARIA_CHECK(false, "InstanceRunner::Execute: no step planned");
  return Duration{};
}

}  // namespace talaria
