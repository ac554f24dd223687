// Residency: which models are open here (max_resident), warm-up, operator
// open/close, staging of the next model's weights, and the HBM peak.
#include "instance/instance_parts.h"

#include "core/error.h"
#include "core/units.h"

namespace talaria {

bool Instance::Resident(const std::string& model) const {
  const std::int32_t i = ModelIndex(model);
  return i >= 0 && models_[static_cast<std::size_t>(i)]->resident;
}

double Instance::OpenModel(Model& m, bool switching) {
  if (m.resident) return 0;
  m.resident = true;
  ++counters_.model_opens;
  // Over the limit, close models until within it (CloseVictim's choice).
  while (Model* victim = CloseVictim(m, switching)) {
    victim->resident = false;
    ++counters_.model_closes;
  }
  return m.full_open_s;
}

Instance::Model* Instance::CloseVictim(const Model& m, bool switching) const {
  // The least recently active idle model. At a switch the outgoing model
  // leaves the GPUs, so when no open model is idle one with queued work
  // closes too: its weights do not fit beside the new model's, and its next
  // slot opens it again. Of those, the one whose next slot comes last in
  // round order (Belady's choice: slots follow the catalogue's order, so
  // the future is known); least recently active would be the worst choice
  // in a cycle through more models with work than fit, opening a model at
  // every switch. Outside a switch (an operator's open) the active model
  // and models with work stay open, over the limit for now.
  std::int32_t open = m.resident ? 0 : 1;  // `m` counts as open
  for (const auto& other : models_) open += other->resident;
  if (config_.max_resident <= 0 || open <= config_.max_resident) return nullptr;
  const auto n = static_cast<std::int32_t>(models_.size());
  const auto slots_until = [&](const Model& other) { return (other.id - m.id + n) % n; };
  Model* victim = nullptr;
  bool victim_idle = false;
  for (const auto& other : models_) {
    if (!other->resident || other.get() == &m) continue;
    const bool idle = !HasWork(*other) && (switching || other->id != active_);
    if (!idle && !switching) continue;
    const bool better = victim == nullptr || (idle && !victim_idle) ||
                        (idle == victim_idle && (idle ? other->last_active < victim->last_active
                                                      : slots_until(*other) > slots_until(*victim)));
    if (better) {
      victim = other.get();
      victim_idle = idle;
    }
  }
  return victim;  // null: every open model has work, over the limit for now
}

double Instance::ForcedReopenSeconds(const Model& m) const {
  if (m.resident) return 0;
  const Model* victim = CloseVictim(m, /*switching=*/true);
  return victim != nullptr && HasWork(*victim) ? victim->full_open_s : 0;
}

Instance::AdminResult Instance::AdminOpen(const std::string& model) {
  const std::int32_t i = ModelIndex(model);
  if (i < 0) return AdminResult::kUnknownModel;
  Model& m = *models_[static_cast<std::size_t>(i)];
  if (m.resident) return AdminResult::kAlready;
  OpenModel(m, /*switching=*/false);
  return AdminResult::kDone;
}

Instance::AdminResult Instance::AdminClose(const std::string& model) {
  const std::int32_t i = ModelIndex(model);
  if (i < 0) return AdminResult::kUnknownModel;
  Model& m = *models_[static_cast<std::size_t>(i)];
  if (!m.resident) return AdminResult::kAlready;
  if (i == active_ || HasWork(m)) return AdminResult::kBusy;
  m.resident = false;
  ++counters_.model_closes;
  return AdminResult::kDone;
}

void Instance::Warmup(const std::string& model, TimePoint now) {
  TALARIA_CHECK(active_ < 0 && !in_flight_, "warm-up after serving started");
  active_ = ModelIndex(model);
  TALARIA_CHECK(active_ >= 0, "warm-up of a model this instance does not host");
  Active().resident = true;
  layout_.Activate(model);
  pool_.Format(layout_.kv(), Active().block_bytes);
  StageNextSwitch(now);
}

void Instance::StageNextSwitch(TimePoint now) {
  if (!config_.ablation.d2d_staging || models_.size() < 2 || active_ < 0) return;
  const std::int32_t target = StagingTarget();
  if (target < 0) return;
  const Model& next = *models_[static_cast<std::size_t>(target)];
  if (next.name == stager_.staged_model()) return;  // already staging it: keep what is copied
  stager_.Begin(next.name, next.profile->weight_bytes_per_rank, now, pool_);
}

std::int32_t Instance::StagingTarget() const {
  // A switch to a closed model opens it whole from host (PlanSwitch), so
  // only a resident model's switch can gather staged chunks: closed models
  // are passed over, whether the round opens them next or defers them.
  std::int32_t first_resident = -1;
  for (std::int32_t k = 1; k < static_cast<std::int32_t>(models_.size()); ++k) {
    const std::int32_t i = ModelAfter(active_, k);
    const Model& m = *models_[static_cast<std::size_t>(i)];
    if (!m.resident) continue;
    if (HasWork(m)) return i;
    if (first_resident < 0) first_resident = i;
  }
  return first_resident;
}

void Instance::TrackHbm() {
  const std::int64_t used =
      layout_.weights().size() + pool_.used_bytes() + stager_.StagedBytes() + layout_.graph_pool().size() +
      layout_.runtime().size() +
      static_cast<std::int64_t>(config_.non_bump_reserved_gib * static_cast<double>(kGiB));
  counters_.hbm_peak_bytes = std::max(counters_.hbm_peak_bytes, used);
}

}  // namespace talaria
