// The router's view of the cluster (paper §4.1): per instance, what its
// latest telemetry snapshot said, whether it is healthy, the in-flight
// overlay (calls forwarded since that snapshot) and the admission units its
// live leases hold; per (model, instance), the request-independent terms
// the cost ranking reads, laid out densely per model so a decision scans one
// array instead of chasing each instance's snapshot.
//
// Policy code: takes `now`, no clock, no I/O. Not synchronized.
#pragma once

#include <cstdint>
#include <deque>
#include <limits>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "core/strings.h"
#include "core/time.h"
#include "profile/profile.h"
#include "telemetry/telemetry.h"

namespace talaria {

struct RouterOptions;

// The inputs of a (model, instance) pair's RankRow sums that move between
// snapshots: the snapshot's queue and round estimate, and what the
// router's own placements add (overlay_work_s, live_leases); and what the
// lease check reads (forced_reopen_s, full_router_policy.h).
struct Candidate {
  const ModelProfile* profile = nullptr;
  double queued_work_s = 0;
  double forced_reopen_s = 0;  // the snapshot's (ModelTelemetry::forced_reopen_s)
  double overlay_work_s = 0;
  double round_estimate_s = 0;
  std::int32_t live_leases = 0;  // this model's on this instance
  double lease_units = 0;        // the admission units they hold in its next slot
  bool serves = false;
};

// What one decision's cost pass reads of a (model, instance) pair, in one
// dense array per model (96 bytes a row, read in index order: the pass at
// 1,024 instances streams one such array). The snapshot's
// request-independent terms are written here when it arrives; the sums
// whose inputs move between snapshots (Candidate, InstanceStatus) are
// re-formed whenever one does, in the order the pass used to form them, so
// the costs are the same to the bit.
struct RankRow {
  enum class Kind : std::uint8_t {
    kSkip,   // does not serve the model (or has no profile for it)
    kDown,   // serves it, but has no snapshot yet or is unhealthy: stale
    kCheck,  // rankable while its snapshot is fresh
  };
  const ModelProfile* profile = nullptr;
  TimePoint snapshot_at;
  double queue_s = 0;  // queued + overlay + the lease units held for this model
  double round_s = 0;  // round estimate + overlay (all models) + the lease units held here
  double round_bound_s = std::numeric_limits<double>::infinity();   // Eq.5's bound; inf: none
  double kv_total_bytes = std::numeric_limits<double>::infinity();  // inf: not reported
  double admit_wait_s = 0;   // until the model's next P phase, at the snapshot
  double prefill_scale = 1;  // measured / profiled, from the instance's rounds
  double decode_scale = 1;
  double activation_s = 0;  // C_act: 0 active, switch when resident, open + switch otherwise
  double replica_threshold_s = 0;  // Eq.2's right-hand side, T_swap + mu_j * dW_m + nu_m
  Kind kind = Kind::kSkip;
  bool resident = false;
  bool enters_mid_slot = false;  // active, with session-prefill: continuations enter mid-slot
};

// What every decision reads of an instance, kept in one dense array (24
// bytes an instance) apart from the rest of its state.
struct InstanceStatus {
  TimePoint snapshot_at;
  double overlay_total_s = 0;
  double lease_units = 0;  // every live lease's here, all models
  bool has_snapshot = false;
  bool healthy = true;
};

class ClusterView {
 public:
  // `names` and `tps` describe the instances in index order; `profiles`
  // must outlive the view.
  // `lease_unit_s`: the admission a live lease holds (RouterOptions).
  ClusterView(const ProfileSet& profiles, const std::vector<std::string>& names, const std::vector<std::int32_t>& tps,
              double lease_unit_s);

  std::int32_t size() const { return static_cast<std::int32_t>(instances_.size()); }
  // The catalogue id of a model (assigned on first sight).
  std::int32_t ModelId(std::string_view name);
  // The name of catalogue id `model`.
  const std::string& ModelName(std::int32_t model) const { return model_names_[static_cast<std::size_t>(model)]; }
  const std::vector<Candidate>& Candidates(std::int32_t model) const {
    return by_model_[static_cast<std::size_t>(model)];
  }
  // Index-aligned with Candidates(model): what the cost pass scans.
  const std::vector<RankRow>& Rows(std::int32_t model) const { return rows_[static_cast<std::size_t>(model)]; }
  const InstanceStatus& status(std::int32_t i) const { return status_[static_cast<std::size_t>(i)]; }
  const ModelProfile* ProfileOf(std::int32_t i, std::int32_t model) const {
    return instances_[static_cast<std::size_t>(i)].profile_of[static_cast<std::size_t>(model)];
  }

  // A snapshot from instance i (out of order ones ignored): the instance's
  // terms replace the old ones and the overlay keeps only what the snapshot
  // could not have seen. `sessions` tells the caller how to apply the
  // snapshot's session list.
  enum class SessionUpdate { kNone, kReplace, kApplyDelta };
  SessionUpdate ApplySnapshot(std::int32_t i, const InstanceTelemetry& t, const RouterOptions& options);
  bool WantsFullSnapshot(std::int32_t i) const { return instances_[static_cast<std::size_t>(i)].wants_full; }
  void SetHealthy(std::int32_t i, bool healthy) {
    bool& h = status_[static_cast<std::size_t>(i)].healthy;
    if (h == healthy) return;  // every other change refreshes the rows itself: they are current
    h = healthy;
    RefreshRows(i);
  }
  // The sessions instance i's snapshots say it holds (index bookkeeping of
  // the session table).
  std::unordered_set<std::string, StringHash, std::equal_to<>>& IndexedSessions(std::int32_t i) {
    return instances_[static_cast<std::size_t>(i)].indexed_sessions;
  }

  // Healthy, with a snapshot no older than `stale_after_s`.
  bool Fresh(std::int32_t i, TimePoint now, double stale_after_s) const {
    const InstanceStatus& s = status_[static_cast<std::size_t>(i)];
    return s.healthy && s.has_snapshot && ToSeconds(now - s.snapshot_at) <= stale_after_s;
  }
  // Has a snapshot listing `model`.
  bool Serves(std::int32_t i, std::int32_t model) const {
    return status_[static_cast<std::size_t>(i)].has_snapshot &&
           by_model_[static_cast<std::size_t>(model)][static_cast<std::size_t>(i)].serves;
  }
  // Queued work in the snapshot, the overlay's, and the live leases' units.
  double Load(std::int32_t i, double lease_unit_s) const {
    const InstanceStatus& s = status_[static_cast<std::size_t>(i)];
    return instances_[static_cast<std::size_t>(i)].load_s + s.overlay_total_s + s.lease_units * lease_unit_s;
  }

  // A call of `model` with `work_s` of its own work was forwarded to i.
  void AddForward(std::int32_t i, std::int32_t model, TimePoint now, double work_s);
  // `delta` leases of `model` at i, holding `units` admission units
  // together, were installed (delta > 0) or ended (delta < 0, units < 0).
  void ChargeLease(std::int32_t i, std::int32_t model, std::int32_t delta, double units) {
    status_[static_cast<std::size_t>(i)].lease_units += units;
    Candidate& c = by_model_[static_cast<std::size_t>(model)][static_cast<std::size_t>(i)];
    c.live_leases += delta;
    c.lease_units += units;
    if (c.live_leases == 0) {
      // Sums of fractional units drift; none left holds none.
      status_[static_cast<std::size_t>(i)].lease_units -= c.lease_units;
      c.lease_units = 0;
    }
    RefreshRows(i);
  }

  // Expected output tokens of a call of `model`: the EWMA of completions,
  // or `fallback` before any.
  double OutputTokens(std::int32_t model, double fallback) const {
    const double e = output_estimate_[static_cast<std::size_t>(model)];
    return e > 0 ? e : fallback;
  }
  void ObserveOutput(std::int32_t model, std::int64_t output_tokens);

 private:
  struct Forward {
    TimePoint at;
    std::int32_t model;
    double work_s;
  };
  struct InstanceState {
    std::uint64_t snapshot_version = 0;
    std::int32_t tp = 0;
    std::vector<std::int32_t> model_of;           // snapshot model position -> catalogue id
    std::vector<const ModelProfile*> profile_of;  // catalogue id -> profile at this tp
    std::deque<Forward> overlay;                  // forwarded since the snapshot
    double load_s = 0;  // queued work in the snapshot, all models
    // The sessions this instance's snapshots say it holds (their entries in
    // the session table name it); a full snapshot replaces them all.
    std::unordered_set<std::string, StringHash, std::equal_to<>> indexed_sessions;
    bool wants_full = true;  // the next snapshot must be a full one
  };

  // The catalogue id of the model at `position` in this instance's
  // snapshots: instances list the same models in the same order heartbeat
  // after heartbeat, so a name comparison usually replaces a lookup.
  std::int32_t SnapshotModel(InstanceState& inst, std::size_t position, const std::string& name);
  void Remap(std::int32_t index, InstanceState& inst, const InstanceTelemetry& t, const RouterOptions& options);
  // Re-forms instance i's row sums and kinds, every model.
  void RefreshRows(std::int32_t i);

  // Up to this many models, ModelId compares names instead of hashing.
  static constexpr std::size_t kScannedCatalogue = 8;

  const ProfileSet& profiles_;
  std::vector<InstanceState> instances_;
  std::vector<InstanceStatus> status_;  // [instance]
  std::unordered_map<std::string, std::int32_t, StringHash, std::equal_to<>> model_ids_;
  std::vector<std::string> model_names_;
  std::vector<double> output_estimate_;           // per catalogue model, EWMA of completions
  std::vector<std::vector<Candidate>> by_model_;  // [catalogue model][instance]
  std::vector<std::vector<RankRow>> rows_;        // [catalogue model][instance], derived
  double lease_unit_s_ = 0;
};

}  // namespace talaria
