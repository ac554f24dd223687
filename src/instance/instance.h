// An inference instance's scheduler: hot (one pinned model, continuous
// batching) or cold (several models time-sharing one TP group in rounds),
// over the memory substrate (DESIGN.md §4-§5, paper §3.2, §3.4, §3.5).
//
// A cold round gives each model with work one slot:
//   P -> D1 -> (SP -> D)* -> Dfin
// P admits the prefills queued when the slot opened; decode runs in
// iterations whose ends are the only SP opportunities; at each one, SP admits
// the bounded batch of eligible continuations (target the active model,
// arrived after P, device-resident or host-restorable prefix here) whose
// predicted prefill + restore fits the budget left after protected decode.
// New sessions never enter through SP. The slot closes when its budget is
// spent and another model has work, or when it has nothing left to run.
//
// Budgets: Eq.3 round accounting; Eq.4 protected decode d_m >= R / T_TPOT
// (infeasible when T_TPOT <= t_D, reported); Eq.5 R <= gamma * T_TTFT.
// Shortfalls are counted as deadline risk, never hidden.
//
// The scheduler is a policy object: it takes `now` and returns the next step
// (Plan), and is told when that step ended (Commit). It never reads a clock,
// sleeps or does I/O; the simulator and the servers drive the same code.
// Not synchronized: one driver thread per instance.
#pragma once

#include <cstdint>
#include <deque>
#include <list>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <absl/container/flat_hash_map.h>

#include "core/return_model.h"
#include "core/stats.h"
#include "core/time.h"
#include "engine/engine.h"
#include "instance/config.h"
#include "instance/session_book.h"
#include "instance/wait_calibration.h"
#include "telemetry/telemetry.h"
#include "memory/block_hashes.h"
#include "memory/hbm_layout.h"
#include "memory/host_kv_registry.h"
#include "memory/kv_pool.h"
#include "memory/stager.h"
#include "profile/profile.h"

namespace talaria {

enum class KvSource { kDevice, kHost, kRecompute };
const char* ToString(KvSource s);

enum class AdmitPath { kPrefill, kSessionPrefill, kContinuous };
const char* ToString(AdmitPath p);

// A call as the instance receives it.
struct CallRequest {
  // (The numbers first, where walks over a batch's calls read them.)
  std::int64_t id = 0;
  std::int64_t prompt_tokens = 0;
  std::int64_t prefix_tokens = 0;
  std::int64_t output_tokens = 0;
  // A session's later call (it may reuse the session's KV); first calls of
  // new sessions are admitted only at a P phase, never by session-prefill.
  bool continuation = false;
  // The prefix is the whole previous context (needed to reuse a hybrid
  // model's recurrent state, which cannot be rolled back).
  bool full_reuse = false;
  std::string session_id;
  std::string model;
  // Cumulative hashes of this call's context (prompt + output) blocks. The
  // caller keeps them alive and unchanged until the call finishes, or hands
  // them over shared: then `chain` views the leading blocks of
  // `*chain_owner` (which may grow past them, memory/block_chain.h), and the
  // instance's session entry keeps that chain instead of a copy.
  std::span<const PrefixHash> chain;
  SharedChain chain_owner;
  // A hybrid model's recurrent state cannot be rolled back; the session's
  // host checkpoint holds it at the end of each context it was taken at.
  // The latest such point at or before this call's prefix end, in tokens (0:
  // none), and the name of the partial block it ends in (0 when it ends on a
  // block boundary; memory/block_chain.h): a host restore reaches exactly
  // there. And the name of this call's context's partial last block, which
  // its own checkpoint ends with (0: on a boundary, or not named).
  std::int64_t state_tokens = 0;
  PrefixHash state_partial = 0;
  PrefixHash context_partial = 0;
  // The prompt's token ids, for engines that compute real tokens (empty when
  // replaying sizes only). Kept alive by the caller like `chain`.
  std::span<const std::int32_t> prompt_ids;
  // Agent hints (untrusted): the seconds the session's tool will take after
  // this call before its next one (< 0: none), and that this call is the
  // session's last. Slot holds read them (config.h's HoldPolicy); they
  // cost a wrong session only its own hold.
  double expected_tool_s = -1;
  bool session_end = false;
};

struct CallRecord {
  std::int64_t id = 0;
  std::string instance;
  TimePoint arrived;
  TimePoint admitted;
  TimePoint first_token;
  TimePoint finished;
  KvSource kv_source = KvSource::kRecompute;
  AdmitPath path = AdmitPath::kPrefill;
  std::int64_t reused_tokens = 0;  // device hit or host restore
  std::int32_t preemptions = 0;    // slots it was swapped out across
};

struct SwitchRecord {
  std::string instance;
  std::string from;  // empty for the first activation
  std::string to;
  TimePoint start;
  SwitchTiming timing;
  SwitchPath path = SwitchPath::kH2d;
  std::int64_t staged_bytes = 0;  // gathered D2D
  std::int64_t weight_bytes = 0;
  std::int64_t dirty_bytes = 0;
  bool recapture = false;
  bool opened = false;  // the target was not resident: a full open from storage
};

struct RoundRecord {
  std::string instance;
  std::int64_t index = 0;
  TimePoint start;
  double active_s = 0;  // prefill, SP and decode steps
  double switch_s = 0;  // wall = active + switch
  std::int32_t slots = 0;
  std::int32_t sp_admitted = 0;
  std::int32_t sp_deferred = 0;
};

// Where the instance reports what happened. Called from Commit.
class InstanceEvents {
 public:
  virtual ~InstanceEvents() = default;
  virtual void OnFirstToken(std::int64_t call_id, TimePoint at) = 0;
  // After each decode step: the call has `generated` output tokens so far
  // (streaming servers send them; the simulator ignores this).
  virtual void OnTokens(std::int64_t call_id, std::int64_t generated, TimePoint at) {
    (void)call_id, (void)generated, (void)at;
  }
  virtual void OnFinished(const CallRecord& record) = 0;
  virtual void OnSwitch(const SwitchRecord& record) = 0;
  virtual void OnRound(const RoundRecord& record) = 0;
};

// Memory in use at one moment, per rank: the KV pool (HBM) and the host
// KV registry (HKVR).
struct MemoryOccupancy {
  std::int64_t kv_used_bytes = 0;
  std::int64_t kv_total_bytes = 0;
  std::int64_t host_kv_used_bytes = 0;
  std::int64_t host_kv_capacity_bytes = 0;
};

struct InstanceCounters {
  std::int64_t sp_admitted = 0;   // continuations admitted at an SP opportunity
  std::int64_t sp_deferred = 0;   // eligible continuations left for a later SP or slot, once per slot
  std::int64_t host_capacity_misses = 0;  // checkpoints that found no host room
  std::int64_t restore_skips = 0;         // calls recomputed whose cached prefix was unusable (hybrid state)
  std::int64_t deadline_risk = 0;         // Eq.4/Eq.5 shortfalls
  std::int64_t tpot_infeasible = 0;       // slots where T_TPOT <= t_D
  std::int64_t preemptions = 0;           // running calls swapped out at a slot end
  std::int64_t model_opens = 0;           // full opens of a model that was not resident
  std::int64_t model_closes = 0;          // resident models closed to make room
  std::int64_t cancelled = 0;             // calls dropped before finishing
  std::int64_t holds = 0;                 // slots held open for a return
  std::int64_t hold_hits = 0;             // held slots a return then entered
  std::int64_t rounds = 0;
  std::int64_t hbm_peak_bytes = 0;        // per rank, incl. the non-arena reserve
  double prefill_s = 0;                   // time in P and SP steps (restores included)
  double session_prefill_s = 0;           // of prefill_s, the SP steps
  double decode_s = 0;                    // time in decode steps

  // Sums another instance's counters into these (the peak takes the max).
  InstanceCounters& operator+=(const InstanceCounters& o);
};

class Instance {
 public:
  struct Step {
    enum class Kind { kIdle, kPrefill, kSessionPrefill, kDecode, kSwitch };
    Kind kind = Kind::kIdle;
    // kIdle only: Plan again at this time even if nothing arrives (a slot
    // held open for returning sessions); TimePoint::max() when not needed.
    TimePoint wake_at = TimePoint::max();
    PrefillStep prefill;
    DecodeStep decode;
    SwitchStep switch_step;
  };

  // `profiles` must hold every model of `config` at config.tp and outlive
  // the instance. Throws InputError for an inconsistent configuration.
  Instance(InstanceConfig config, const ProfileSet& profiles);
  ~Instance();
  Instance(const Instance&) = delete;
  Instance& operator=(const Instance&) = delete;

  const std::string& name() const { return config_.name; }
  const InstanceConfig& config() const { return config_; }
  bool Hosts(const std::string& model) const;

  // Loads `model` before serving starts, as a warm-up outside any
  // measurement: no switch record, and staging of the next model begins.
  // REQUIRES: Hosts(model), nothing active yet.
  void Warmup(const std::string& model, TimePoint now);

  // A call arrives. REQUIRES: Hosts(call.model).
  void Enqueue(CallRequest call, TimePoint now);

  // Drops a call that has not finished (its client went away): out of its
  // queue or its decode batch, its KV blocks freed, no further events.
  // False if the call is unknown (already finished). REQUIRES: !busy().
  bool Cancel(std::int64_t call_id);

  // The next step to run from `now`, or kIdle when there is nothing to do
  // until the next arrival. `horizon` is the next time anything outside the
  // instance is known to happen (an arrival); decode runs in batches of
  // iterations that stop at the first boundary after it, so an arrival is
  // seen at the next decode boundary as if stepping one iteration at a time.
  // REQUIRES: no step in flight.
  const Step& Plan(TimePoint now, TimePoint horizon);
  // Ends the decode step in flight at the first iteration boundary at or
  // after `at` instead of as planned, so a call that arrived meanwhile is
  // seen there (what `horizon` does for arrivals known when planning). True
  // if the step now runs fewer iterations: the caller times it again. False,
  // changing nothing, when no multi-iteration decode is in flight or this
  // instance does not admit at decode boundaries (cold without SP).
  bool ShortenDecode(TimePoint at);
  // Splits the decode step in flight at a boundary already reached: its
  // first `first` iterations are committed as ending at `first_end`, and the
  // rest, unchanged, is the step in flight from there. No call finishes in
  // the first part (a step never runs past a call's last token), so this
  // only brings the instance's state up to that boundary, e.g. for a
  // snapshot. REQUIRES: a decode step in flight with more than `first`.
  void SplitDecode(TimePoint first_end, std::int32_t first, InstanceEvents& events);
  // The step in flight (REQUIRES: busy()).
  const Step& step_in_flight() const { return step_; }
  TimePoint step_started() const { return step_start_; }
  // The planned step ended at `end` (for a switch, with these phases).
  void Commit(TimePoint end, const SwitchTiming& switch_timing, InstanceEvents& events);
  bool busy() const { return in_flight_; }
  // For a driver that times steps from their sizes alone (the simulator's
  // replay): decode steps then list no per-call sequences (DecodeStep::seqs
  // stays empty) and OnTokens is not called, so a decode step's plan and
  // commit cost no walk over its calls. Off by default.
  void SetSizesOnly(bool sizes_only) { sizes_only_ = sizes_only; }

  // Adaptive holds' W, measured against its estimate (wait_calibration.h).
  const WaitCalibration& wait_calibration() const { return wait_calibration_; }
  const InstanceCounters& counters() const { return counters_; }
  // The telemetry snapshot the router reads (versioned; one per call).
  // With `delta`, its sessions are only those whose entry changed since the
  // previous snapshot (see InstanceTelemetry::sessions_delta): the cost is
  // proportional to what changed, not to the sessions held.
  void Snapshot(TimePoint now, InstanceTelemetry& out, bool delta = false);
  // Whether `model` is open here (resident), and whether it is active.
  bool Resident(const std::string& model) const;

  // Operator residency control (an instance server's /admin/models/{m}/open
  // and /close). Open makes `model` resident, closing least recently active
  // idle models beyond max_resident, and counts a model open; with the sim
  // engine the storage read is not timed (an emulation shortcut). Close
  // makes it non-resident, so its next switch is a full open; refused while
  // it is active (or being switched to) or has queued or running calls.
  enum class AdminResult { kDone, kAlready, kUnknownModel, kBusy };
  AdminResult AdminOpen(const std::string& model);
  AdminResult AdminClose(const std::string& model);
  // A one-line account of the scheduler's state, for diagnostics.
  std::string Describe() const;
  // For tests: sessions whose cached host-restorable prefix (what snapshots
  // report once a checkpoint's copies landed) differs from a fresh probe of
  // the registry. Zero unless the drop bookkeeping is wrong.
  std::int32_t StaleHostPrefixes(TimePoint now) const;
  // For tests: how many blocks of its context chain the entry of `session`
  // keeps (-1: there is no entry). An entry holding nothing of its context
  // here, on device or host, keeps none once a snapshot looked at it.
  std::int64_t HeldChainBlocks(const std::string& session) const;
  std::int64_t hbm_cap_bytes() const;
  // The model whose slot holds the GPUs ("" before the first warm-up); a
  // view of its profile's name.
  std::string_view active_model() const;
  // The KV pool's and the host registry's occupancy now (O(1)).
  MemoryOccupancy Occupancy() const;
  // The memory substrate an engine with real memory works on.
  Substrate substrate() const { return Substrate{&layout_, &pool_, &stager_, config_.block_tokens}; }
  // Ends the round in progress (if any) so its record is reported.
  void Flush(InstanceEvents& events);

 private:
  struct Model;
  struct Request;
  using Session = InstanceSession;

  Model& Active() { return *models_[static_cast<std::size_t>(active_)]; }
  // A request's session, looked up once and remembered on the request: null
  // while the session has no entry (FindSession), or added (AddSession).
  Session* FindSession(const Request& r);
  Session& AddSession(const Request& r);
  // Brings a session's snapshot entry up to date; adds it to `out` when it
  // changed (delta) or is held (full).
  void Report(Session& s, TimePoint now, bool delta, InstanceTelemetry& out);
  // Takes the registry's drop log: the sessions whose host prefix shrank.
  void TakeHostDrops();
  std::int32_t ModelIndex(const std::string& name) const;
  bool HasWork(const Model& m) const;
  // The rotation's order: the index of the k-th model after `after` (from
  // the first model when after < 0), wrapping around.
  std::int32_t ModelAfter(std::int32_t after, std::int32_t k) const {
    const auto n = static_cast<std::int32_t>(models_.size());
    return ((after < 0 ? -1 : after) + k + n) % n;
  }
  std::int32_t NextModelWithWork(std::int32_t after) const;
  // The model whose slot comes next after the active one's: the next with
  // work, passing over a closed one whose open is deferred (DeferredForSeconds).
  std::int32_t NextSlotModel(TimePoint now) const;
  // How long a closed model's open stays deferred (defer_forced_opens): the
  // rent still owed over the rate its calls pay it, `extra` calls more
  // waiting than now (one: a call the router may add). 0: not deferred.
  double DeferredForSeconds(const Model& m, TimePoint now, std::int32_t extra) const;
  // ModelTelemetry::admit_wait_s of model `target`, from the snapshot's
  // per-model queued work `t` and its count of models with work.
  double AdmitWait(std::int32_t target, TimePoint now, const std::vector<ModelTelemetry>& t,
                   std::int32_t with_work) const;

  void OpenSlot(TimePoint now);
  bool PlanPrefill(TimePoint now, bool session_prefill);
  bool PlanDecode(TimePoint now, TimePoint horizon);
  bool PlanSwitch(TimePoint now, std::int32_t target);
  bool Admit(Request& r, TimePoint now, PrefillItem& item);
  bool AllocateBlocks(std::int32_t n, BlockList& out, const Session* keep);
  void ReleaseModelKv(Model& m, TimePoint now, Duration& drain);
  void Finish(Request& r, TimePoint now, InstanceEvents& events);
  SeqRef Seq(const Request& r) const;
  // A running call's output so far and context (prompt + output).
  std::int64_t Generated(const Request& r) const;
  std::int64_t Context(const Request& r) const;
  // A call starts or stops decoding (entering or leaving its model's
  // `decoding` array; stopping fixes `generated`).
  void StartDecoding(Model& m, Request& r);
  void StopDecoding(Model& m, Request& r);
  // How much of a call's prompt this instance can reuse, in blocks: device
  // KV of its session (the active model's), else host KV (HKVR). `declined`:
  // a cached prefix a hybrid model's state rules declined. No side effects
  // beyond the probe cache; Admit, SP eligibility and cost prediction share it.
  struct Reuse {
    std::int32_t device = 0;
    std::int32_t host = 0;
    bool declined = false;
  };
  Reuse FindReuse(const Request& r);
  bool SpEligible(const Request& r);
  // The blocks a host restore of `r` reaches (0: none, or a hybrid model's
  // state rules decline it; then `r.host_probe_declined` says whether any
  // were held). Cached against the registry's version.
  std::int32_t HostBlocks(const Request& r);
  // The chain a host restore of `r` looks up: its prompt's blocks; for a
  // hybrid model, the chain to the state point `r.host_state_tokens` (with
  // the partial block that ends there, if any).
  BlockChain HostChain(const Request& r) const;
  BlockChain HostChain(const Request& r, std::int64_t state_tokens) const;
  // A hybrid call's latest restorable state point (tokens; 0: none): its
  // context-end checkpoint (CallRequest::state_tokens) or an interior one
  // (config.h's StateCheckpoints), whichever is later and held whole.
  // `held`: the registry's published blocks of the call's prompt.
  std::int64_t FindStatePoint(const Request& r, ModelId id, std::int32_t held) const;
  // The interior state points of a hybrid call's checkpoint into
  // state_points_ (block counts: the ones it computed on the way).
  void InteriorStatePoints(const Request& r, std::size_t chain_blocks);
  bool Hybrid(const Request& r) const;  // its model has recurrent state
  TimePoint HoldUntil(TimePoint now) const;
  // When the hold the slot is in now ends, if nothing that arrives can end
  // it sooner: a fixed hold's planned end; kNever while not holding, or
  // holding adaptively (it plans again at each arrival).
  TimePoint CommittedHoldEnd() const;
  // HoldPolicy::kAdaptive's hold: kNever when no hold gains (config.h).
  TimePoint AdaptiveHoldUntil(TimePoint now) const;
  // The latest an adaptive hold may last: the slot's end, or with
  // hold_within_share and another model with work, the end of the slot's
  // place in the round's Eq.3 budget, shared by the models that have work
  // now (config.h).
  TimePoint AdaptiveHoldLimit() const;
  // When the open slot's budget runs out (cold pool: a hot slot's budget
  // is unbounded).
  TimePoint SlotEnd() const { return slot_start_ + FromSeconds(slot_budget_s_); }
  // Eq.3's equal share of the round among the models with work now, the
  // active one counted as one of them (it holds or opens the slot): their
  // count, a switch into each (none when it is alone), and the slot's share
  // of gamma * T_TTFT (less those switches with switches_in_round_budget).
  struct RoundShare {
    std::int32_t models = 0;
    double switches_s = 0;
    double slot_s = 0;
  };
  RoundShare RoundShareNow() const;
  // How long staging still copies the next slot's model's weights, as far
  // as the KV region's free top lets it (0 when staging is off, done, or
  // stages another model).
  double StagingLeftSeconds(TimePoint now) const;
  // What an adaptive hold on the active model weighs now: N, the calls it
  // keeps waiting, W as the queues predict it, and A (config.h).
  struct HoldStakes {
    std::int64_t waiting = 0;
    double missed_wait_s = 0;
    // The calls expected to arrive while a missed return waits W that then
    // wait for a slot the hold delays (A W), by the queues' W, before the
    // wait calibration: first calls (they enter only at a slot's start;
    // the active model's and the other models') and the calls of models
    // with no work over all of W, and the other models' returns until their
    // model's slot starts (one arriving during it enters by SP).
    double delayed_arrivals = 0;
    // Of those, the first calls (new sessions): they keep arriving over the
    // rest of the busy period, not over W only (AdaptiveHoldUntil).
    double first_arrivals = 0;
  };
  HoldStakes HoldStakesNow() const;
  // W as adaptive holds measured it against HoldStakesNow's prediction.
  WaitCalibration wait_calibration_;
  // A session an adaptive hold may wait for: its gap distribution, how long
  // it has been gone and how likely it was to be back by now.
  struct HoldCandidate {
    GapDistribution gaps;
    double gone_s;
    double back_by_now;
    // Per hold length h tried: P(caught in time to finish its decode in
    // the slot | not back yet), and (hold_charges_decode) P(back by h | not
    // back yet), both summed up the grid of h.
    double by_caught = 0;
    double by_h = 0;
    // hold_charges_decode: its readmission in the model's next slot if it
    // misses (restore from host KV, or recompute without HKVR).
    double readmit_s = 0;
  };
  bool DeviceReusable(const Request& r) const;
  // A hybrid call names a context-end state point a restore could reach.
  bool StateRestorable(const Request& r) const;
  void BeginSlotRound(std::int32_t model, TimePoint now);
  // Stages the weights of StagingTarget's model while the active one serves;
  // when that is the model staged already, what is copied of it is kept.
  void StageNextSwitch(TimePoint now);
  // The model the next switch most likely goes to, of those a switch can
  // gather staged weights for (resident ones): the next resident one with
  // work in round order, else the next resident one; -1 when no other is
  // resident. O(models): it runs at every step.
  std::int32_t StagingTarget() const;
  // Makes `m` resident and returns its full-open time (0 if it was). At a
  // switch (`switching`) the outgoing model may be closed even with work.
  double OpenModel(Model& m, bool switching);
  // The open model that opening `m` closes first when that takes it over
  // max_resident (null when it does not, or when nothing may close).
  Model* CloseVictim(const Model& m, bool switching) const;
  // Eq.2's reopen that opening `m` at a switch forces now: the full open of
  // the model it closes when that one has work (its next slot opens it
  // again); 0 when `m` is open or its open closes nothing busy.
  double ForcedReopenSeconds(const Model& m) const;
  void TrackHbm();

  InstanceConfig config_;
  std::vector<std::unique_ptr<Model>> models_;
  HbmLayout layout_;
  KvPool pool_;
  Stager stager_;
  HostKvRegistry hkvr_;
  // Open-addressing tables (absl): at cluster scale every instance's tables
  // are cold when touched, and a lookup here costs one probe of contiguous
  // slots instead of a bucket and a node.
  absl::flat_hash_map<std::int64_t, std::unique_ptr<Request>> requests_;
  SessionBook sessions_;

  std::int32_t active_ = -1;  // index into models_, -1 before the first switch
  bool in_flight_ = false;
  bool sizes_only_ = false;
  Step step_;
  std::vector<Request*> batch_;          // requests of the planned prefill step
  std::vector<PrefillItem> items_;       // and their items
  // The planned prefill step's totals, formed once when it is planned: its
  // predicted seconds at the profile (Commit's scale update), and the calls
  // it brings to decode with their output still to come (restored calls
  // are counted running already), which every snapshot taken while it runs
  // reports without walking the batch.
  struct PrefillTotals {
    double predicted_s = 0;
    std::int32_t new_calls = 0;
    std::int64_t output_tokens = 0;  // the prefill yields each call's first
  };
  PrefillTotals prefill_totals_;
  std::vector<SeqRef> decode_seqs_;      // the planned decode step's calls
  BlockList scratch_blocks_;
  std::vector<std::int32_t> state_points_;  // InteriorStatePoints' output, reused
  TimePoint step_start_;

  // Slot and round state.
  bool slot_open_ = false;
  TimePoint slot_start_;
  double slot_budget_s_ = 0;
  mutable std::vector<HoldCandidate> hold_scratch_;  // AdaptiveHoldUntil's, kept to avoid allocating
  std::int32_t protected_iterations_ = 0;  // Eq.4 d_m for this slot
  std::int32_t decode_iterations_ = 0;     // done in this slot
  bool p_done_ = false;
  std::int64_t slot_serial_ = 0;
  bool holding_ = false;
  BusyFraction busy_;  // its steps' share of time lately (adaptive holds)
  bool round_open_ = false;
  bool slot_round_counted_ = false;
  std::int32_t round_last_model_ = -1;
  RoundRecord round_;
  std::vector<RoundRecord> closed_rounds_;  // reported at the next Commit
  std::uint64_t snapshot_version_ = 0;
  InstanceCounters counters_;
};

}  // namespace talaria
