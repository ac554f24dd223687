#include "router/cost_ranking.h"

#include <algorithm>
#include <limits>

#include "profile/step_cost.h"

namespace talaria {

const CostRanking::ProfileTerms& CostRanking::TermsFor(const ModelProfile* p, const RouteRequest& r,
                                                       double output_tokens) {
  for (const auto& t : terms_) {
    if (t.profile == p) return t;
  }
  ProfileTerms t;
  t.profile = p;
  t.extend_s = step_cost::CallPrefill(*p, r.prompt_tokens, r.prefix_tokens);
  t.recompute_s = step_cost::Recompute(*p, r.prefix_tokens);
  t.decode_s = step_cost::CallDecode(*p, r.prompt_tokens, output_tokens);
  t.kv_bytes = (static_cast<double>(r.prompt_tokens) + output_tokens) * static_cast<double>(p->KvBytesPerTokenPerRank());
  terms_.push_back(t);
  return terms_.back();
}

CostRanking::Result CostRanking::Rank(const PlacementContext& ctx) {
  constexpr double kInf = std::numeric_limits<double>::infinity();
  const RouteRequest& r = ctx.request;
  const SessionEntry& entry = ctx.entry;
  const std::int32_t n = ctx.view.size();
  const std::vector<Candidate>& cands = ctx.view.Candidates(ctx.model);
  terms_.clear();
  replicas_.clear();
  holders_.clear();
  // The few instances holding this session's prefix, found first, so the
  // pass treats every other candidate as a recompute.
  for (const PrefixLocation& l : entry.held) {
    if (l.model == ctx.model) holders_.push_back(l.instance);
  }
  if (entry.last_instance >= 0 && entry.model == ctx.model) holders_.push_back(entry.last_instance);
  std::sort(holders_.begin(), holders_.end());
  holders_.erase(std::unique(holders_.begin(), holders_.end()), holders_.end());
  holders_.push_back(n);  // sentinel
  std::size_t next_holder = 0;
  double best_resident = kInf;
  std::int32_t best_resident_at = -1;
  // Everything the loop reads of the context, in locals: the loop body
  // then only loads from the two dense arrays.
  const Duration stale_after = FromSeconds(ctx.options.stale_after_s);
  const double lease_unit_s = ctx.options.lease_unit_s;
  const bool slot_wait = ctx.options.slot_wait;
  const bool admission_control = ctx.options.admission_control;
  const bool last_resort = r.last_resort;
  const TimePoint now = ctx.now;
  const InstanceStatus* const statuses = ctx.view.statuses();
  std::int64_t stale = 0;
  Result result;
  const ProfileTerms* terms = nullptr;
  for (std::int32_t i = 0; i < n; ++i) {
    const Candidate& c = cands[static_cast<std::size_t>(i)];
    const bool holder = i == holders_[next_holder];
    if (holder) ++next_holder;
    if (!c.serves || c.profile == nullptr) continue;
    const InstanceStatus& inst = statuses[i];
    if (!inst.has_snapshot || !inst.healthy || now - inst.snapshot_at > stale_after) {
      ++stale;
      continue;
    }
    result.any_fresh = true;
    const ModelProfile* p = c.profile;
    // Eq.1 terms, seconds: the profile-only ones once per distinct profile,
    // so the per-instance work is a handful of loads and adds.
    if (terms == nullptr || terms->profile != p) terms = &TermsFor(p, r, ctx.output_tokens);
    // Queue ahead: the snapshot's, the overlay's forwards, and one admission
    // unit per live lease of this model here (capacity its next slot holds
    // for returns the router expects). Every lease here lengthens the round.
    const double leases = inst.live_leases * lease_unit_s;
    const double queue = c.queued_work_s + c.overlay_work_s + c.live_leases * lease_unit_s;
    // A cold instance admits a new call at the model's next P phase: the
    // wait advertised at the snapshot, less the time since.
    double wait = 0;
    if (slot_wait && c.admit_wait_s > 0) wait = std::max(0.0, c.admit_wait_s - ToSeconds(now - inst.snapshot_at));
    // Profile predictions, scaled by what this instance measured lately.
    double own = terms->extend_s * c.prefill_scale + terms->decode_s * c.decode_scale;
    double c_kv = terms->recompute_s * c.prefill_scale;  // missing: recompute the prefix
    if (holder) {
      std::int64_t tokens = 0;
      const KvState state = CachedState(ctx.view, i, entry, ctx.model, tokens);
      if (state != KvState::kMissing) {
        const std::int64_t reuse = std::min(tokens, r.prefix_tokens);
        own = step_cost::CallPrefill(*p, r.prompt_tokens, reuse) * c.prefill_scale + terms->decode_s * c.decode_scale;
        c_kv = state == KvState::kHost ? step_cost::Restore(*p, reuse) : 0.0;
        if (c.active && c.session_prefill) wait = 0;  // enters mid-slot
      }
    }
    const double dr = queue + wait + own;
    const double c_act = c.activation_s;
    // Admission checks: Eq.5 on the predicted round, and KV capacity.
    if (admission_control) {
      const double round = c.round_estimate_s + inst.overlay_total_s + leases + own + c_kv + c_act;
      if (!last_resort && c.round_bound_s > 0 && round > c.round_bound_s && c.round_estimate_s > 0) continue;
      if (c.kv_total_bytes > 0 && terms->kv_bytes > c.kv_total_bytes) continue;  // never fits, even last
    }
    const double cost = dr + c_kv + c_act;
    if (!c.resident) {
      replicas_.push_back(ReplicaCandidate{i, cost, dr + c_kv});
    } else if (cost < best_resident) {  // strict: ties go to the lowest index
      best_resident = cost, best_resident_at = i;
    }
  }
  ctx.counters.stale_exclusions += stale;
  std::int32_t pick = best_resident_at;
  double pick_cost = best_resident;
  for (const ReplicaCandidate& rc : replicas_) {
    // Eq.2: open a new replica only if its gain beats its cost.
    const double gain = best_resident == kInf ? kInf : best_resident - rc.cost_without_activation_s;
    if (!(gain > cands[static_cast<std::size_t>(rc.instance)].replica_threshold_s)) continue;
    // Ties go to the lowest index, resident or not.
    if (rc.cost_s < pick_cost || (rc.cost_s == pick_cost && rc.instance < pick)) {
      pick = rc.instance, pick_cost = rc.cost_s;
      result.opens_replica = true;
    }
  }
  result.instance = pick;
  if (pick >= 0) result.cost_s = pick_cost;
  return result;
}

}  // namespace talaria
