// Slots and rounds (paper §3.2, §3.4, Eq.3-5): opening a slot with its
// budget, holding it for a return, decode steps and their boundaries, the
// switch to the next model with work, the decoding batch's bookkeeping.
#include "instance/instance_parts.h"

#include "core/error.h"
#include "profile/step_cost.h"

namespace talaria {

using instance_internal::IterationsCovering;
using instance_internal::kNever;

namespace {
// Adaptive holds: the busy fraction read for the busy period's length. Near
// 1 its estimate W / (1 - rho) grows without bound on a fraction measured
// over 64 steps; capped here, a first call counts over at most 10 W.
// (Measured at 0.75, 0.9 and 0.99: docs/policy-matrix.md "Eleventh stop".)
constexpr double kMaxBusyFraction = 0.9;
}  // namespace

bool Instance::HasWork(const Model& m) const { return !m.queue.empty() || !m.running.empty(); }

std::int32_t Instance::NextModelWithWork(std::int32_t after) const {
  const auto n = static_cast<std::int32_t>(models_.size());
  for (std::int32_t k = 1; k <= n; ++k) {
    const std::int32_t i = ModelAfter(after, k);
    if (HasWork(*models_[static_cast<std::size_t>(i)])) return i;
  }
  return -1;
}

std::int32_t Instance::NextSlotModel(TimePoint now) const {
  if (!config_.defer_forced_opens) return NextModelWithWork(active_);
  // NextModelWithWork's order, passing over deferred opens.
  const auto n = static_cast<std::int32_t>(models_.size());
  std::int32_t first = -1;
  for (std::int32_t k = 1; k <= n; ++k) {
    const std::int32_t i = ModelAfter(active_, k);
    const Model& m = *models_[static_cast<std::size_t>(i)];
    if (!HasWork(m)) continue;
    if (DeferredForSeconds(m, now, 0) <= 0) return i;
    if (first < 0) first = i;
  }
  return first;  // -1 when none has work; a deferred one only if none other has (not reached: a
                 // forced reopen means an open model has work)
}

double Instance::DeferredForSeconds(const Model& m, TimePoint now, std::int32_t extra) const {
  if (!config_.defer_forced_opens || m.resident) return 0;
  const double reopen_s = ForcedReopenSeconds(m);
  if (reopen_s <= 0) return 0;  // it closes an idle model, or none
  // Rent: what m's calls have waited so far (queued since they arrived,
  // swapped out since m's last slot), each adding a second a second.
  // Purchase: the two opens, which every call of the other models waits
  // through.
  double rent_s = 0;
  for (const Request* r : m.queue) rent_s += ToSeconds(now - r->arrived);
  rent_s += static_cast<double>(m.running.size()) * ToSeconds(now - m.left_at);
  std::int64_t others = 0;
  for (const auto& other : models_) {
    if (other.get() != &m) others += static_cast<std::int64_t>(other->queue.size() + other->running.size());
  }
  const double owed_s = (m.full_open_s + reopen_s) * static_cast<double>(others) - rent_s;
  const auto payers = static_cast<double>(m.queue.size() + m.running.size()) + extra;
  return owed_s > 0 && payers > 0 ? owed_s / payers : 0;
}

Instance::RoundShare Instance::RoundShareNow() const {
  RoundShare share;
  for (std::size_t i = 0; i < models_.size(); ++i) {
    if (static_cast<std::int32_t>(i) != active_ && !HasWork(*models_[i])) continue;
    ++share.models;
    share.switches_s += models_[i]->switch_in_estimate_s;
  }
  share.models = std::max(share.models, 1);
  if (share.models == 1) share.switches_s = 0;  // no switch: the slot is the round
  const double round_s = config_.RoundBoundSeconds();
  share.slot_s =
      (config_.switches_in_round_budget ? std::max(0.0, round_s - share.switches_s) : round_s) / share.models;
  return share;
}

void Instance::OpenSlot(TimePoint now) {
  Model& m = Active();
  if (!slot_round_counted_) BeginSlotRound(active_, now);
  slot_open_ = true;
  ++slot_serial_;
  slot_start_ = now;
  wait_calibration_.Observe(m.predicted_wait_s, ToSeconds(now - m.left_at));  // its way back (adaptive holds)
  m.predicted_wait_s = -1;
  p_done_ = false;
  decode_iterations_ = 0;
  if (config_.pool == Pool::kHot) {
    slot_budget_s_ = std::numeric_limits<double>::infinity();
    protected_iterations_ = 0;
    return;
  }
  // Eq.3/Eq.5: the round R = sum of slots + sum of switches should stay
  // within gamma * T_TTFT. Each model with work gets an equal share of the
  // bound as its slot: of what its predicted switches (one into each model
  // with work) leave, with switches_in_round_budget (the paper's reading);
  // of all of it otherwise, the switches then lengthening the round, which
  // is reported as deadline risk. A slot is never shrunk below what
  // protected decode and a minimum prefill need: that overrun is reported
  // too, not hidden.
  // (The active model has work here: Plan opens a slot only for one.)
  const RoundShare share = RoundShareNow();
  const double round_s = config_.RoundBoundSeconds();
  slot_budget_s_ = share.slot_s;
  if (!config_.switches_in_round_budget && share.switches_s > 0) ++counters_.deadline_risk;
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

TimePoint Instance::HoldUntil(TimePoint now) const {
  if (config_.pool != Pool::kCold || !config_.ablation.sp) return kNever;
  if (config_.hold == HoldPolicy::kAdaptive) return AdaptiveHoldUntil(now);
  if (config_.slot_hold_s <= 0) return kNever;
  const TimePoint slot_end = SlotEnd();
  if (now >= slot_end) return kNever;
  // Only a session that finished within the hold can keep the slot open:
  // the latest such one, still idle on the active model, sets the hold.
  const Duration hold = FromSeconds(config_.slot_hold_s);
  const auto& recent = sessions_.recent_finishes();
  for (auto it = recent.rbegin(); it != recent.rend() && it->first + hold > now; ++it) {
    const Session& s = *it->second;
    if (s.model != active_ || s.busy || s.last_use != it->first) continue;
    if (s.hint_end) continue;  // it said it will not come back
    return std::min(it->first + hold, slot_end);
  }
  return kNever;
}

TimePoint Instance::CommittedHoldEnd() const {
  // An adaptive hold is no commitment: a call that arrives is counted among
  // those it keeps waiting and may end it (telemetry that advertised it
  // moved calls off instances that would have yielded to them;
  // docs/policy-matrix.md "Thirteenth stop").
  if (config_.hold != HoldPolicy::kFixed) return kNever;
  // Plan left the instance idle with its slot open until the hold's end.
  return holding_ && slot_open_ && !in_flight_ ? step_.wake_at : kNever;
}

Instance::HoldStakes Instance::HoldStakesNow() const {
  // N: the other models' calls a hold keeps waiting. W: what a return that
  // misses the slot waits for the model's next one: the other models' slots
  // (Eq.3's terms: queued prefill, protected decode, switch in) and the
  // switch back. While nothing waits (N = 0) a hold costs nothing: it lasts
  // to the slot's end, and an arrival for another model plans again, with N
  // counting it.
  const Model& active = *models_[static_cast<std::size_t>(active_)];
  // The active model's queued calls wait too: a first call is admitted only
  // at a slot's start (P), not mid-slot (SP).
  HoldStakes stakes;
  stakes.waiting = static_cast<std::int64_t>(active.queue.size());
  // The other models in the rotation's order, so that each one's slot
  // start is known: a return for it that arrives before then waits for
  // that slot, which a hold delays; one that arrives during it enters by
  // SP, held or not. A first call waits for a slot's start either way, and
  // a model with no work has no place in the rotation yet: their calls
  // count over all of W (per second, `over_wait`). No other model with
  // work, no switch: a return that misses finds the model still open, in
  // a fresh slot (W = 0).
  double first_per_s = active.first_calls.PerSecond();
  double over_wait = first_per_s;
  double before_slot = 0;  // the other models' returns expected before their slot starts
  bool switches_away = false;
  double slots_s = 0;  // the other models' slots so far, switches in included
  for (std::int32_t k = 1; k < static_cast<std::int32_t>(models_.size()); ++k) {
    const Model& m = *models_[static_cast<std::size_t>(ModelAfter(active_, k))];
    if (!HasWork(m)) {
      over_wait += m.arrivals.PerSecond();
      continue;
    }
    switches_away = true;
    stakes.waiting += static_cast<std::int64_t>(m.queue.size() + m.running.size());
    const double t_d =
        m.profile->DecodeStepSeconds(std::max<std::int32_t>(1, static_cast<std::int32_t>(m.running.size())),
                                     static_cast<std::int64_t>(m.context_tokens.value));
    slots_s += m.switch_in_estimate_s;
    const double first = m.first_calls.PerSecond();
    first_per_s += first;
    over_wait += first;
    before_slot += std::max(0.0, m.arrivals.PerSecond() - first) * slots_s;
    slots_s += ToSeconds(m.queued_prefill) + protected_iterations_ * t_d;
  }
  if (switches_away) stakes.missed_wait_s = slots_s + active.switch_in_estimate_s;  // and the switch back
  stakes.delayed_arrivals = over_wait * stakes.missed_wait_s + before_slot;
  stakes.first_arrivals = first_per_s * stakes.missed_wait_s;
  return stakes;
}

TimePoint Instance::AdaptiveHoldLimit() const {
  const TimePoint slot_end = SlotEnd();
  if (!config_.hold_within_share) return slot_end;
  // OpenSlot's share, counted now: the active model keeps its slot.
  const RoundShare share = RoundShareNow();
  if (share.models == 1) return slot_end;  // nothing else waits: the slot is the round
  // Eq.3 bounds the round, not each slot: the round's k-th slot may last
  // until the round's start plus k shares, never past the round's bound
  // (gamma * T_TTFT), so what the round's earlier slots left of theirs this
  // one may hold for; and never less than its own share (before 2026-12-07
  // its own share only, which cut holds after short slots:
  // docs/policy-matrix.md "Fifteenth stop").
  const TimePoint own = slot_start_ + FromSeconds(share.slot_s);
  const TimePoint in_round =
      round_open_ ? round_.start + FromSeconds(std::min(share.slot_s * round_.slots, config_.RoundBoundSeconds()))
                  : own;
  return std::min(slot_end, std::max(own, in_round));
}

TimePoint Instance::AdaptiveHoldUntil(TimePoint now) const {
  // The slot's end, or with hold_within_share the end of its place in the
  // round (AdaptiveHoldLimit). The catches below must then also finish by
  // it: a caught return's decode is work, which the slot keeps to its end,
  // but past that place it takes the waiting models' share of the round.
  // (Fitting catches to the slot's end instead kept more TTFT and lost most
  // of the SCT tail's gain: docs/policy-matrix.md "Fourteenth stop".)
  const TimePoint limit = AdaptiveHoldLimit();
  if (now >= limit) return kNever;
  const Model& active = *models_[static_cast<std::size_t>(active_)];
  const HoldStakes stakes = HoldStakesNow();
  // W as measured: the queues' prediction scaled by how the ways back
  // compared with it. And the cost side to match: a hold delays not only
  // the N calls waiting now but the calls that arrive while a missed return
  // waits W and then wait for a slot it delays (A W: first calls, and the
  // other models' returns that come before their slot; HoldStakes; before
  // 2026-12-07 every call of the other models over all of W).
  //
  // A delay inserted now shifts every slot after it until the instance next
  // idles. A session already here meets that shift at most once, as counted
  // above; but new sessions keep arriving, and each first call waits for a
  // slot's start, over the rest of the busy period: W / (1 - rho) by the
  // M/G/1 busy period, rho the instance's busy fraction lately, where A W
  // counts them over W. So first calls count W rho / (1 - rho) more (before
  // 2026-12-07 over W only, which charged a hold too little on an instance
  // that seldom idles; docs/policy-matrix.md "Eleventh stop").
  const double calibration = wait_calibration_.Scale();
  const double missed_wait_s = stakes.missed_wait_s * calibration;
  const double waiting = static_cast<double>(stakes.waiting);
  const double rho = std::min(busy_.Value(), kMaxBusyFraction);
  const double arriving =
      stakes.waiting > 0 ? (stakes.delayed_arrivals + stakes.first_arrivals * rho / (1 - rho)) * calibration : 0;
  const double delayed = waiting + arriving;
  // The idle sessions that finished on the active model lately: each one's
  // gap distribution and how likely it was to be back by now, once.
  std::vector<HoldCandidate>& gone = hold_scratch_;  // reused: a scheduler step allocates nothing
  gone.clear();
  for (const auto& [finished, session] : sessions_.recent_finishes()) {
    const Session& s = *session;
    if (s.model != active_ || s.busy || s.last_finish != finished || s.hint_end) continue;
    // A tool-time hint, weighed by how well hints have predicted returns
    // here, replaces what the session's own gaps say.
    HoldCandidate g{s.hint_tool_s >= 0 ? active.returns.ForHint(s.hint_tool_s) : active.returns.For(s.gaps),
                    ToSeconds(now - finished), 0};
    if (config_.hold_charges_decode && !s.blocks.empty()) {
      // A return that misses is readmitted in the model's next slot: its
      // context restored from host KV, or recomputed without HKVR.
      const std::int64_t held = static_cast<std::int64_t>(s.blocks.size()) * config_.block_tokens;
      g.readmit_s = config_.ablation.hkvr ? step_cost::Restore(*active.profile, held)
                                          : step_cost::Recompute(*active.profile, held);
    }
    g.back_by_now = g.gaps.Within(g.gone_s);
    if (g.back_by_now < 1) gone.push_back(g);
  }
  // Expected returns within h (each conditional on not being back yet), for
  // h on a geometric grid up to the hold's limit (the slot's end, or its
  // place in the round's: "the slot's end" below reads either).
  const double horizon_s = ToSeconds(limit - now);
  const double token_s = active.profile->DecodeStepSeconds(1, static_cast<std::int64_t>(active.context_tokens.value)) *
                         active.decode_scale;
  const double decode_s = active.output_tokens.value * token_s;
  // A return caught later than its decode's length before the slot's end is
  // swapped out at the end and waits for the model's next slot all the same:
  // only the catches whose decode fits in what is left of the slot save W.
  // Without hold_charges_decode, those caught up to the mean decode's length
  // before the end; with it, each catch weighed by the chance that its
  // decode, drawn from the model's output lengths lately, fits (DecodeFits).
  const double catch_by_s = horizon_s - decode_s;
  const bool charges_decode = config_.hold_charges_decode;
  auto fits = [&](double t_s) { return active.DecodeFits(horizon_s - t_s, token_s); };
  // S: while the next slot's model is still being staged, a switch now
  // would reload the rest of its weights from host at the rate staging
  // copies them, so the first S seconds of a hold (or of a caught call's
  // decode) delay no waiting call: the switch after them is that much
  // shorter.
  // (Unused while nothing waits: the cost side is then 0.)
  const double staging_s = stakes.waiting > 0 ? StagingLeftSeconds(now) : 0;
  // A caught return decodes alone for D, and the N calls waiting now wait
  // for that too. A return that misses decodes in the model's next slot:
  // with company (the model's other calls arriving within W) it shares
  // their batch there, alone it takes a slot of its own, which the calls
  // arriving meanwhile (A W) would wait for all the same. So D costs the N
  // waiting calls in full and the A W arriving ones by the chance of that
  // company (before 2026-12-07 both only by that chance, which undercharged
  // holds made while calls wait: docs/policy-matrix.md "Ninth stop,
  // continued").
  const double company = charges_decode ? 1 - std::exp(-active.arrivals.PerSecond() * missed_wait_s) : 0;
  constexpr int kGrid = 24;
  constexpr double kMinHoldS = 0.005;
  double best_gain = 0;
  double best_h = 0;
  double expected = 0;  // returns expected by the slot's end (caught in time to finish)
  double saved_s = 0;   // hold_charges_decode: sum over the catches by h of W - (when caught)
  double prev_h = 0;
  for (int k = 0; k < kGrid; ++k) {
    const double h = horizon_s <= kMinHoldS ? horizon_s
                                            : kMinHoldS * std::pow(horizon_s / kMinHoldS, static_cast<double>(k + 1) / kGrid);
    const double mid = 0.5 * (prev_h + h);
    // Each candidate's chance of being caught by h in time to finish (and,
    // charging decode, of being back by h), once per h: the gain reads them.
    const double caught_by = std::min(h, catch_by_s);
    const double fit_mid = charges_decode ? fits(mid) : 0;
    double returns = 0;
    double readmits_s = 0;  // hold_charges_decode: the caught returns' readmissions avoided
    double none = 1;        // hold_charges_decode: P(no return by h)
    for (HoldCandidate& g : gone) {
      if (charges_decode) {
        const double by_h = g.gaps.WithinGiven(g.back_by_now, g.gone_s + h);
        g.by_caught += (by_h - g.by_h) * fit_mid;  // those back between the grid points, at their midpoint
        g.by_h = by_h;
        readmits_s += g.by_caught * g.readmit_s;
        none *= 1 - by_h;
      } else {
        g.by_caught = caught_by > 0 ? g.gaps.WithinGiven(g.back_by_now, g.gone_s + caught_by) : 0;
      }
      returns += g.by_caught;
    }
    double gain = 0;
    if (!charges_decode) {
      gain = returns * missed_wait_s - std::max(0.0, h - staging_s) * delayed;
    } else {
      // A return caught t into the hold saves W - t (the returns caught
      // between two grid points, at their midpoint). Once one is caught it
      // decodes alone for D and the N calls wait for that too (by C); the
      // others that come back meanwhile enter by SP, each weighed by the
      // chance that another session (not itself) was caught and by the
      // chance that its own decode fits.
      saved_s += (returns - expected) * std::max(0.0, missed_wait_s - mid);
      const double join_mid = h + 0.5 * decode_s;
      const double fit_join = fits(join_mid);
      double joining = 0;
      if (fit_join > 0) {
        for (const HoldCandidate& g : gone) {
          const double others_caught = g.by_h < 1 ? 1 - none / (1 - g.by_h) : 0;
          joining += others_caught * (g.gaps.WithinGiven(g.back_by_now, g.gone_s + h + decode_s) - g.by_h);
        }
      }
      const double join_saves = fit_join * std::max(0.0, missed_wait_s - join_mid);
      // Each catch spares its readmission to itself and to the calls
      // waiting behind the model's next slot; staging uses the first S of
      // the slot's extension. The slot is busy for the caught return's
      // decode and, as the saves above count them, for each joiner's too:
      // a joiner's ends up to D after the caught one's, and while it runs
      // still more returns enter by SP (counted neither here nor among the
      // saves), so each is charged a whole D (before 2026-12-08 none;
      // half a D, the lag of one joiner alone, left more of the tail's
      // loss: docs/policy-matrix.md "Sixteenth stop").
      const double joiners = joining * fit_join;  // those whose decode fits: the slot keeps them
      const double caught_decode_s = ((1 - none) + joiners) * decode_s;
      gain = saved_s + joining * join_saves + readmits_s * (1 + delayed) -
             std::max(0.0, h + caught_decode_s - staging_s) * waiting -
             std::max(0.0, h + company * caught_decode_s - staging_s) * arriving;
    }
    prev_h = h;
    expected = returns;
    if (gain > best_gain) best_gain = gain, best_h = h;
  }
  if (stakes.waiting == 0) return expected > 0.01 ? limit : kNever;  // a return is expected: hold it all
  if (best_h <= 0) return kNever;
  return std::min(now + FromSeconds(best_h), limit);
}

double Instance::StagingLeftSeconds(TimePoint now) const {
  if (!config_.ablation.d2d_staging || active_ < 0) return 0;
  const std::int32_t next = NextSlotModel(now);
  if (next < 0 || next == active_) return 0;
  const Model& m = *models_[static_cast<std::size_t>(next)];
  return stager_.SecondsToStage(m.name, m.profile->weight_bytes_per_rank, pool_);
}

SeqRef Instance::Seq(const Request& r) const {
  return SeqRef{r.call.id, r.call.prompt_ids, &r.blocks, r.call.output_tokens, config_.ablation.hkvr};
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
  for (Session* s : sessions_.device_holders()) {
    TALARIA_CHECK(s->model == m.id, "device KV of a model that is not switching out");
    s->blocks.clear();  // the KV region is released
    sessions_.MarkDirty(*s);
  }
  sessions_.ClearDeviceHolders();
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
    Active().left_at = now;
    Active().predicted_wait_s =
        config_.hold == HoldPolicy::kAdaptive && HasWork(Active()) ? HoldStakesNow().missed_wait_s : -1;
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

}  // namespace talaria
