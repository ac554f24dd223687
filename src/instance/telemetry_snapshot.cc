// The telemetry snapshot the router reads (paper §4.1): residency, queues,
// round estimate and admission waits, memory, measured scales, and which
// sessions' prefixes are held here (full or delta).
#include "instance/instance_parts.h"

#include "core/error.h"
#include "core/units.h"

namespace talaria {

using instance_internal::kForgetIdleSessionS;
using instance_internal::kNever;

void Instance::Snapshot(TimePoint now, InstanceTelemetry& out, bool delta) {
  hkvr_.CompleteCopies(now);
  out.instance = config_.name;
  out.version = ++snapshot_version_;
  out.taken_at = now;
  out.models.resize(models_.size());
  const double bound = config_.RoundBoundSeconds();
  const double protected_iterations = std::ceil(bound / config_.tpot_target_s);  // as OpenSlot
  double round = 0;
  std::int32_t with_work = 0;
  // A prefill step in flight: its calls have left the queue and are not
  // running yet, but they are the active model's work until it ends (and
  // then its decode): the rest of the step's predicted time, and their
  // output. Without this an instance prefilling a long prompt looks idle.
  double prefilling_s = 0;
  std::int32_t prefilling = 0;
  std::int64_t prefilling_tokens = 0;
  if (in_flight_ && (step_.kind == Step::Kind::kPrefill || step_.kind == Step::Kind::kSessionPrefill)) {
    const double predicted = prefill_totals_.predicted_s * Active().prefill_scale;
    prefilling_s = std::max(0.0, predicted - ToSeconds(now - step_start_));
    prefilling = prefill_totals_.new_calls;
    prefilling_tokens = prefill_totals_.output_tokens;
  }
  for (std::size_t i = 0; i < models_.size(); ++i) {
    const Model& m = *models_[i];
    ModelTelemetry& t = out.models[i];
    const bool prefilling_here = static_cast<std::int32_t>(i) == active_ && (prefilling > 0 || prefilling_s > 0);
    t.name = m.name;
    t.resident = m.resident;
    t.active = static_cast<std::int32_t>(i) == active_;
    const auto chunks = stager_.chunks();
    t.staged = stager_.staged_model() == m.name && !chunks.empty();
    // As Plan(...).coverage(), without building a plan.
    t.staged_coverage = t.staged && m.profile->weight_bytes_per_rank > 0
                            ? static_cast<double>(stager_.CleanBytes()) /
                                  static_cast<double>(m.profile->weight_bytes_per_rank)
                            : 0.0;
    t.queued = static_cast<std::int32_t>(m.queue.size());
    t.running = static_cast<std::int32_t>(m.running.size()) + (prefilling_here ? prefilling : 0);
    // Prefill of the queue (and of the step in flight), and the tokens left
    // to generate at this batch's per-call share of a decode step.
    const double prefill_s = ToSeconds(m.queued_prefill) + (prefilling_here ? prefilling_s : 0.0);
    const std::int64_t tokens_left = m.tokens_left + (prefilling_here ? prefilling_tokens : 0);
    const double t_d = m.profile->DecodeStepSeconds(std::max<std::int32_t>(1, t.running), 32768);
    const double decode_s = static_cast<double>(tokens_left) * t_d / std::max<std::int32_t>(1, t.running);
    const double work = prefill_s + decode_s;
    t.queued_work_s = work;
    t.switch_in_s = t.active ? 0.0 : m.switch_in_estimate_s;
    t.full_open_s = m.full_open_s;
    t.forced_reopen_s = ForcedReopenSeconds(m);
    t.prefill_scale = m.prefill_scale;
    t.decode_scale = m.decode_scale;
    t.weight_bytes_per_rank = m.profile->weight_bytes_per_rank;
    if (t.queued + t.running > 0) {
      ++with_work;
      // Eq.3: its slot must hold the queued prefill and the protected decode
      // (Eq.4's d_m iterations); decode past that fills whatever budget is
      // left, so the rest of its decode is not round load.
      round += prefill_s + std::min(decode_s, protected_iterations * t_d) + t.switch_in_s;
    }
  }
  for (std::size_t i = 0; i < models_.size(); ++i) {
    out.models[i].admit_wait_s = AdmitWait(static_cast<std::int32_t>(i), now, out.models, with_work);
  }
  out.round_bound_s = bound;
  out.round_estimate_s = with_work > 1 ? round : std::min(round, bound);
  out.deadline_risk = counters_.deadline_risk;
  out.kv_free_bytes = static_cast<std::int64_t>(pool_.free_blocks()) * pool_.block_bytes();
  out.kv_total_bytes = static_cast<std::int64_t>(pool_.total_blocks()) * pool_.block_bytes();
  out.staging_slack_bytes = stager_.StagingSlackBytes(pool_);
  out.host_kv_used_bytes = hkvr_.used_bytes();
  out.host_kv_capacity_bytes = hkvr_.capacity_bytes();
  out.host_kv_evicted_blocks = hkvr_.evicted_blocks();
  out.restore_bytes_per_s = models_.front()->profile->h2d_bytes_per_s;
  out.hold_wait_scale = wait_calibration_.Scale();
  out.busy_fraction = busy_.Value();
  out.session_prefill = config_.pool == Pool::kCold && config_.ablation.sp;
  out.sessions.clear();
  out.sessions_delta = delta;
  out.sessions_base = out.version - 1;
  TakeHostDrops();
  // Walk every session when a delta cannot be trusted to cover the change
  // (first snapshot, a full one asked for, a drop that may concern anyone)
  // and periodically to forget idle sessions; otherwise only the sessions
  // that changed. (A model switch releases the outgoing model's KV, which
  // marks its sessions; the incoming model's sessions hold no device KV.)
  //
  // Sessions idle for long with nothing on device are forgotten (a bounded
  // table), periodically: the least recently used come first.
  sessions_.ForgetIdle(now, kForgetIdleSessionS, [&](const Session& s) {
    if (delta && s.reported != KvState::kMissing) out.sessions.emplace(s.id, CachedPrefix{});  // a delta says it went
  });
  sessions_.ReportChanged(!delta, [&](Session& s) { Report(s, now, delta, out); });
}

double Instance::AdmitWait(std::int32_t target, TimePoint now, const std::vector<ModelTelemetry>& t,
                           std::int32_t with_work) const {
  if (config_.pool != Pool::kCold || active_ < 0) return 0;
  // The active model's P phase is open, or opens once the switch into it
  // (or a fresh slot) starts.
  if (target == active_ && (!slot_open_ || !p_done_)) return 0;
  // The round from here: the rest of the active slot (its budget, sooner if
  // its work runs out), then one slot per model with work in round order
  // (an equal share of gamma * T_TTFT, sooner if its work runs out) and a
  // switch into each, as OpenSlot and PlanDecode run them.
  if (!HasWork(*models_[static_cast<std::size_t>(target)])) ++with_work;  // it will have
  const double share = config_.RoundBoundSeconds() / std::max(with_work, 1);
  const auto a = static_cast<std::size_t>(active_);
  double wait = slot_open_ ? std::clamp(slot_budget_s_ - ToSeconds(now - slot_start_), 0.0, t[a].queued_work_s)
                           : std::min(share, t[a].queued_work_s);
  // A slot in a committed (fixed) hold ends no sooner than the hold, work
  // or none: the instance switches only after it, whatever arrives.
  // (Before 2026-12-07 a held slot advertised the rest of its work only,
  // often none, so the router sent other models' calls to wait behind holds
  // it did not see.)
  if (const TimePoint end = CommittedHoldEnd(); end != kNever && end > now) wait = std::max(wait, ToSeconds(end - now));
  const auto n = static_cast<std::int32_t>(models_.size());
  for (std::int32_t k = (active_ + 1) % n; k != target; k = (k + 1) % n) {
    const Model& m = *models_[static_cast<std::size_t>(k)];
    if (HasWork(m)) wait += std::min(share, t[static_cast<std::size_t>(k)].queued_work_s) + m.switch_in_estimate_s;
  }
  // Back into the active model: the router charges no switch for it.
  if (target == active_) wait += models_[a]->switch_in_estimate_s;
  // A closed model whose open is deferred gets no slot before its calls,
  // the routed one among them, have paid the rent (defer_forced_opens).
  return std::max(wait, DeferredForSeconds(*models_[static_cast<std::size_t>(target)], now, 1));
}

void Instance::TakeHostDrops() {
  for (const HostKvRegistry::Drop& d : hkvr_.drops()) {
    if (d.owner == HostKvRegistry::kAnyOwner) {
      sessions_.MarkAllDirty();
      continue;
    }
    Session* found = sessions_.ByOwner(d.owner);
    if (found == nullptr) continue;
    Session& s = *found;
    // A chain walk starts at the segment keyed by its first block, so a
    // drop there is on the session's path exactly when that block is its
    // chain's; a segment further in may be bypassed by another that holds
    // the same blocks (registered again after an eviction): probe again.
    if (s.host_blocks < 0 || d.start > 0) {
      s.host_blocks = -1;
      sessions_.MarkDirty(s);
      continue;
    }
    // The drop shortens the session's host prefix only if its chain ran
    // through the blocks that went, and only if the prefix reached them.
    const auto cut = static_cast<std::size_t>(d.start + d.kept);
    if (s.model < 0 || models_[static_cast<std::size_t>(s.model)]->id != d.model || cut >= s.host_chain().size() ||
        s.host_chain()[cut] != d.dropped || s.host_blocks <= d.start + d.kept) {
      continue;
    }
    s.host_blocks = d.start + d.kept;
    sessions_.MarkDirty(s);
  }
  hkvr_.ClearDrops();
}

void Instance::Report(Session& s, TimePoint now, bool delta, InstanceTelemetry& out) {
  KvState state = KvState::kMissing;
  std::int64_t tokens = 0;
  if (s.model >= 0) {
    if (s.model == active_ && !s.blocks.empty()) {
      state = KvState::kDevice;
      tokens = static_cast<std::int64_t>(s.chain().size()) * config_.block_tokens;
    } else if (config_.ablation.hkvr) {
      std::int32_t host = 0;
      const ModelId id = models_[static_cast<std::size_t>(s.model)]->id;
      if (now < s.checkpoint_done) {
        // Copies in flight: report what has landed, look again next time.
        host = hkvr_.Probe(id, s.host_chain());
        sessions_.MarkDirty(s);
      } else {
        if (s.host_blocks < 0) s.host_blocks = hkvr_.Probe(id, s.host_chain());
        host = s.host_blocks;
      }
      if (host > 0) {
        state = KvState::kHost;
        tokens = static_cast<std::int64_t>(host) * config_.block_tokens;
      }
    }
  }
  if (state == KvState::kMissing && s.blocks.empty() && s.requests == 0 && now >= s.checkpoint_done) {
    // Nothing of its context is held here, on device or host: its chain
    // names nothing this instance could reuse, restore or report. An idle
    // entry is kept for a while (for its gaps, kForgetIdleSessionS), and at
    // cluster scale such entries' chains add up to hundreds of MB; its next
    // call brings its chain again.
    s.chain_data.reset();
    s.chain_blocks = 0;
    s.partial = 0;
  }
  const bool changed = state != s.reported || tokens != s.reported_tokens || s.model != s.reported_model;
  if (delta ? changed : state != KvState::kMissing) {
    CachedPrefix& c = out.sessions[s.id];
    c.state = state;
    c.tokens = tokens;
    if (state != KvState::kMissing) c.model = models_[static_cast<std::size_t>(s.model)]->name;
  }
  s.reported = state;
  s.reported_tokens = tokens;
  s.reported_model = s.model;
}

std::int64_t Instance::HeldChainBlocks(const std::string& session) const {
  const Session* s = sessions_.Find(session);
  return s != nullptr ? static_cast<std::int64_t>(s->chain().size()) : -1;
}

std::int32_t Instance::StaleHostPrefixes(TimePoint now) const {
  std::int32_t stale = 0;
  sessions_.ForEach([&](const Session& s) {
    if (s.model < 0 || s.host_blocks < 0 || now < s.checkpoint_done) return;
    const bool pending = std::any_of(hkvr_.drops().begin(), hkvr_.drops().end(), [&](const auto& d) {
      return d.owner == HostKvRegistry::kAnyOwner || d.owner == s.owner;
    });
    if (pending) return;  // the next snapshot takes these drops first
    if (hkvr_.Probe(models_[static_cast<std::size_t>(s.model)]->id, s.host_chain()) != s.host_blocks) ++stale;
  });
  return stale;
}

}  // namespace talaria
