// The instance scheduler: construction, arrivals, Plan and Commit, cancel
// and finish (instance.h; its other concepts: instance_parts.h).
#include "instance/instance_parts.h"

#include <cstdio>

#include "core/error.h"
#include "core/stats.h"
#include "core/units.h"
#include "profile/step_cost.h"

namespace talaria {

using instance_internal::kNever;

const char* ToString(KvSource s) {
  switch (s) {
    case KvSource::kDevice: return "device";
    case KvSource::kHost: return "host";
    case KvSource::kRecompute: return "recompute";
  }
  return "?";
}

const char* ToString(AdmitPath p) {
  switch (p) {
    case AdmitPath::kPrefill: return "P";
    case AdmitPath::kSessionPrefill: return "SP";
    case AdmitPath::kContinuous: return "continuous";
  }
  return "?";
}

namespace {

// The advertised switch cost into a model follows its measured switches,
// the newest moving it 30% of the way (about three switches to follow a
// change of path); the prefill and decode scales (measured over predicted
// step time) follow steps 20% of the way, a round or two of steps.
constexpr double kSwitchEstimateWeight = 0.3;
constexpr double kStepScaleWeight = 0.2;

HbmLayout::Options LayoutOptions(const InstanceConfig& c, double hbm_gib) {
  HbmLayout::Options o;
  o.arena_bytes = static_cast<std::int64_t>(c.bump_fraction * hbm_gib * static_cast<double>(kGiB));
  o.runtime_bytes = static_cast<std::int64_t>(c.runtime_gib * static_cast<double>(kGiB));
  o.graph_pool_bytes = static_cast<std::int64_t>(c.graph_pool_gib * static_cast<double>(kGiB));
  o.min_kv_bytes = static_cast<std::int64_t>(c.min_kv_gib * static_cast<double>(kGiB));
  if (o.arena_bytes <= o.runtime_bytes + o.graph_pool_bytes) {
    char why[256];
    std::snprintf(why, sizeof why,
                  "its HBM arena (bump_fraction %.2f x %.1f GiB from the profile) does not exceed runtime_gib %.1f + "
                  "graph_pool_gib %.1f",
                  c.bump_fraction, hbm_gib, c.runtime_gib, c.graph_pool_gib);
    throw InputError("instance '" + c.name + "'", why);
  }
  return o;
}

const ModelProfile& FirstProfile(const InstanceConfig& c, const ProfileSet& profiles) {
  if (c.models.empty()) throw InputError("instance '" + c.name + "'", "lists no models");
  for (const auto& m : c.models) {
    if (profiles.Find(m, c.tp) == nullptr) {
      throw InputError("instance '" + c.name + "'",
                       "no profile for model '" + m + "' at tp=" + std::to_string(c.tp));
    }
  }
  if (c.pool == Pool::kHot && c.models.size() != 1) {
    throw InputError("instance '" + c.name + "'", "a hot instance pins exactly one model");
  }
  for (const auto& r : c.resident) {
    if (std::find(c.models.begin(), c.models.end(), r) == c.models.end()) {
      throw InputError("instance '" + c.name + "'", "resident model '" + r + "' is not in its models");
    }
  }
  return *profiles.Find(c.models.front(), c.tp);
}

}  // namespace

Instance::Instance(InstanceConfig config, const ProfileSet& profiles)
    : config_(std::move(config)),
      layout_(LayoutOptions(config_, FirstProfile(config_, profiles).hbm_gib_per_gpu)),
      stager_(static_cast<std::int64_t>(config_.staging_chunk_mib * static_cast<double>(kMiB)),
              FirstProfile(config_, profiles).h2d_bytes_per_s),
      hkvr_(static_cast<std::int64_t>(config_.host_kv_gib_per_rank * static_cast<double>(kGiB))) {
  for (std::size_t i = 0; i < config_.models.size(); ++i) {
    auto m = std::make_unique<Model>();
    m->id = static_cast<ModelId>(i);
    m->name = config_.models[i];
    m->profile = profiles.Find(m->name, config_.tp);
    m->block_bytes = config_.block_tokens * m->profile->KvBytesPerTokenPerRank();
    m->recurrent_blocks = static_cast<std::int32_t>(
        (m->profile->RecurrentStateBytesPerRank() + m->block_bytes - 1) / m->block_bytes);
    m->switch_in_estimate_s = m->profile->OpenWeightsSeconds(0);
    m->full_open_s = static_cast<double>(m->profile->weight_bytes_per_rank) * config_.tp /
                     (config_.storage_gbps * kGB);
    m->resident = config_.resident.empty() ||
                  std::find(config_.resident.begin(), config_.resident.end(), m->name) !=
                      config_.resident.end();
    if (!layout_.AddModel(m->name, m->profile->weight_bytes_per_rank)) {
      throw InputError("instance '" + config_.name + "'",
                       "model '" + m->name + "' does not fit in the HBM arena with room for KV");
    }
    models_.push_back(std::move(m));
  }
}

Instance::~Instance() = default;
InstanceCounters& InstanceCounters::operator+=(const InstanceCounters& o) {
  sp_admitted += o.sp_admitted;
  sp_deferred += o.sp_deferred;
  host_capacity_misses += o.host_capacity_misses;
  restore_skips += o.restore_skips;
  deadline_risk += o.deadline_risk;
  tpot_infeasible += o.tpot_infeasible;
  preemptions += o.preemptions;
  model_opens += o.model_opens;
  model_closes += o.model_closes;
  cancelled += o.cancelled;
  holds += o.holds;
  hold_hits += o.hold_hits;
  rounds += o.rounds;
  hbm_peak_bytes = std::max(hbm_peak_bytes, o.hbm_peak_bytes);
  prefill_s += o.prefill_s;
  session_prefill_s += o.session_prefill_s;
  decode_s += o.decode_s;
  return *this;
}

bool Instance::Hosts(const std::string& model) const { return ModelIndex(model) >= 0; }

std::int32_t Instance::ModelIndex(const std::string& name) const {
  for (std::size_t i = 0; i < models_.size(); ++i) {
    if (models_[i]->name == name) return static_cast<std::int32_t>(i);
  }
  return -1;
}

std::int64_t Instance::hbm_cap_bytes() const {
  return models_.front()->profile->HbmBytesPerRank();
}

std::string_view Instance::active_model() const {
  return active_ < 0 ? std::string_view() : std::string_view(models_[static_cast<std::size_t>(active_)]->profile->name);
}

MemoryOccupancy Instance::Occupancy() const {
  const auto block = pool_.block_bytes();
  return MemoryOccupancy{static_cast<std::int64_t>(pool_.total_blocks() - pool_.free_blocks()) * block,
                         static_cast<std::int64_t>(pool_.total_blocks()) * block, hkvr_.used_bytes(),
                         hkvr_.capacity_bytes()};
}

void Instance::Enqueue(CallRequest call, TimePoint now) {
  const std::int32_t index = ModelIndex(call.model);
  TALARIA_CHECK(index >= 0, "call for a model this instance does not host");
  TALARIA_CHECK(call.chain_owner == nullptr ||
                    (call.chain.data() == call.chain_owner->data() && call.chain.size() <= call.chain_owner->size()),
                "a call's chain is not the shared chain it hands over");
  auto r = std::make_unique<Request>();
  const std::int64_t id = call.id;
  r->call = std::move(call);
  r->model = index;
  r->arrived = now;
  Model& m = *models_[static_cast<std::size_t>(index)];
  // A return: its gap since the session's last call finished teaches the
  // model's return model. Only adaptive holds read it, so only they pay the
  // session lookup here (the request finds its session later anyway).
  if (config_.hold == HoldPolicy::kAdaptive) {
    m.arrivals.Observe(now);
    Session* s = sessions_.Find(r->call.session_id);
    if (s == nullptr) m.first_calls.Observe(now);
    if (s != nullptr && s->finished && !s->busy) {
      const double gap_s = ToSeconds(now - s->last_finish);
      m.returns.ObserveReturn(s->gaps, gap_s);
      if (s->hint_tool_s >= 0) m.returns.ObserveHintedReturn(gap_s, s->hint_tool_s);
    }
  }
  r->queued_prefill = FromSeconds(step_cost::CallPrefill(*m.profile, r->call.prompt_tokens, r->call.prefix_tokens));
  m.queued_prefill += r->queued_prefill;
  m.tokens_left += r->call.output_tokens;
  m.queue.push_back(r.get());
  requests_.emplace(id, std::move(r));
}

const Instance::Step& Instance::Plan(TimePoint now, TimePoint horizon) {
  TALARIA_CHECK(!in_flight_, "Plan while a step is in flight");
  hkvr_.CompleteCopies(now);
  if (active_ >= 0 && config_.ablation.d2d_staging) {
    stager_.AdvanceTo(now, pool_);
    StageNextSwitch(now);  // the work that came may have changed the next switch's model
  }
  step_.kind = Step::Kind::kIdle;
  step_.wake_at = kNever;
  step_start_ = now;

  if (active_ < 0) {
    const std::int32_t target = NextModelWithWork(-1);
    if (target >= 0) PlanSwitch(now, target);
    in_flight_ = step_.kind != Step::Kind::kIdle;
    return step_;
  }
  for (int attempt = 0; attempt < 2; ++attempt) {
    if (!slot_open_) {
      if (!HasWork(Active())) {
        const std::int32_t target = NextSlotModel(now);
        if (target >= 0) PlanSwitch(now, target);
        break;
      }
      OpenSlot(now);
    }
    if (!p_done_) {
      if (PlanPrefill(now, false)) break;
      p_done_ = true;
    }
    if (config_.pool == Pool::kHot && PlanPrefill(now, false)) break;
    if (config_.pool == Pool::kCold && config_.ablation.sp && PlanPrefill(now, true)) break;
    if (PlanDecode(now, horizon)) break;
    // A hold must end after now: one ending by now would wake the planner
    // at this same instant again and again (none of the hold rules return
    // one; a hold that did is taken as none).
    if (const TimePoint until = HoldUntil(now); until != kNever && until > now) {
      if (!holding_) ++counters_.holds;
      holding_ = true;
      step_.wake_at = until;  // idle, slot open: a return may still enter by SP
      break;
    }
    // The slot is over.
    slot_open_ = false;
    slot_round_counted_ = false;
    const std::int32_t target = NextSlotModel(now);
    if (target < 0) break;  // idle on the active model until an arrival
    if (target != active_) {
      PlanSwitch(now, target);
      break;
    }
    // Only the active model has work: a fresh slot admits what waits.
  }
  in_flight_ = step_.kind != Step::Kind::kIdle;
  if (in_flight_) holding_ = false;
  return step_;
}

bool Instance::Cancel(std::int64_t call_id) {
  TALARIA_CHECK(!in_flight_, "Cancel while a step is in flight");
  auto it = requests_.find(call_id);
  if (it == requests_.end()) return false;
  Request& r = *it->second;
  Model& m = *models_[static_cast<std::size_t>(r.model)];
  if (std::erase(m.queue, &r) > 0) {
    m.queued_prefill -= r.queued_prefill;
    m.tokens_left -= r.call.output_tokens;
  }
  StopDecoding(m, r);
  if (std::erase(m.running, &r) > 0) m.tokens_left -= r.call.output_tokens - r.generated;
  if (!r.blocks.empty()) pool_.Free(r.blocks);  // includes the session's reused device blocks
  if (r.pinned_host_blocks > 0) hkvr_.Unpin(m.id, HostChain(r), r.pinned_host_blocks);
  if (Session* s = FindSession(r); s != nullptr && s->busy) {
    s->busy = false;
    s->blocks.clear();
    sessions_.TrackDevice(*s);
    sessions_.MarkDirty(*s);
  }
  if (r.session != nullptr) --r.session->requests;
  ++counters_.cancelled;
  requests_.erase(it);
  return true;
}

void Instance::Finish(Request& r, TimePoint now, InstanceEvents& events) {
  Model& m = *models_[static_cast<std::size_t>(r.model)];
  Session& s = AddSession(r);
  --s.requests;  // the request ends here
  // The session's chain is now this context's: the caller's own when it
  // shares it, else a copy.
  if (r.call.chain_owner != nullptr) {
    s.chain_data = std::move(r.call.chain_owner);
  } else {
    s.chain_data = std::make_shared<const std::vector<PrefixHash>>(r.call.chain.begin(), r.call.chain.end());
  }
  s.chain_blocks = static_cast<std::int32_t>(r.call.chain.size());
  // A hybrid model's state is checkpointed at the context's end: with its
  // partial last block when the context ends inside one.
  s.partial = m.profile->family == AttentionFamily::kHybrid ? r.call.context_partial : 0;
  // Another call of this session that ran alongside this one and finished
  // first left its context's KV here: this context replaces it (admission
  // took the session's blocks into the request, so the two never overlap).
  if (!s.blocks.empty()) pool_.Free(s.blocks);
  s.blocks = std::move(r.blocks);
  sessions_.TrackDevice(s);
  s.model = r.model;
  s.busy = false;
  s.last_use = now;
  sessions_.MarkDirty(s);
  s.last_finish = now;
  s.finished = true;
  s.hint_tool_s = r.call.expected_tool_s;
  s.hint_end = r.call.session_end;
  m.ObserveFinish(r.call.prompt_tokens, r.call.output_tokens);
  if (!s.hint_end) {  // the return model answers for calls that did not say they were the last
    m.returns.ObserveCompletion();
    if (s.hint_tool_s >= 0) m.returns.ObserveHintedCompletion();
  }
  // The finishes a hold may wait for: within the fixed hold, or (adaptive)
  // within a round's bound.
  const double window_s = config_.hold == HoldPolicy::kFixed ? config_.slot_hold_s : config_.RoundBoundSeconds();
  sessions_.Finished(s, now, FromSeconds(window_s));
  if (config_.ablation.hkvr) {
    TakeHostDrops();  // drops so far concern the chain as it was before this checkpoint
    const BlockChain chain = s.host_chain();
    InteriorStatePoints(r, chain.size());
    const auto result = hkvr_.Checkpoint(m.id, chain, static_cast<std::int32_t>(chain.size()),
                                         m.block_bytes, m.profile->RecurrentStateBytesPerRank(), now,
                                         m.profile->h2d_bytes_per_s, s.owner, state_points_);
    if (result.missed_blocks > 0) ++counters_.host_capacity_misses;
    // A session that said it ended is the first to give up host room.
    if (s.hint_end) hkvr_.Demote(m.id, chain, s.owner);
    s.checkpoint_done = result.done;
    // Once its copies land the registry holds this much of the chain; an
    // eviction since reaches it through the registry's drop log.
    s.host_blocks = result.present_blocks + result.copied_blocks;
  }
  CallRecord rec;
  rec.id = r.call.id;
  rec.instance = config_.name;
  rec.arrived = r.arrived;
  rec.admitted = r.admitted;
  rec.first_token = r.first_token;
  rec.finished = now;
  rec.kv_source = r.source;
  rec.path = r.path;
  rec.reused_tokens = r.reused;
  rec.preemptions = r.preemptions;
  StopDecoding(m, r);
  std::erase(m.running, &r);
  m.tokens_left -= r.call.output_tokens - r.generated;  // none left when it finished
  const std::int64_t id = r.call.id;
  events.OnFinished(rec);
  requests_.erase(id);
}

void Instance::InteriorStatePoints(const Request& r, std::size_t chain_blocks) {
  state_points_.clear();
  if (!Hybrid(r) || config_.state_checkpoints != StateCheckpoints::kDoubling) return;
  // The state exists only where this call computed: past what it reused.
  for (std::size_t g = 1; g < chain_blocks; g *= 2) {
    if (static_cast<std::int64_t>(g) * config_.block_tokens > r.reused) {
      state_points_.push_back(static_cast<std::int32_t>(g));
    }
  }
}

void Instance::Commit(TimePoint end, const SwitchTiming& timing, InstanceEvents& events) {
  TALARIA_CHECK(in_flight_, "Commit without a planned step");
  in_flight_ = false;
  const double took = ToSeconds(end - step_start_);
  busy_.Step(step_start_, end);
  switch (step_.kind) {
    case Step::Kind::kIdle:
      break;
    case Step::Kind::kSwitch: {
      Model& to = Active();
      SwitchRecord rec;
      rec.instance = config_.name;
      rec.from = step_.switch_step.from != nullptr ? step_.switch_step.from->name : "";
      rec.to = to.name;
      rec.start = step_start_;
      rec.timing = timing;
      rec.path = step_.switch_step.plan.path;
      rec.staged_bytes = step_.switch_step.plan.d2d_bytes;
      rec.weight_bytes = step_.switch_step.plan.weight_bytes;
      rec.dirty_bytes = step_.switch_step.plan.dirty_bytes;
      rec.recapture = step_.switch_step.recapture;
      rec.opened = step_.switch_step.full_open_s > 0;
      events.OnSwitch(rec);
      round_.switch_s += took;
      to.switch_in_estimate_s = EwmaStep(to.switch_in_estimate_s, took, kSwitchEstimateWeight);
      stager_.Clear(pool_);  // its gather used the staging; the KV region below it was reformatted
      StageNextSwitch(end);
      break;
    }
    case Step::Kind::kPrefill:
    case Step::Kind::kSessionPrefill: {
      round_.active_s += took;
      counters_.prefill_s += took;
      if (step_.kind == Step::Kind::kSessionPrefill) counters_.session_prefill_s += took;
      Model& m = Active();
      if (const double predicted = prefill_totals_.predicted_s; predicted > 0) {
        m.prefill_scale = EwmaStep(m.prefill_scale, took / predicted, kStepScaleWeight);
      }
      for (Request* r : batch_) {
        if (r->pinned_host_blocks > 0) {
          hkvr_.Unpin(m.id, HostChain(*r), r->pinned_host_blocks);
          r->pinned_host_blocks = 0;
        }
        if (r->swapped) {
          r->swapped = false;  // restored: resumes decoding
          StartDecoding(m, *r);
          continue;
        }
        r->generated = 1;  // prefill yields the first token
        r->first_token = end;
        events.OnFirstToken(r->call.id, end);
        r->seq = m.next_seq++;
        m.running.push_back(r);
        m.tokens_left += r->call.output_tokens - r->generated;
        StartDecoding(m, *r);
      }
      for (Request* r : batch_) {
        if (Generated(*r) >= r->call.output_tokens && !r->swapped) Finish(*r, end, events);
      }
      break;
    }
    case Step::Kind::kDecode: {
      round_.active_s += took;
      counters_.decode_s += took;
      decode_iterations_ += step_.decode.iterations;
      Model& m = Active();
      if (const double predicted = step_cost::Decode(*m.profile, step_.decode.batch,
                                                            step_.decode.mean_context_tokens,
                                                            step_.decode.iterations);
          predicted > 0) {
        m.decode_scale = EwmaStep(m.decode_scale, took / predicted, kStepScaleWeight);
      }
      // Every decoding call advances (none past its last token); those done
      // finish in their admission order, as the batch runs.
      const std::int64_t was = m.decoded;
      m.decoded += step_.decode.iterations;
      batch_.clear();
      for (const Model::Decoding& d : m.decoding) {
        const std::int64_t generated = d.Generated(m.decoded);
        m.tokens_left -= generated - d.Generated(was);
        if (generated >= d.output) batch_.push_back(d.request);
      }
      std::sort(batch_.begin(), batch_.end(), [](const Request* a, const Request* b) { return a->seq < b->seq; });
      if (!sizes_only_) {
        for (const Request* r : m.running) {
          if (!r->swapped) events.OnTokens(r->call.id, Generated(*r), end);
        }
      }
      for (Request* r : batch_) Finish(*r, end, events);
      break;
    }
  }
  TrackHbm();
  for (const RoundRecord& r : closed_rounds_) events.OnRound(r);
  closed_rounds_.clear();
}

std::string Instance::Describe() const {
  std::string out = config_.name + ": active=" +
                    (active_ >= 0 ? models_[static_cast<std::size_t>(active_)]->name : "-") +
                    (slot_open_ ? " slot open" : " slot closed") + (p_done_ ? " P done" : "") +
                    " kv free " + std::to_string(pool_.free_blocks()) + "/" +
                    std::to_string(pool_.total_blocks());
  for (const auto& m : models_) {
    out += "; " + m->name + ": queued " + std::to_string(m->queue.size()) + ", running " +
           std::to_string(m->running.size());
    for (const Request* r : m->queue) {
      out += " [" + r->call.session_id + (r->call.continuation ? " (continuation)" : "") + " prompt " +
             std::to_string(r->call.prompt_tokens) + " out " + std::to_string(r->call.output_tokens) + "]";
    }
  }
  return out;
}

}  // namespace talaria
