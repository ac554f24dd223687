#include "instance/instance.h"

#include <algorithm>
#include <cstdio>
#include <cmath>
#include <limits>

#include "core/error.h"
#include "core/units.h"
#include "engine/sim_engine.h"
#include "instance/prefill_admission.h"

namespace talaria {

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

struct Instance::Model {
  ModelId id = 0;
  std::string name;
  const ModelProfile* profile = nullptr;
  std::int64_t block_bytes = 0;
  std::int32_t recurrent_blocks = 0;
  std::deque<Request*> queue;     // arrived, not admitted
  std::vector<Request*> running;  // admitted: decoding, or swapped out at a slot end
  // The running calls that are decoding (not swapped out), densely: a
  // decode step's commit advances `decoded` and reads only this array, not
  // each call. A call's output so far is min(base + decoded, output).
  struct Decoding {
    std::int64_t base;
    std::int64_t prompt;
    std::int64_t output;
    Request* request;
    std::int64_t Generated(std::int64_t decoded) const { return std::min(base + decoded, output); }
  };
  std::vector<Decoding> decoding;
  // The decoding batch's size, summed context and fewest tokens left
  // (INT64_MAX when empty), from the dense array.
  struct BatchSums {
    std::int32_t calls = 0;
    std::int64_t context = 0;
    std::int64_t min_left = std::numeric_limits<std::int64_t>::max();
  };
  BatchSums DecodingSums() const {
    BatchSums b;
    for (const Decoding& d : decoding) {
      const std::int64_t generated = d.Generated(decoded);
      ++b.calls;
      b.context += d.prompt + generated;
      b.min_left = std::min(b.min_left, d.output - generated);
    }
    return b;
  }
  std::int64_t decoded = 0;  // decode iterations this model's batch has run
  std::int64_t next_seq = 0;
  // Kept as the queue and running set change, so a snapshot's queued work
  // costs no walk over them: the queue's predicted prefill (exact integer
  // sums of each request's queued_prefill) and the tokens left to generate
  // by queued and running calls.
  Duration queued_prefill{};
  std::int64_t tokens_left = 0;
  double switch_in_estimate_s = 0;
  // EWMA of measured / profile-predicted step time (1 when the engine runs
  // exactly as profiled, as the sim engine does): the router scales its
  // profile-based estimates by these, refreshed from what rounds measured.
  double prefill_scale = 1.0;
  double decode_scale = 1.0;
  bool resident = true;
  double full_open_s = 0;  // from storage, when not resident
  TimePoint last_active;
};

struct Instance::Request {
  // What walks over a model's running calls read (the restore and swap
  // loops, token reports, sequence lists) comes first, next to the call's
  // id and token counts: one or two cache lines per call.
  //
  // Output tokens so far while it is not decoding (queued: 0; swapped out:
  // as of the swap); while decoding, Instance::Generated derives it.
  std::int64_t generated = 0;
  bool swapped = false;   // KV swapped out at a slot end; restored in the next P
  bool decoding = false;  // in its model's `decoding` array
  std::int64_t base = 0;  // while decoding: output so far = base + its model's `decoded`
  std::int64_t seq = 0;   // its place in its model's `running`
  CallRequest call;
  std::int32_t model = 0;
  TimePoint arrived;
  TimePoint admitted;
  TimePoint first_token;
  Duration queued_prefill{};  // its predicted prefill, counted in its model's while queued
  std::vector<BlockId> blocks;
  KvSource source = KvSource::kRecompute;
  AdmitPath path = AdmitPath::kPrefill;
  std::int64_t reused = 0;
  std::int32_t pinned_host_blocks = 0;
  std::int32_t preemptions = 0;
  std::int64_t deferred_in_slot = -1;  // the slot it was last counted as deferred in
  mutable std::uint64_t host_probe_version = UINT64_MAX;  // HKVR version of host_probe_blocks
  mutable std::int32_t host_probe_blocks = 0;
  // Its session, looked up once (SessionOf); null until the session exists.
  mutable Session* session = nullptr;
  mutable bool session_looked_up = false;

  std::span<const PrefixHash> prompt_chain(std::int32_t block_tokens) const {
    const auto n = std::min<std::size_t>(call.chain.size(),
                                         static_cast<std::size_t>(call.prompt_tokens / block_tokens));
    return call.chain.first(n);
  }
};

struct Instance::Session {
  std::string id;
  ChainOwner owner = 0;     // its chains' owner in the host registry
  std::int32_t model = -1;  // model whose device KV `blocks` hold
  std::vector<PrefixHash> chain;
  std::vector<BlockId> blocks;
  bool busy = false;
  TimePoint last_use;
  // Telemetry cache of the host-restorable prefix once its checkpoint's
  // copies land, shortened by the registry's drops (-1: probe again, a drop
  // that could not be placed on its chain); probed while copies are in flight.
  TimePoint checkpoint_done;
  std::int32_t host_blocks = -1;
  // What the last snapshot said of it, and whether that may be out of date.
  KvState reported = KvState::kMissing;
  std::int32_t reported_model = -1;
  std::int64_t reported_tokens = 0;
  bool dirty = false;
  std::int32_t device_index = -1;  // its place in device_sessions_, -1 when it holds no blocks
  std::list<Session*>::iterator by_use;  // its place in by_use_
  std::int32_t requests = 0;  // requests that point at it: it is not forgotten while any do
};

namespace {

// Decode iterations of `step_s` each until the first boundary at or after
// `seconds` from the step's start (at least one).
std::int64_t IterationsCovering(double seconds, double step_s) {
  return std::max<std::int64_t>(1, std::llround(std::ceil(std::max(0.0, seconds) / step_s)));
}

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

constexpr TimePoint kNever = TimePoint::max();
// Sessions idle this long with no device KV leave the instance's table.
constexpr double kSessionIdleS = 600.0;

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
  decode_s += o.decode_s;
  return *this;
}

bool Instance::Resident(const std::string& model) const {
  const std::int32_t i = ModelIndex(model);
  return i >= 0 && models_[static_cast<std::size_t>(i)]->resident;
}

double Instance::OpenModel(Model& m, bool switching) {
  if (m.resident) return 0;
  m.resident = true;
  ++counters_.model_opens;
  // Over the limit, close the least recently active idle model. At a switch
  // the outgoing model leaves the GPUs, so when no open model is idle the
  // least recently active one with queued work closes too: its weights do
  // not fit beside the new model's, and its next slot opens it again.
  // Outside a switch (an operator's open) the active model and models with
  // work stay open, over the limit for now.
  std::int32_t open = 0;
  for (const auto& other : models_) open += other->resident;
  while (config_.max_resident > 0 && open > config_.max_resident) {
    Model* victim = nullptr;
    bool victim_idle = false;
    for (auto& other : models_) {
      if (!other->resident || other.get() == &m) continue;
      const bool idle = !HasWork(*other) && (switching || other->id != active_);
      if (!idle && !switching) continue;
      if (victim == nullptr || (idle && !victim_idle) ||
          (idle == victim_idle && other->last_active < victim->last_active)) {
        victim = other.get();
        victim_idle = idle;
      }
    }
    if (victim == nullptr) break;  // every open model has work: over the limit for now
    victim->resident = false;
    ++counters_.model_closes;
    --open;
  }
  return m.full_open_s;
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

Instance::Session& Instance::SessionFor(const std::string& id) {
  auto& slot = sessions_[id];
  if (slot == nullptr) {
    slot = std::make_unique<Session>();
    slot->id = id;
    slot->owner = next_owner_++;
    by_owner_.emplace(slot->owner, slot.get());
    slot->by_use = by_use_.insert(by_use_.begin(), slot.get());  // never used yet: the oldest
  }
  return *slot;
}

Instance::Session* Instance::SessionOf(const Request& r) {
  if (!r.session_looked_up) {
    r.session_looked_up = true;
    if (auto it = sessions_.find(r.call.session_id); it != sessions_.end()) {
      r.session = it->second.get();
      ++r.session->requests;
    }
  }
  return r.session;
}

Instance::Session& Instance::SessionFor(const Request& r) {
  if (Session* s = SessionOf(r)) return *s;
  Session& s = SessionFor(r.call.session_id);
  r.session = &s;
  ++s.requests;
  return s;
}

void Instance::MarkDirty(Session& s) {
  if (s.dirty) return;
  s.dirty = true;
  dirty_.push_back(&s);
}

void Instance::TrackDevice(Session& s) {
  if (!s.blocks.empty() && s.device_index < 0) {
    s.device_index = static_cast<std::int32_t>(device_sessions_.size());
    device_sessions_.push_back(&s);
  } else if (s.blocks.empty() && s.device_index >= 0) {
    Session* last = device_sessions_.back();
    device_sessions_[static_cast<std::size_t>(s.device_index)] = last;
    last->device_index = s.device_index;
    device_sessions_.pop_back();
    s.device_index = -1;
  }
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

bool Instance::HasWork(const Model& m) const { return !m.queue.empty() || !m.running.empty(); }

std::int32_t Instance::NextModelWithWork(std::int32_t after) const {
  const auto n = static_cast<std::int32_t>(models_.size());
  for (std::int32_t k = 1; k <= n; ++k) {
    const std::int32_t i = ((after < 0 ? -1 : after) + k + n) % n;
    if (HasWork(*models_[static_cast<std::size_t>(i)])) return i;
  }
  return -1;
}

void Instance::Warmup(const std::string& model, TimePoint now) {
  TALARIA_CHECK(active_ < 0 && !in_flight_, "warm-up after serving started");
  active_ = ModelIndex(model);
  TALARIA_CHECK(active_ >= 0, "warm-up of a model this instance does not host");
  Active().resident = true;
  layout_.Activate(model);
  pool_.Format(layout_.kv(), Active().block_bytes);
  StartStagingAfter(now);
}

void Instance::StartStagingAfter(TimePoint now) {
  if (!config_.ablation.d2d_staging || models_.size() < 2) return;
  // Stage the model that follows in round order while this one serves.
  const Model& next = *models_[static_cast<std::size_t>((active_ + 1) % static_cast<std::int32_t>(models_.size()))];
  stager_.Begin(next.name, next.profile->weight_bytes_per_rank, now, pool_);
}

void Instance::Enqueue(CallRequest call, TimePoint now) {
  const std::int32_t index = ModelIndex(call.model);
  TALARIA_CHECK(index >= 0, "call for a model this instance does not host");
  auto r = std::make_unique<Request>();
  const std::int64_t id = call.id;
  r->call = std::move(call);
  r->model = index;
  r->arrived = now;
  Model& m = *models_[static_cast<std::size_t>(index)];
  r->queued_prefill = FromSeconds(m.profile->PrefillSeconds(r->call.prompt_tokens - r->call.prefix_tokens,
                                                            r->call.prefix_tokens));
  m.queued_prefill += r->queued_prefill;
  m.tokens_left += r->call.output_tokens;
  m.queue.push_back(r.get());
  requests_.emplace(id, std::move(r));
}

void Instance::OpenSlot(TimePoint now) {
  Model& m = Active();
  if (!slot_round_counted_) BeginSlotRound(active_, now);
  slot_open_ = true;
  ++slot_serial_;
  slot_start_ = now;
  p_done_ = false;
  decode_iterations_ = 0;
  if (config_.pool == Pool::kHot) {
    slot_budget_s_ = std::numeric_limits<double>::infinity();
    protected_iterations_ = 0;
    return;
  }
  // Eq.3/Eq.5: the round R = sum of slots + sum of switches should stay
  // within gamma * T_TTFT. Each model with work gets an equal share of that
  // bound as its slot; when the predicted switches push R past the bound,
  // the overrun is reported as deadline risk rather than hidden by shrinking
  // slots below what protected decode and prefill need.
  std::int32_t with_work = 0;
  double switches_s = 0;
  for (const auto& other : models_) {
    if (!HasWork(*other)) continue;
    ++with_work;
    switches_s += other->switch_in_estimate_s;
  }
  with_work = std::max(with_work, 1);
  if (with_work == 1) switches_s = 0;
  const double round_s = config_.gamma * config_.ttft_target_s;
  slot_budget_s_ = round_s / with_work;
  if (slot_budget_s_ * with_work + switches_s > round_s) ++counters_.deadline_risk;
  // Eq.4: d_m (T_TPOT - t_D) >= U_m = R - d_m t_D, i.e. d_m >= R / T_TPOT.
  std::int32_t batch = 0;
  std::int64_t context = 0;
  for (const Request* r : m.running) {
    ++batch;
    context += Context(*r);
  }
  const double t_d = m.profile->DecodeStepSeconds(std::max(batch, 1), batch > 0 ? context / batch : 0);
  if (config_.tpot_target_s <= t_d) ++counters_.tpot_infeasible;
  protected_iterations_ = static_cast<std::int32_t>(std::ceil(round_s / config_.tpot_target_s));
  const double floor_s = protected_iterations_ * t_d + config_.min_prefill_budget_s;
  if (slot_budget_s_ < floor_s) {
    slot_budget_s_ = floor_s;  // Eq.4 cannot fit: the round overruns, reported
    ++counters_.deadline_risk;
  }
}

void Instance::BeginSlotRound(std::int32_t model, TimePoint now) {
  // A round gives each model with work one slot: it ends when the
  // scheduler wraps around the model order.
  if (round_open_ && model <= round_last_model_) {
    closed_rounds_.push_back(round_);
    ++counters_.rounds;
    round_open_ = false;
  }
  if (!round_open_) {
    round_ = RoundRecord{};
    round_.instance = config_.name;
    round_.index = counters_.rounds + static_cast<std::int64_t>(closed_rounds_.size());
    round_.start = now;
    round_open_ = true;
  }
  round_last_model_ = model;
  ++round_.slots;
  slot_round_counted_ = true;
}

void Instance::Flush(InstanceEvents& events) {
  for (const RoundRecord& r : closed_rounds_) events.OnRound(r);
  closed_rounds_.clear();
  if (round_open_) {
    round_open_ = false;
    ++counters_.rounds;
    events.OnRound(round_);
  }
}

const Instance::Step& Instance::Plan(TimePoint now, TimePoint horizon) {
  TALARIA_CHECK(!in_flight_, "Plan while a step is in flight");
  hkvr_.CompleteCopies(now);
  if (active_ >= 0 && config_.ablation.d2d_staging) stager_.AdvanceTo(now, pool_);
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
        const std::int32_t target = NextModelWithWork(active_);
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
    if (const TimePoint until = HoldUntil(now); until != kNever) {
      if (!holding_) ++counters_.holds;
      holding_ = true;
      step_.wake_at = until;  // idle, slot open: a return may still enter by SP
      break;
    }
    // The slot is over.
    slot_open_ = false;
    slot_round_counted_ = false;
    const std::int32_t target = NextModelWithWork(active_);
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

// A hybrid model's recurrent state cannot be rolled back: a device hit needs
// the whole previous context reused (the state at its end is kept with the
// session), and a host restore also needs that context to end on a block
// boundary, where the checkpointed state was taken. Otherwise the restore is
// declined (a restore skip) and the prefix recomputed.
bool Instance::DeviceReusable(const Request& r) const {
  const Model& m = *models_[static_cast<std::size_t>(r.model)];
  return m.profile->family != AttentionFamily::kHybrid || r.call.full_reuse;
}

bool Instance::HostRestorable(const Request& r) const {
  const Model& m = *models_[static_cast<std::size_t>(r.model)];
  return m.profile->family != AttentionFamily::kHybrid ||
         (r.call.full_reuse && r.call.prefix_tokens % config_.block_tokens == 0);
}

TimePoint Instance::HoldUntil(TimePoint now) const {
  if (config_.pool != Pool::kCold || !config_.ablation.sp || config_.slot_hold_s <= 0) return kNever;
  const TimePoint slot_end = slot_start_ + FromSeconds(slot_budget_s_);
  if (now >= slot_end) return kNever;
  // Only a session that finished within the hold can keep the slot open:
  // the latest such one, still idle on the active model, sets the hold.
  const Duration hold = FromSeconds(config_.slot_hold_s);
  for (auto it = recent_finishes_.rbegin(); it != recent_finishes_.rend() && it->first + hold > now; ++it) {
    const Session& s = *it->second;
    if (s.model != active_ || s.busy || s.last_use != it->first) continue;
    return std::min(it->first + hold, slot_end);
  }
  return kNever;
}

std::int32_t Instance::HostBlocks(const Request& r) {
  // Queued calls are re-examined at every decode boundary: probe the
  // registry again only when its published set changed.
  if (r.host_probe_version != hkvr_.version()) {
    r.host_probe_blocks = hkvr_.Probe(models_[static_cast<std::size_t>(r.model)]->id,
                                      r.prompt_chain(config_.block_tokens));
    r.host_probe_version = hkvr_.version();
  }
  return r.host_probe_blocks;
}

Instance::Reuse Instance::FindReuse(const Request& r) {
  Reuse u;
  const auto chain = r.prompt_chain(config_.block_tokens);
  if (const Session* s = SessionOf(r); s != nullptr && s->model == active_ && !s->blocks.empty() && !s->busy) {
    const std::int32_t common =
        std::min<std::int32_t>(CommonBlocks(chain, s->chain), static_cast<std::int32_t>(s->blocks.size()));
    if (DeviceReusable(r)) u.device = common;
    else if (common > 0) ++u.skips;
  }
  if (u.device == 0 && config_.ablation.hkvr && r.call.call_index > 0) {
    const std::int32_t found = HostBlocks(r);
    if (HostRestorable(r)) u.host = found;
    else if (found > 0) ++u.skips;
  }
  return u;
}

bool Instance::SpEligible(const Request& r) {
  if (r.call.call_index == 0 || r.arrived <= slot_start_) return false;  // new sessions use P
  const Reuse u = FindReuse(r);
  return u.device > 0 || u.host > 0;
}

bool Instance::AllocateBlocks(std::int32_t n, std::vector<BlockId>& out, const Session* keep) {
  while (!pool_.Allocate(n, out)) {
    // Evict the least recently used idle session's device KV (it stays
    // host-restorable if HKVR checkpointed it).
    Session* victim = nullptr;
    for (Session* s : device_sessions_) {
      if (s == keep || s->busy) continue;
      if (victim == nullptr || s->last_use < victim->last_use ||
          (s->last_use == victim->last_use && s->owner < victim->owner)) {
        victim = s;  // ties: the session this instance saw first
      }
    }
    if (victim == nullptr) return false;
    pool_.Free(victim->blocks);
    victim->blocks.clear();
    TrackDevice(*victim);
    MarkDirty(*victim);
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
  counters_.restore_skips += u.skips;
  Session& s = SessionFor(r);
  const auto chain = r.prompt_chain(bt);
  const std::int32_t device = u.device;
  // Admission touches the restored blocks, so the registry's LRU sees the use.
  const std::int32_t host =
      u.host > 0 ? std::min(u.host, hkvr_.Lookup(m.id, chain.first(static_cast<std::size_t>(u.host)), now)) : 0;
  const auto total = static_cast<std::int32_t>((r.call.prompt_tokens + r.call.output_tokens + bt - 1) / bt) +
                     m.recurrent_blocks;
  // Keep the matched device blocks (radix sharing), free the rest.
  if (!s.blocks.empty()) {
    pool_.Free(std::span(s.blocks).subspan(static_cast<std::size_t>(device)));
    s.blocks.resize(static_cast<std::size_t>(device));
  }
  scratch_blocks_.clear();
  if (!AllocateBlocks(total - device, scratch_blocks_, &s)) return false;
  stager_.OnAllocated(scratch_blocks_, pool_);
  r.blocks = std::move(s.blocks);
  r.blocks.insert(r.blocks.end(), scratch_blocks_.begin(), scratch_blocks_.end());
  s.blocks.clear();
  TrackDevice(s);
  s.busy = true;
  s.model = active_;
  MarkDirty(s);

  std::int64_t cached = static_cast<std::int64_t>(device > 0 ? device : host) * bt;
  cached = std::min(cached, r.call.prompt_tokens - 1);  // the last token is always computed
  r.source = device > 0 ? KvSource::kDevice : host > 0 ? KvSource::kHost : KvSource::kRecompute;
  r.reused = cached;
  r.admitted = now;
  if (host > 0) {
    hkvr_.Pin(m.id, chain, host);
    r.pinned_host_blocks = host;
  }
  item = PrefillItem{r.call.prompt_tokens - cached, cached, host > 0 ? cached : 0, Seq(r)};
  return true;
}

SeqRef Instance::Seq(const Request& r) const {
  return SeqRef{r.call.id, r.call.prompt_ids, r.blocks, r.call.output_tokens, config_.ablation.hkvr};
}

std::int64_t Instance::Generated(const Request& r) const {
  if (!r.decoding) return r.generated;
  const Model& m = *models_[static_cast<std::size_t>(r.model)];
  return std::min(r.base + m.decoded, r.call.output_tokens);
}

std::int64_t Instance::Context(const Request& r) const { return r.call.prompt_tokens + Generated(r); }

void Instance::StartDecoding(Model& m, Request& r) {
  r.base = r.generated - m.decoded;
  m.decoding.push_back(Model::Decoding{r.base, r.call.prompt_tokens, r.call.output_tokens, &r});
  r.decoding = true;
}

void Instance::StopDecoding(Model& m, Request& r) {
  if (!r.decoding) return;
  r.generated = Generated(r);
  r.decoding = false;
  auto it = std::find_if(m.decoding.begin(), m.decoding.end(), [&](const Model::Decoding& d) { return d.request == &r; });
  TALARIA_CHECK(it != m.decoding.end(), "a decoding call missing from its model's batch");
  *it = m.decoding.back();  // (admission order is kept by Request::seq)
  m.decoding.pop_back();
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
      predicted += SimEngine::PrefillSeconds(*m.profile, std::span(&item, 1));
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
      cost = SimEngine::PrefillSeconds(*m.profile, std::span(&guess, 1));
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
  return true;
}

bool Instance::PlanDecode(TimePoint now, TimePoint horizon) {
  Model& m = Active();
  const auto [batch, context, min_left] = m.DecodingSums();
  decode_seqs_.clear();
  if (batch == 0) return false;
  if (!sizes_only_) {
    for (const Request* r : m.running) {
      if (!r->swapped) decode_seqs_.push_back(Seq(*r));
    }
  }
  const bool cold = config_.pool == Pool::kCold;
  const std::int32_t other = NextModelWithWork(active_);
  const bool contended = cold && ((other >= 0 && other != active_) || !Active().queue.empty());
  // The slot ends with its budget, but never before its protected decode
  // (Eq.4: d_m iterations per round keep the average token cadence), so a
  // call whose prefill used the budget still makes progress.
  const double left_s = slot_budget_s_ - ToSeconds(now - slot_start_);
  const std::int32_t protected_left = std::max(0, protected_iterations_ - decode_iterations_);
  if (contended && left_s <= 0 && protected_left == 0) return false;

  const std::int64_t mean_context = context / batch;
  const double step_s = m.profile->DecodeStepSeconds(batch, mean_context);
  std::int64_t iterations = min_left;
  if (contended) {
    const std::int64_t by_budget = left_s > 0 ? std::llround(std::ceil(left_s / step_s)) : 0;
    iterations = std::min<std::int64_t>(iterations, std::max<std::int64_t>({1, by_budget, protected_left}));
  }
  const bool admits_at_boundaries = !cold || config_.ablation.sp;
  if (admits_at_boundaries && horizon != kNever) {
    iterations = std::min<std::int64_t>(iterations, IterationsCovering(ToSeconds(horizon - now), step_s));
  }
  step_.kind = Step::Kind::kDecode;
  step_.decode = DecodeStep{m.profile, batch, mean_context, static_cast<std::int32_t>(iterations), decode_seqs_};
  return true;
}

bool Instance::ShortenDecode(TimePoint at) {
  if (!in_flight_ || step_.kind != Step::Kind::kDecode || step_.decode.iterations <= 1) return false;
  if (config_.pool == Pool::kCold && !config_.ablation.sp) return false;
  // The same boundary PlanDecode picks for a horizon at `at`.
  const double step_s = step_.decode.model->DecodeStepSeconds(step_.decode.batch, step_.decode.mean_context_tokens);
  const std::int64_t iterations = IterationsCovering(ToSeconds(at - step_start_), step_s);
  if (iterations >= step_.decode.iterations) return false;
  step_.decode.iterations = static_cast<std::int32_t>(iterations);
  return true;
}

void Instance::SplitDecode(TimePoint first_end, std::int32_t first, InstanceEvents& events) {
  TALARIA_CHECK(in_flight_ && step_.kind == Step::Kind::kDecode && first >= 1 && first < step_.decode.iterations,
                "SplitDecode needs a decode step in flight with more iterations");
  const std::int32_t rest = step_.decode.iterations - first;
  step_.decode.iterations = first;
  Commit(first_end, SwitchTiming{}, events);
  step_.kind = Step::Kind::kDecode;
  step_.decode.iterations = rest;
  step_.decode.mean_context_tokens += first;
  step_start_ = first_end;
  in_flight_ = true;
}

void Instance::ReleaseModelKv(Model& m, TimePoint now, Duration& drain) {
  // Switch barrier (invariant 3): the outgoing model's D2H copies drain.
  if (config_.ablation.hkvr) drain = hkvr_.DrainModel(m.id, now) - now;
  // Calls still decoding are swapped out with the region (request-level
  // preemption, part of the round scheduler in every configuration, unlike
  // HKVR's session registry) and resume in the model's next slot.
  double swap_s = 0;
  for (Request* r : m.running) {
    if (r->swapped) continue;
    swap_s += static_cast<double>(static_cast<std::int64_t>(r->blocks.size()) * m.block_bytes) /
              m.profile->h2d_bytes_per_s;
    r->blocks.clear();
    StopDecoding(m, *r);
    r->swapped = true;
    ++r->preemptions;
    ++counters_.preemptions;
  }
  drain += FromSeconds(swap_s);
  // Sessions with blocks of another model were released at that model's
  // switch, so those holding blocks now are this model's.
  for (Session* s : device_sessions_) {
    TALARIA_CHECK(s->model == m.id, "device KV of a model that is not switching out");
    s->blocks.clear();  // the KV region is released
    s->device_index = -1;
    MarkDirty(*s);
  }
  device_sessions_.clear();
}

bool Instance::PlanSwitch(TimePoint now, std::int32_t target) {
  Model& to = *models_[static_cast<std::size_t>(target)];
  GatherPlan plan;
  if (config_.ablation.d2d_staging && active_ >= 0) {
    plan = stager_.Plan(to.name, to.profile->weight_bytes_per_rank);
  } else {
    plan.model = to.name;
    plan.weight_bytes = plan.h2d_bytes = to.profile->weight_bytes_per_rank;
  }
  Duration drain{};
  const ModelProfile* from = nullptr;
  if (active_ >= 0) {
    from = Active().profile;
    ReleaseModelKv(Active(), now, drain);
  }
  stager_.Cancel(pool_);
  const double full_open_s = OpenModel(to, /*switching=*/true);
  if (full_open_s > 0) {  // nothing of it was staged or cached
    plan.d2d_bytes = plan.dirty_bytes = 0;
    plan.h2d_bytes = plan.weight_bytes;
    plan.path = SwitchPath::kH2d;
  }
  const HbmLayout::Activation activation = layout_.Activate(to.name);
  pool_.Format(layout_.kv(), to.block_bytes);
  to.last_active = now;
  step_.kind = Step::Kind::kSwitch;
  step_.switch_step = SwitchStep{from, to.profile, plan, drain, activation.bases_changed, full_open_s};
  active_ = target;
  slot_open_ = false;
  BeginSlotRound(target, now);
  return true;
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
  if (r.pinned_host_blocks > 0) hkvr_.Unpin(m.id, r.prompt_chain(config_.block_tokens), r.pinned_host_blocks);
  if (Session* s = SessionOf(r); s != nullptr && s->busy) {
    s->busy = false;
    s->blocks.clear();
    TrackDevice(*s);
    MarkDirty(*s);
  }
  if (r.session != nullptr) --r.session->requests;
  ++counters_.cancelled;
  requests_.erase(it);
  return true;
}

void Instance::Finish(Request& r, TimePoint now, InstanceEvents& events) {
  Model& m = *models_[static_cast<std::size_t>(r.model)];
  Session& s = SessionFor(r);
  --s.requests;  // the request ends here
  // The new context extends a prefix of the previous one: copy only what differs.
  const auto keep = static_cast<std::size_t>(CommonBlocks(s.chain, r.call.chain));
  s.chain.resize(keep);
  s.chain.insert(s.chain.end(), r.call.chain.begin() + static_cast<std::ptrdiff_t>(keep), r.call.chain.end());
  s.blocks = std::move(r.blocks);
  TrackDevice(s);
  s.model = r.model;
  s.busy = false;
  s.last_use = now;
  by_use_.splice(by_use_.end(), by_use_, s.by_use);
  MarkDirty(s);
  const Duration hold = FromSeconds(config_.slot_hold_s);
  while (!recent_finishes_.empty() && recent_finishes_.front().first + hold <= now) recent_finishes_.pop_front();
  recent_finishes_.emplace_back(now, &s);
  if (config_.ablation.hkvr) {
    TakeHostDrops();  // drops so far concern the chain as it was before this checkpoint
    const auto result = hkvr_.Checkpoint(m.id, s.chain, static_cast<std::int32_t>(s.chain.size()),
                                         m.block_bytes, m.profile->RecurrentStateBytesPerRank(), now,
                                         m.profile->h2d_bytes_per_s, s.owner);
    if (result.missed_blocks > 0) ++counters_.host_capacity_misses;
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

void Instance::TrackHbm() {
  const std::int64_t used =
      layout_.weights().size() + pool_.used_bytes() + stager_.StagedBytes() + layout_.graph_pool().size() +
      layout_.runtime().size() +
      static_cast<std::int64_t>(config_.non_bump_reserved_gib * static_cast<double>(kGiB));
  counters_.hbm_peak_bytes = std::max(counters_.hbm_peak_bytes, used);
}

void Instance::Commit(TimePoint end, const SwitchTiming& timing, InstanceEvents& events) {
  TALARIA_CHECK(in_flight_, "Commit without a planned step");
  in_flight_ = false;
  const double took = ToSeconds(end - step_start_);
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
      to.switch_in_estimate_s = 0.7 * to.switch_in_estimate_s + 0.3 * took;  // EWMA
      StartStagingAfter(end);
      break;
    }
    case Step::Kind::kPrefill:
    case Step::Kind::kSessionPrefill: {
      round_.active_s += took;
      counters_.prefill_s += took;
      Model& m = Active();
      if (const double predicted = SimEngine::PrefillSeconds(*m.profile, step_.prefill.items); predicted > 0) {
        m.prefill_scale = 0.8 * m.prefill_scale + 0.2 * (took / predicted);
      }
      for (Request* r : batch_) {
        if (r->pinned_host_blocks > 0) {
          hkvr_.Unpin(m.id, r->prompt_chain(config_.block_tokens), r->pinned_host_blocks);
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
      if (const double predicted = SimEngine::DecodeSeconds(*m.profile, step_.decode.batch,
                                                            step_.decode.mean_context_tokens,
                                                            step_.decode.iterations);
          predicted > 0) {
        m.decode_scale = 0.8 * m.decode_scale + 0.2 * (took / predicted);
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

void Instance::Snapshot(TimePoint now, InstanceTelemetry& out, bool delta) {
  hkvr_.CompleteCopies(now);
  out.instance = config_.name;
  out.version = ++snapshot_version_;
  out.taken_at = now;
  out.models.resize(models_.size());
  const double bound = config_.gamma * config_.ttft_target_s;
  const double protected_iterations = std::ceil(bound / config_.tpot_target_s);  // as OpenSlot
  double round = 0;
  std::int32_t with_work = 0;
  for (std::size_t i = 0; i < models_.size(); ++i) {
    const Model& m = *models_[i];
    ModelTelemetry& t = out.models[i];
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
    t.running = static_cast<std::int32_t>(m.running.size());
    // Prefill of the queue, and the tokens left to generate at this batch's
    // per-call share of a decode step.
    const double t_d = m.profile->DecodeStepSeconds(std::max<std::int32_t>(1, t.running), 32768);
    const double decode_s = static_cast<double>(m.tokens_left) * t_d / std::max<std::int32_t>(1, t.running);
    const double work = ToSeconds(m.queued_prefill) + decode_s;
    t.queued_work_s = work;
    t.switch_in_s = t.active ? 0.0 : m.switch_in_estimate_s;
    t.full_open_s = m.full_open_s;
    t.prefill_scale = m.prefill_scale;
    t.decode_scale = m.decode_scale;
    t.weight_bytes_per_rank = m.profile->weight_bytes_per_rank;
    if (t.queued + t.running > 0) {
      ++with_work;
      // Eq.3: its slot must hold the queued prefill and the protected decode
      // (Eq.4's d_m iterations); decode past that fills whatever budget is
      // left, so the rest of its decode is not round load.
      round += ToSeconds(m.queued_prefill) + std::min(decode_s, protected_iterations * t_d) + t.switch_in_s;
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
  out.restore_bytes_per_s = models_.front()->profile->h2d_bytes_per_s;
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
  if (now >= next_sweep_) {
    for (auto it = by_use_.begin(); it != by_use_.end() && ToSeconds(now - (*it)->last_use) > kSessionIdleS;) {
      Session& s = **it++;
      if (!s.busy && s.blocks.empty() && s.requests == 0) Forget(s, delta, out);
    }
    next_sweep_ = now + FromSeconds(kSessionIdleS / 8);
  }
  if (!delta || all_dirty_) {
    for (Session* s : dirty_) s->dirty = false;
    dirty_.clear();
    for (auto& [id, s] : sessions_) {
      if (all_dirty_) s->host_blocks = -1;
      Report(*s, now, delta, out);
    }
    all_dirty_ = false;
  } else {
    dirty_scratch_.swap(dirty_);
    dirty_.clear();
    for (Session* s : dirty_scratch_) {
      s->dirty = false;
      Report(*s, now, delta, out);
    }
    dirty_scratch_.clear();
  }
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
  const double share = config_.gamma * config_.ttft_target_s / std::max(with_work, 1);
  const auto a = static_cast<std::size_t>(active_);
  double wait = slot_open_ ? std::clamp(slot_budget_s_ - ToSeconds(now - slot_start_), 0.0, t[a].queued_work_s)
                           : std::min(share, t[a].queued_work_s);
  const auto n = static_cast<std::int32_t>(models_.size());
  for (std::int32_t k = (active_ + 1) % n; k != target; k = (k + 1) % n) {
    const Model& m = *models_[static_cast<std::size_t>(k)];
    if (HasWork(m)) wait += std::min(share, t[static_cast<std::size_t>(k)].queued_work_s) + m.switch_in_estimate_s;
  }
  // Back into the active model: the router charges no switch for it.
  if (target == active_) wait += models_[a]->switch_in_estimate_s;
  return wait;
}

void Instance::Forget(Session& s, bool delta, InstanceTelemetry& out) {
  if (delta && s.reported != KvState::kMissing) out.sessions.emplace(s.id, CachedPrefix{});
  by_owner_.erase(s.owner);
  std::erase_if(recent_finishes_, [&](const auto& f) { return f.second == &s; });
  if (s.dirty) std::erase(dirty_, &s);
  by_use_.erase(s.by_use);
  sessions_.erase(sessions_.find(s.id));
}

void Instance::TakeHostDrops() {
  for (const HostKvRegistry::Drop& d : hkvr_.drops()) {
    if (d.owner == HostKvRegistry::kAnyOwner) {
      all_dirty_ = true;
      continue;
    }
    auto it = by_owner_.find(d.owner);
    if (it == by_owner_.end()) continue;
    Session& s = *it->second;
    // A chain walk starts at the segment keyed by its first block, so a
    // drop there is on the session's path exactly when that block is its
    // chain's; a segment further in may be bypassed by another that holds
    // the same blocks (registered again after an eviction): probe again.
    if (s.host_blocks < 0 || d.start > 0) {
      s.host_blocks = -1;
      MarkDirty(s);
      continue;
    }
    // The drop shortens the session's host prefix only if its chain ran
    // through the blocks that went, and only if the prefix reached them.
    const auto cut = static_cast<std::size_t>(d.start + d.kept);
    if (s.model < 0 || models_[static_cast<std::size_t>(s.model)]->id != d.model || cut >= s.chain.size() ||
        s.chain[cut] != d.dropped || s.host_blocks <= d.start + d.kept) {
      continue;
    }
    s.host_blocks = d.start + d.kept;
    MarkDirty(s);
  }
  hkvr_.ClearDrops();
}

void Instance::Report(Session& s, TimePoint now, bool delta, InstanceTelemetry& out) {
  KvState state = KvState::kMissing;
  std::int64_t tokens = 0;
  if (s.model >= 0) {
    if (s.model == active_ && !s.blocks.empty()) {
      state = KvState::kDevice;
      tokens = static_cast<std::int64_t>(s.chain.size()) * config_.block_tokens;
    } else if (config_.ablation.hkvr) {
      std::int32_t host = 0;
      const ModelId id = models_[static_cast<std::size_t>(s.model)]->id;
      if (now < s.checkpoint_done) {
        // Copies in flight: report what has landed, look again next time.
        host = hkvr_.Probe(id, s.chain);
        MarkDirty(s);
      } else {
        if (s.host_blocks < 0) s.host_blocks = hkvr_.Probe(id, s.chain);
        host = s.host_blocks;
      }
      if (host > 0) {
        state = KvState::kHost;
        tokens = static_cast<std::int64_t>(host) * config_.block_tokens;
      }
    }
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

std::int32_t Instance::StaleHostPrefixes(TimePoint now) const {
  std::int32_t stale = 0;
  for (const auto& [id, s] : sessions_) {
    if (s->model < 0 || s->host_blocks < 0 || now < s->checkpoint_done) continue;
    const bool pending = std::any_of(hkvr_.drops().begin(), hkvr_.drops().end(), [&](const auto& d) {
      return d.owner == HostKvRegistry::kAnyOwner || d.owner == s->owner;
    });
    if (pending) continue;  // the next snapshot takes these drops first
    if (hkvr_.Probe(models_[static_cast<std::size_t>(s->model)]->id, s->chain) != s->host_blocks) ++stale;
  }
  return stale;
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
      out += " [" + r->call.session_id + "#" + std::to_string(r->call.call_index) + " prompt " +
             std::to_string(r->call.prompt_tokens) + " out " + std::to_string(r->call.output_tokens) + "]";
    }
  }
  return out;
}

}  // namespace talaria
