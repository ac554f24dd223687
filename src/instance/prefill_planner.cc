// Prefill and session-prefill batches: how much of a call's prompt is
// reusable here (device KV, host KV), its KV blocks, and the batch that
// PrefillAdmission admits (paper §3.4, §3.5).
#include "instance/instance_parts.h"

#include <bit>

#include "core/error.h"
#include "profile/step_cost.h"
#include "instance/prefill_admission.h"

namespace talaria {

// A hybrid model's recurrent state cannot be rolled back: a device hit needs
// the whole previous context reused (the state at its end is kept with the
// session), and a host restore reaches exactly a point where a checkpoint
// holds the state (the context end CallRequest::state_tokens names, or an
// interior point: config.h's StateCheckpoints): the whole chain to there
// found, the state on its last block. Otherwise the reuse is declined
// (a restore skip) and the prefix recomputed.
bool Instance::DeviceReusable(const Request& r) const {
  const Model& m = *models_[static_cast<std::size_t>(r.model)];
  return m.profile->family != AttentionFamily::kHybrid || r.call.full_reuse;
}

bool Instance::Hybrid(const Request& r) const {
  return models_[static_cast<std::size_t>(r.model)]->profile->family == AttentionFamily::kHybrid;
}

BlockChain Instance::HostChain(const Request& r) const { return HostChain(r, r.host_state_tokens); }

BlockChain Instance::HostChain(const Request& r, std::int64_t state_tokens) const {
  const std::int32_t bt = config_.block_tokens;
  if (!Hybrid(r)) return r.prompt_chain(bt);
  const std::int64_t state = std::min(state_tokens, r.call.prompt_tokens);
  const auto full = std::min<std::size_t>(r.call.chain.size(), static_cast<std::size_t>(state / bt));
  // Off a block boundary only at the context end the request names.
  if (state % bt == 0 || r.call.state_partial == 0) return BlockChain(r.call.chain.first(full));
  return BlockChain(r.call.chain.first(full), r.call.state_partial);
}

bool Instance::StateRestorable(const Request& r) const {
  const std::int64_t state = r.call.state_tokens;
  return state > 0 && state <= r.call.prompt_tokens &&
         (state % config_.block_tokens == 0 || r.call.state_partial != 0);
}

std::int64_t Instance::FindStatePoint(const Request& r, ModelId id, std::int32_t held) const {
  const std::int32_t bt = config_.block_tokens;
  // HoldsTail: the whole chain to the point published, the state on its last block.
  auto holds = [&](std::int64_t tokens) { return hkvr_.HoldsTail(id, HostChain(r, tokens)); };
  const std::int64_t end = StateRestorable(r) ? r.call.state_tokens : 0;
  bool end_tried = end == 0;
  if (config_.state_checkpoints == StateCheckpoints::kDoubling) {
    // Interior points, latest first, within what the registry holds of the
    // prompt (any session's chain: equal hashes are equal tokens, so a
    // shared prefix's state serves every session); the context end in turn.
    std::int64_t g = held > 0 ? std::bit_floor(static_cast<std::uint64_t>(held)) : 0;
    for (; g >= 1; g /= 2) {
      if (!end_tried && end >= g * bt) {
        end_tried = true;
        if (holds(end)) return end;
      }
      if (g * bt < r.call.prompt_tokens && holds(g * bt)) return g * bt;
    }
  }
  return !end_tried && holds(end) ? end : 0;
}

std::int32_t Instance::HostBlocks(const Request& r) {
  // Queued calls are re-examined at every decode boundary: probe the
  // registry again only when its published set changed.
  if (r.host_probe_version == hkvr_.version()) return r.host_probe_blocks;
  r.host_probe_version = hkvr_.version();
  const ModelId id = models_[static_cast<std::size_t>(r.model)]->id;
  if (!Hybrid(r)) {
    r.host_probe_blocks = hkvr_.Probe(id, r.prompt_chain(config_.block_tokens));
    r.host_probe_declined = false;
    return r.host_probe_blocks;
  }
  // All of the chain to a state point, and the state on its last block.
  const std::int32_t held = hkvr_.Probe(id, r.prompt_chain(config_.block_tokens));
  r.host_state_tokens = FindStatePoint(r, id, held);
  r.host_probe_blocks = r.host_state_tokens > 0 ? static_cast<std::int32_t>(HostChain(r).size()) : 0;
  // Declined: blocks an attention model would have restored are held.
  r.host_probe_declined = r.host_state_tokens == 0 && held > 0;
  return r.host_probe_blocks;
}

Instance::Reuse Instance::FindReuse(const Request& r) {
  Reuse u;
  const auto chain = r.prompt_chain(config_.block_tokens);
  if (const Session* s = FindSession(r); s != nullptr && s->model == active_ && !s->blocks.empty() && !s->busy) {
    const std::int32_t common =
        std::min<std::int32_t>(CommonBlocks(chain, s->chain()), s->blocks.size());
    if (DeviceReusable(r)) u.device = common;
    else if (common > 0) u.declined = true;
  }
  if (u.device == 0 && config_.ablation.hkvr && r.call.continuation) {
    u.host = HostBlocks(r);
    u.declined = u.declined || r.host_probe_declined;
  }
  return u;
}

bool Instance::SpEligible(const Request& r) {
  if (!r.call.continuation || r.arrived <= slot_start_) return false;  // new sessions use P
  const Reuse u = FindReuse(r);
  return u.device > 0 || u.host > 0;
}

bool Instance::AllocateBlocks(std::int32_t n, BlockList& out, const Session* keep) {
  while (!pool_.Allocate(n, out)) {
    // Evict the least recently used idle session's device KV (it stays
    // host-restorable if HKVR checkpointed it).
    Session* victim = nullptr;
    for (Session* s : sessions_.device_holders()) {
      if (s == keep || s->busy) continue;
      if (victim == nullptr || s->last_use < victim->last_use ||
          (s->last_use == victim->last_use && s->owner < victim->owner)) {
        victim = s;  // ties: the session this instance saw first
      }
    }
    if (victim == nullptr) return false;
    pool_.Free(victim->blocks);
    victim->blocks.clear();
    sessions_.TrackDevice(*victim);
    sessions_.MarkDirty(*victim);
  }
  return true;
}

bool Instance::Admit(Request& r, TimePoint now, PrefillItem& item) {
  Model& m = Active();
  const std::int32_t bt = config_.block_tokens;
  if (r.swapped) {  // restore a call preempted at the end of its last slot
    const auto need = static_cast<std::int32_t>((r.call.prompt_tokens + r.call.output_tokens + bt - 1) / bt) +
                      m.recurrent_blocks;
    scratch_blocks_.clear();
    if (!AllocateBlocks(need, scratch_blocks_, nullptr)) return false;
    stager_.OnAllocated(scratch_blocks_, pool_);
    r.blocks = scratch_blocks_;
    item = PrefillItem{0, Context(r), Context(r), Seq(r)};  // swapped KV comes back from host
    return true;
  }
  const Reuse u = FindReuse(r);
  Session& s = AddSession(r);
  const auto chain = r.prompt_chain(bt);
  const std::int32_t device = u.device;
  // Admission touches the restored blocks, so the registry's LRU sees the use.
  const BlockChain host_chain = HostChain(r);
  std::int32_t host =
      u.host > 0 ? std::min(u.host, hkvr_.Lookup(m.id, host_chain.first(static_cast<std::size_t>(u.host)), now)) : 0;
  if (Hybrid(r) && host != u.host) host = 0;  // the state comes whole or not at all
  const auto total = static_cast<std::int32_t>((r.call.prompt_tokens + r.call.output_tokens + bt - 1) / bt) +
                     m.recurrent_blocks;
  // Keep the matched device blocks (radix sharing), free the rest.
  if (!s.blocks.empty()) {
    pool_.Free(s.blocks, device);
    s.blocks.Truncate(device);
  }
  scratch_blocks_.clear();
  if (!AllocateBlocks(total - device, scratch_blocks_, &s)) return false;
  stager_.OnAllocated(scratch_blocks_, pool_);
  r.blocks = std::move(s.blocks);
  r.blocks.Append(scratch_blocks_);
  s.blocks.clear();
  sessions_.TrackDevice(s);
  s.busy = true;
  s.model = active_;
  sessions_.MarkDirty(s);

  std::int64_t cached = static_cast<std::int64_t>(device > 0 ? device : host) * bt;
  if (device == 0 && host > 0 && Hybrid(r)) cached = r.host_state_tokens;  // restored to the state's point
  cached = std::min(cached, r.call.prompt_tokens - 1);  // the last token is always computed
  r.source = device > 0 ? KvSource::kDevice : host > 0 ? KvSource::kHost : KvSource::kRecompute;
  if (r.source == KvSource::kRecompute && u.declined) ++counters_.restore_skips;
  r.reused = cached;
  r.admitted = now;
  if (host > 0) {
    hkvr_.Pin(m.id, host_chain, host);
    r.pinned_host_blocks = host;
  }
  item = PrefillItem{r.call.prompt_tokens - cached, cached, host > 0 ? cached : 0, Seq(r)};
  return true;
}

bool Instance::PlanPrefill(TimePoint now, bool session_prefill) {
  Model& m = Active();
  batch_.clear();
  items_.clear();
  const bool cold = config_.pool == Pool::kCold;
  const double elapsed = ToSeconds(now - slot_start_);
  const Model::BatchSums sums = m.DecodingSums();
  const std::int32_t running = sums.calls;
  const std::int64_t context = sums.context;
  const double t_d = m.profile->DecodeStepSeconds(std::max(running, 1), running > 0 ? context / running : 0);
  const double protected_left =
      running > 0 ? std::max(0, protected_iterations_ - decode_iterations_) * t_d : 0.0;
  const double budget = cold ? slot_budget_s_ - elapsed - protected_left
                             : std::numeric_limits<double>::infinity();
  double predicted = 0;
  PrefillItem item;

  // P first restores calls swapped out at the end of this model's last slot.
  if (!session_prefill && !p_done_) {
    for (Request* r : m.running) {
      if (!r->swapped) continue;
      if (!Admit(*r, now, item)) break;
      batch_.push_back(r);
      items_.push_back(item);
      predicted += step_cost::PrefillBatch(*m.profile, std::span(&item, 1));
    }
  }
  PrefillAdmission::Limits limits;
  limits.session_prefill = session_prefill;
  limits.cold = cold;
  limits.budget_s = budget;
  limits.sp_max_batch = config_.sp_max_batch;
  limits.max_batch_tokens = config_.max_prefill_batch_tokens;
  PrefillAdmission admission(limits, static_cast<std::int32_t>(batch_.size()), predicted);
  std::int32_t deferred = 0;
  // A continuation left for later counts once per slot, however many
  // decode boundaries it waits through.
  auto defer = [&](Request& r) {
    if (r.deferred_in_slot != slot_serial_) {
      r.deferred_in_slot = slot_serial_;
      ++deferred;
    }
  };
  using Verdict = PrefillAdmission::Verdict;
  for (auto it = m.queue.begin(); it != m.queue.end();) {
    Request& r = **it;
    Verdict v = admission.Precheck(session_prefill && SpEligible(r), r.arrived > slot_start_);
    double cost = 0;
    PrefillItem guess;
    if (v == Verdict::kAdmit) {
      // Predict before committing memory: restore + prefill of this call.
      const Reuse u = FindReuse(r);
      const std::int64_t hit = static_cast<std::int64_t>(u.device) * config_.block_tokens;
      const std::int64_t restore = static_cast<std::int64_t>(u.host) * config_.block_tokens;
      const std::int64_t cached = std::min(std::max(hit, restore), r.call.prompt_tokens - 1);
      guess = PrefillItem{r.call.prompt_tokens - cached, cached, hit > 0 ? 0 : cached, {}};
      cost = step_cost::PrefillBatch(*m.profile, std::span(&guess, 1));
      v = admission.Fit(cost, guess.new_tokens);
    }
    if (v == Verdict::kSkip || v == Verdict::kDefer) {
      if (v == Verdict::kDefer) defer(r);
      ++it;
      continue;
    }
    if (v == Verdict::kStop) break;
    if (v == Verdict::kAdmitOverBudget) ++counters_.deadline_risk;  // P makes progress, and reports the overrun
    if (!Admit(r, now, item)) break;  // no KV room: wait
    r.path = session_prefill ? AdmitPath::kSessionPrefill
             : cold          ? AdmitPath::kPrefill
                             : AdmitPath::kContinuous;
    batch_.push_back(&r);
    items_.push_back(item);
    admission.Admitted(cost, guess.new_tokens);
    m.queued_prefill -= r.queued_prefill;
    m.tokens_left -= r.call.output_tokens;
    it = m.queue.erase(it);
  }
  if (session_prefill) {
    if (holding_ && !batch_.empty()) ++counters_.hold_hits;
    counters_.sp_admitted += static_cast<std::int64_t>(batch_.size());
    counters_.sp_deferred += deferred;
    round_.sp_admitted += static_cast<std::int32_t>(batch_.size());
    round_.sp_deferred += deferred;
  }
  if (batch_.empty()) return false;
  step_.kind = session_prefill ? Step::Kind::kSessionPrefill : Step::Kind::kPrefill;
  step_.prefill = PrefillStep{m.profile, items_};
  prefill_totals_ = PrefillTotals{step_cost::PrefillBatch(*m.profile, step_.prefill.items), 0, 0};
  for (const Request* r : batch_) {
    if (r->swapped) continue;
    ++prefill_totals_.new_calls;
    prefill_totals_.output_tokens += r->call.output_tokens - 1;
  }
  return true;
}

}  // namespace talaria
