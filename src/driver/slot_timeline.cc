#include "driver/slot_timeline.h"

namespace talaria {

const char* ToString(TimelinePhase p) {
  switch (p) {
    case TimelinePhase::kPrefill:
      return "prefill";
    case TimelinePhase::kSessionPrefill:
      return "session_prefill";
    case TimelinePhase::kDecode:
      return "decode";
    case TimelinePhase::kSwitch:
      return "switch";
    case TimelinePhase::kHold:
      return "hold";
  }
  return "?";
}

nlohmann::ordered_json ToJson(const TimelineSegment& s) {
  nlohmann::ordered_json j;
  j["seq"] = s.seq;
  j["model"] = s.model;
  j["phase"] = ToString(s.phase);
  if (s.phase == TimelinePhase::kSwitch) j["path"] = ToString(s.path);
  j["start_s"] = ToSeconds(s.start);
  j["end_s"] = ToSeconds(s.end);
  j["kv_used_bytes"] = s.memory.kv_used_bytes;
  j["kv_total_bytes"] = s.memory.kv_total_bytes;
  j["host_kv_used_bytes"] = s.memory.host_kv_used_bytes;
  j["host_kv_capacity_bytes"] = s.memory.host_kv_capacity_bytes;
  return j;
}

void SlotTimeline::Close() {
  if (!open_) return;
  on_closed_(*open_);
  open_.reset();
}

void SlotTimeline::Flush() { Close(); }

void SlotTimeline::Extend(std::string_view model, TimelinePhase phase, SwitchPath path, TimePoint start,
                          TimePoint end, const Instance& instance) {
  const bool merges = open_ && open_->phase == phase && open_->model == model &&
                      (phase != TimelinePhase::kSwitch) && start <= open_->end + kMergeGap;
  if (!merges) {
    Close();
    open_.emplace();
    open_->seq = next_seq_++;
    open_->model = model;
    open_->phase = phase;
    open_->path = path;
    open_->start = start;
  }
  open_->end = end;
  open_->memory = instance.Occupancy();
}

void SlotTimeline::OnPlan(const Instance::Step& step, TimePoint now, const Instance& instance) {
  const bool holding = open_ && open_->phase == TimelinePhase::kHold;
  if (step.kind != Instance::Step::Kind::kIdle) {
    if (holding) {
      open_->end = now;
      Close();
    }
    return;
  }
  if (step.wake_at == TimePoint::max()) {  // idle, nothing held
    if (holding) open_->end = now;
    Close();
    return;
  }
  if (holding) {
    open_->end = now;
    return;
  }
  Close();
  Extend(instance.active_model(), TimelinePhase::kHold, SwitchPath::kD2d, now, now, instance);
}

void SlotTimeline::OnCommit(const Instance::Step& step, TimePoint start, TimePoint end, const Instance& instance) {
  switch (step.kind) {
    case Instance::Step::Kind::kPrefill:
      Extend(step.prefill.model->name, TimelinePhase::kPrefill, SwitchPath::kD2d, start, end, instance);
      break;
    case Instance::Step::Kind::kSessionPrefill:
      Extend(step.prefill.model->name, TimelinePhase::kSessionPrefill, SwitchPath::kD2d, start, end, instance);
      break;
    case Instance::Step::Kind::kDecode:
      Extend(step.decode.model->name, TimelinePhase::kDecode, SwitchPath::kD2d, start, end, instance);
      break;
    case Instance::Step::Kind::kSwitch:
      Extend(step.switch_step.to->name, TimelinePhase::kSwitch, step.switch_step.plan.path, start, end, instance);
      break;
    case Instance::Step::Kind::kIdle:
      break;
  }
}

}  // namespace talaria
