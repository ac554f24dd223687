#include "router/cluster_view.h"

#include <algorithm>

#include "core/error.h"
#include "core/stats.h"
#include "core/units.h"
#include "router/router.h"

namespace talaria {
namespace {

// A RankRow's sums, formed in the order the cost pass used to form them.
double QueueSeconds(const Candidate& c, double lease_unit_s) {
  return c.queued_work_s + c.overlay_work_s + c.lease_units * lease_unit_s;
}
double RoundSeconds(const Candidate& c, const InstanceStatus& s, double lease_unit_s) {
  return c.round_estimate_s + s.overlay_total_s + s.lease_units * lease_unit_s;
}

}  // namespace

ClusterView::ClusterView(const ProfileSet& profiles, const std::vector<std::string>& names,
                         const std::vector<std::int32_t>& tps, double lease_unit_s)
    : profiles_(profiles), lease_unit_s_(lease_unit_s) {
  TALARIA_CHECK(names.size() == tps.size(), "one tp per instance");
  for (std::size_t i = 0; i < names.size(); ++i) {
    InstanceState s;
    s.tp = tps[i];
    instances_.push_back(std::move(s));
    status_.emplace_back();
  }
}

std::int32_t ClusterView::ModelId(std::string_view name) {
  // A catalogue of a few models: comparing names beats hashing one.
  if (model_names_.size() <= kScannedCatalogue) {
    for (std::size_t id = 0; id < model_names_.size(); ++id) {
      if (model_names_[id] == name) return static_cast<std::int32_t>(id);
    }
  }
  auto it = model_ids_.find(name);
  if (it != model_ids_.end()) return it->second;
  const auto id = static_cast<std::int32_t>(model_names_.size());
  model_ids_.emplace(std::string(name), id);
  model_names_.emplace_back(name);
  output_estimate_.push_back(-1);
  by_model_.emplace_back(instances_.size());
  rows_.emplace_back(instances_.size());
  for (std::size_t i = 0; i < instances_.size(); ++i) {
    instances_[i].profile_of.push_back(profiles_.Find(model_names_.back(), instances_[i].tp));
    by_model_.back()[i].profile = instances_[i].profile_of.back();
  }
  return id;
}

std::int32_t ClusterView::SnapshotModel(InstanceState& inst, std::size_t position, const std::string& name) {
  if (position < inst.model_of.size()) {
    std::int32_t& id = inst.model_of[position];
    if (model_names_[static_cast<std::size_t>(id)] != name) id = ModelId(name);
    return id;
  }
  inst.model_of.push_back(ModelId(name));
  return inst.model_of.back();
}

void ClusterView::Remap(std::int32_t index, InstanceState& inst, const InstanceTelemetry& t,
                        const RouterOptions& options) {
  const auto i = static_cast<std::size_t>(index);
  for (auto& per_model : by_model_) {
    per_model[i].serves = false;
    per_model[i].queued_work_s = 0;
    per_model[i].forced_reopen_s = 0;
  }
  inst.load_s = 0;
  const double total = static_cast<double>(t.kv_total_bytes);
  // mu_j of Eq.2 rises with KV use and falls with staging slack.
  const double kv_used_fraction = total > 0 ? 1.0 - static_cast<double>(t.kv_free_bytes) / total : 0.0;
  const double slack_fraction = total > 0 ? std::min(1.0, static_cast<double>(t.staging_slack_bytes) / total) : 1.0;
  const double mu = options.hbm_price_s_per_gib * (1.0 + kv_used_fraction) * (2.0 - slack_fraction);
  constexpr double kInf = std::numeric_limits<double>::infinity();
  for (std::size_t position = 0; position < t.models.size(); ++position) {
    const ModelTelemetry& mt = t.models[position];
    const std::int32_t id = SnapshotModel(inst, position, mt.name);
    Candidate& c = by_model_[static_cast<std::size_t>(id)][i];
    c.serves = true;
    c.queued_work_s = mt.queued_work_s;
    c.forced_reopen_s = mt.forced_reopen_s;
    c.round_estimate_s = t.round_estimate_s;
    // The snapshot's request-independent terms, straight into the row
    // (RefreshRows, at the end of ApplySnapshot, forms the sums).
    RankRow& row = rows_[static_cast<std::size_t>(id)][i];
    row.activation_s = mt.active ? 0.0 : mt.resident ? mt.switch_in_s : mt.full_open_s + mt.switch_in_s;
    row.admit_wait_s = mt.admit_wait_s;
    row.enters_mid_slot = mt.active && t.session_prefill;
    // Eq.5 applies where the instance reports both a bound and an estimate.
    row.round_bound_s = t.round_bound_s > 0 && t.round_estimate_s > 0 ? t.round_bound_s : kInf;
    row.kv_total_bytes = total > 0 ? total : kInf;
    // Eq.2's T_swap, plus the reopen of a busy model the open would close
    // on a full instance (the instance's own choice: telemetry.h).
    row.replica_threshold_s = mt.full_open_s + mt.forced_reopen_s +
                              mu * ToGiB(mt.weight_bytes_per_rank) + options.replica_penalty_s;
    row.prefill_scale = mt.prefill_scale;
    row.decode_scale = mt.decode_scale;
    row.resident = mt.resident;
    inst.load_s += mt.queued_work_s;
  }
}

ClusterView::SessionUpdate ClusterView::ApplySnapshot(std::int32_t index, const InstanceTelemetry& t,
                                                      const RouterOptions& options) {
  const auto i = static_cast<std::size_t>(index);
  InstanceState& inst = instances_[i];
  InstanceStatus& status = status_[i];
  if (status.has_snapshot && t.version <= inst.snapshot_version) return SessionUpdate::kNone;  // out of order
  // A delta applies only on top of the snapshot it was taken against; one
  // that does not (a lost snapshot) keeps the old session index and asks for
  // a full snapshot next.
  const bool delta_applies =
      t.sessions_delta && !inst.wants_full && status.has_snapshot && t.sessions_base == inst.snapshot_version;
  inst.snapshot_version = t.version;
  status.snapshot_at = t.taken_at;
  status.has_snapshot = true;
  Remap(index, inst, t, options);
  SessionUpdate update = SessionUpdate::kNone;
  if (!t.sessions_delta) {
    update = SessionUpdate::kReplace;
    inst.wants_full = false;
  } else if (delta_applies) {
    update = SessionUpdate::kApplyDelta;
  } else {
    inst.wants_full = true;
  }
  // The overlay keeps only forwards the snapshot could not have seen.
  while (!inst.overlay.empty() && inst.overlay.front().at <= status.snapshot_at) {
    by_model_[static_cast<std::size_t>(inst.overlay.front().model)][i].overlay_work_s -= inst.overlay.front().work_s;
    status.overlay_total_s -= inst.overlay.front().work_s;
    inst.overlay.pop_front();
  }
  if (inst.overlay.empty()) {
    for (auto& per_model : by_model_) per_model[i].overlay_work_s = 0;
    status.overlay_total_s = 0;
  }
  RefreshRows(index);
  return update;
}

void ClusterView::AddForward(std::int32_t i, std::int32_t model, TimePoint now, double work_s) {
  instances_[static_cast<std::size_t>(i)].overlay.push_back(Forward{now, model, work_s});
  by_model_[static_cast<std::size_t>(model)][static_cast<std::size_t>(i)].overlay_work_s += work_s;
  status_[static_cast<std::size_t>(i)].overlay_total_s += work_s;
  // Only the overlay sums moved: this model's queue and every model's round.
  const auto at = static_cast<std::size_t>(i);
  for (std::size_t m = 0; m < by_model_.size(); ++m) {
    const Candidate& c = by_model_[m][at];
    RankRow& row = rows_[m][at];
    if (m == static_cast<std::size_t>(model)) row.queue_s = QueueSeconds(c, lease_unit_s_);
    row.round_s = RoundSeconds(c, status_[at], lease_unit_s_);
  }
}

void ClusterView::RefreshRows(std::int32_t index) {
  const auto i = static_cast<std::size_t>(index);
  const InstanceStatus& s = status_[i];
  for (std::size_t m = 0; m < by_model_.size(); ++m) {
    const Candidate& c = by_model_[m][i];
    RankRow& row = rows_[m][i];
    row.profile = c.profile;
    row.snapshot_at = s.snapshot_at;
    row.kind = !c.serves || c.profile == nullptr      ? RankRow::Kind::kSkip
               : !s.has_snapshot || !s.healthy        ? RankRow::Kind::kDown
                                                      : RankRow::Kind::kCheck;
    row.queue_s = QueueSeconds(c, lease_unit_s_);
    row.round_s = RoundSeconds(c, s, lease_unit_s_);
  }
}

void ClusterView::ObserveOutput(std::int32_t model, std::int64_t output_tokens) {
  // Each completion moves the estimate a tenth of the way: it follows a
  // change in a model's output lengths over about ten calls.
  constexpr double kNewestWeight = 0.1;
  double& estimate = output_estimate_[static_cast<std::size_t>(model)];
  const auto tokens = static_cast<double>(output_tokens);
  estimate = estimate < 0 ? tokens : EwmaStep(estimate, tokens, kNewestWeight);
}

}  // namespace talaria
