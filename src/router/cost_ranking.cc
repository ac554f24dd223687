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

CostRanking::Result CostRanking::Rank(const PlacementContext& ctx, std::int32_t round_exempt) {
  constexpr double kInf = std::numeric_limits<double>::infinity();
  const RouteRequest& r = ctx.request;
  const SessionEntry& entry = ctx.entry;
  const std::int32_t n = ctx.view.size();
  terms_.clear();
  replicas_.clear();
  holders_.clear();
  // The few instances holding this session's prefix, found first, so the
  // pass treats every other candidate as a recompute.
  // A handful at most: kept sorted and unique by insertion.
  const auto add_holder = [&](std::int32_t i) {
    auto at = holders_.end();
    while (at != holders_.begin() && *(at - 1) > i) --at;
    if (at == holders_.begin() || *(at - 1) != i) holders_.insert(at, i);
  };
  for (const PrefixLocation& l : entry.held) {
    if (l.model == ctx.model) add_holder(l.instance);
  }
  if (entry.last_instance >= 0 && entry.model == ctx.model) add_holder(entry.last_instance);
  holders_.push_back(n);  // sentinel
  std::size_t next_holder = 0;
  double best_resident = kInf;
  std::int32_t best_resident_at = -1;
  double best_prefill = 0;
  bool best_reuses = false;
  // Everything the loop reads of the context, in locals: the loop body
  // then only loads from the model's dense rows.
  if (ctx.options.stale_after_s != stale_after_s_) {  // converted once, not per decision
    stale_after_s_ = ctx.options.stale_after_s;
    stale_after_ = FromSeconds(stale_after_s_);
  }
  const Duration stale_after = stale_after_;
  const bool slot_wait = ctx.options.slot_wait;
  const bool admission_control = ctx.options.admission_control;
  const bool last_resort = r.last_resort;
  const TimePoint now = ctx.now;
  const RankRow* const rows = ctx.view.Rows(ctx.model).data();
  std::int64_t stale = 0;
  Result result;
  const ProfileTerms* terms = nullptr;
  for (std::int32_t i = 0; i < n; ++i) {
    const RankRow& c = rows[i];
    const bool holder = i == holders_[next_holder];
    if (holder) ++next_holder;
    if (c.kind == RankRow::Kind::kSkip) continue;
    if (c.kind == RankRow::Kind::kDown || now - c.snapshot_at > stale_after) {
      ++stale;
      continue;
    }
    result.any_fresh = true;
    const ModelProfile* p = c.profile;
    // Eq.1 terms, seconds: the profile-only ones once per distinct profile,
    // so the per-instance work is a handful of loads and adds.
    if (terms == nullptr || terms->profile != p) terms = &TermsFor(p, r, ctx.output_tokens);
    // Queue ahead (c.queue_s): the snapshot's, the overlay's forwards, and
    // one admission unit per live lease of this model here (capacity its
    // next slot holds for returns the router expects). A cold instance
    // admits a new call at the model's next P phase: the wait advertised at
    // the snapshot, less the time since. A continuation session-prefill
    // admits mid-slot waits for neither (below).
    double wait = 0;
    if (slot_wait && c.admit_wait_s > 0) wait = std::max(0.0, c.admit_wait_s - ToSeconds(now - c.snapshot_at));
    double queue = c.queue_s;
    // Profile predictions, scaled by what this instance measured lately.
    double prefill = terms->extend_s;  // unscaled
    double c_kv = terms->recompute_s * c.prefill_scale;  // missing: recompute the prefix
    bool reuses = false;  // the prefill counted past reused tokens here
    if (holder) {
      std::int64_t tokens = 0;
      const KvState state = CachedState(ctx.view, i, entry, ctx.model, tokens);
      if (state != KvState::kMissing) {
        const std::int64_t reuse = std::min(tokens, r.prefix_tokens);
        if (reuse != r.prefix_tokens) prefill = step_cost::CallPrefill(*p, r.prompt_tokens, reuse);
        reuses = reuse > 0;
        c_kv = state == KvState::kHost ? step_cost::Restore(*p, reuse) : 0.0;
        // Session-prefill admits it mid-slot, at the next decode boundary:
        // neither the model's next P phase nor the calls queued for it are
        // ahead (SP passes over calls that wait for a slot's start).
        if (slot_wait && c.enters_mid_slot) wait = queue = 0;
      }
    }
    const double own = prefill * c.prefill_scale + terms->decode_s * c.decode_scale;
    const double dr = queue + wait + own;
    const double c_act = c.activation_s;
    const double cost = dr + c_kv + c_act;
    // A candidate dearer than the cheapest resident one so far cannot be
    // picked (that cost only falls, and a replica must beat it too): its
    // admission is moot.
    if (!(cost <= best_resident)) continue;
    // Admission checks: Eq.5 on the predicted round (every lease here
    // lengthens it), and KV capacity.
    if (admission_control) {
      const double round = c.round_s + own + c_kv + c_act;
      if (!last_resort && i != round_exempt && round > c.round_bound_s) continue;
      if (terms->kv_bytes > c.kv_total_bytes) continue;  // never fits, even last
    }
    if (!c.resident) {
      replicas_.push_back(ReplicaCandidate{i, cost, dr + c_kv, c.replica_threshold_s, prefill, reuses});
    } else if (cost < best_resident) {  // strict: ties go to the lowest index
      best_resident = cost, best_resident_at = i;
      best_prefill = prefill, best_reuses = reuses;
    }
  }
  ctx.counters.stale_exclusions += stale;
  std::int32_t pick = best_resident_at;
  double pick_cost = best_resident;
  double pick_prefill = best_prefill;
  bool pick_reuses = best_reuses;
  for (const ReplicaCandidate& rc : replicas_) {
    // Eq.2: open a new replica only if its gain beats its cost.
    const double gain = best_resident == kInf ? kInf : best_resident - rc.cost_without_activation_s;
    if (!(gain > rc.replica_threshold_s)) continue;
    // Ties go to the lowest index, resident or not.
    if (rc.cost_s < pick_cost || (rc.cost_s == pick_cost && rc.instance < pick)) {
      pick = rc.instance, pick_cost = rc.cost_s;
      pick_prefill = rc.prefill_s, pick_reuses = rc.reuses;
      result.opens_replica = true;
    }
  }
  result.instance = pick;
  if (pick >= 0) {
    result.cost_s = pick_cost;
    // OwnWork's prefill: past the reused tokens, or the whole prompt.
    const ModelProfile& p = *ctx.view.Rows(ctx.model)[static_cast<std::size_t>(pick)].profile;
    if (!pick_reuses) pick_prefill = step_cost::CallPrefill(p, r.prompt_tokens, 0);
    result.own_work_s = pick_prefill + TermsFor(&p, r, ctx.output_tokens).decode_s;
  }
  return result;
}

}  // namespace talaria
