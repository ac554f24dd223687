// Configuration of one instance: its pool, models, memory and scheduler
// knobs, and the ablation switches of §5.1 (DESIGN.md rule 4: ablations are
// configuration, never copies of code). Defaults are documented in
// docs/cluster-config.md; every one that is not from the paper says so.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/choices.h"

namespace talaria {

enum class Pool { kHot, kCold };

// How long a cold slot with nothing left to run stays open for a return.
enum class HoldPolicy {
  kFixed,     // slot_hold_s after the latest finish (the paper's tau)
  kAdaptive,  // as long as the expected saving beats the expected cost (issue 18)
};
inline constexpr Choices<HoldPolicy, 2> kHoldPolicies{
    {{{"fixed", HoldPolicy::kFixed}, {"adaptive", HoldPolicy::kAdaptive}}}};
inline const char* ToString(HoldPolicy h) { return kHoldPolicies.Name(h); }

// Where a hybrid model's recurrent state goes to host with a session's
// checkpoint. Its state cannot be rolled back, so a host restore reaches
// only a point where a state was kept; a call that rewinds its context to
// before the last such point recomputes the rest.
enum class StateCheckpoints {
  kContextEnd,  // where each context ended (a rewind inside one recomputes it all)
  // Also at 1, 2, 4, 8, ... blocks, as the call's prefill and decode pass
  // them: a rewind to p restores at least half of p, for log2(context)
  // more states per session (shared by sessions whose prefixes agree).
  kDoubling,
};
inline constexpr Choices<StateCheckpoints, 2> kStateCheckpoints{
    {{{"doubling", StateCheckpoints::kDoubling}, {"context_end", StateCheckpoints::kContextEnd}}}};
inline const char* ToString(StateCheckpoints c) { return kStateCheckpoints.Name(c); }

struct Ablation {
  bool sp = true;           // session-prefill: admit continuations mid-slot
  bool hkvr = true;         // host KV registry keeps session KV across switches
  bool d2d_staging = true;  // stage the next model's weights in free KV tails
};

struct InstanceConfig {
  std::string name = "instance-0";
  Pool pool = Pool::kCold;
  std::vector<std::string> models;  // catalogue it may serve, in round order; hot: exactly one
  // Models opened at start; empty means all of `models`. A switch into
  // another catalogue model opens it (a full open from storage) and, when
  // more than max_resident would be open, closes the least recently active
  // idle model, or failing one the model with work whose next slot comes
  // last in round order (that slot opens it again).
  std::vector<std::string> resident;
  std::int32_t max_resident = 0;  // 0: no limit
  // At max_resident with more models with work than fit, a closed model's
  // slot is passed over while opening it would close a model with work and
  // its calls have waited, summed, less than that open and the reopen it
  // forces would delay the instance's other calls (ski rental: the waits
  // are the rent, the two opens the purchase). false: every model with work
  // gets a slot each round, opening it if need be (the paper's round).
  bool defer_forced_opens = true;
  double storage_gbps = 5.0;      // assumption: local NVMe into pinned host memory, per node
  std::int32_t tp = 8;
  // What executes the steps: "sim" (SimEngine, a model of a GPU timed from
  // the profiles) or "cpu" (CpuEngine, the CPU reference models computing
  // real tokens; models must be in the CPU catalogue, tp 1).
  std::string engine = "sim";

  // Memory (per rank).
  double bump_fraction = 0.8;          // paper appendix: mem-fraction-bump = 0.8
  double non_bump_reserved_gib = 6.0;  // assumption: CUDA context, NCCL, allocator outside the arena
  double runtime_gib = 6.0;            // assumption: activations, workspaces, decode buffers
  double graph_pool_gib = 2.0;         // assumption: one model's CUDA-graph pool
  double min_kv_gib = 4.0;             // assumption: a model whose weights leave less KV pool is refused
  std::int32_t block_tokens = 64;      // assumption: KV page / HKVR block size
  double staging_chunk_mib = 256;      // assumption: staging chunk size
  double host_kv_gib_per_rank = 96;    // assumption: 2 TB host (§5.1) less host weights, over 8 ranks
  StateCheckpoints state_checkpoints = StateCheckpoints::kDoubling;

  // Scheduler (Eq.3-5).
  double ttft_target_s = 20.0;  // assumption: T_TTFT; the paper's Talaria TTFT p95 is 14.2 s
  double tpot_target_s = 0.25;  // assumption: average time per output token T_TPOT
  double gamma = 0.9;           // Eq.5 safety margin, gamma < 1
  // The round's bound, gamma * T_TTFT (Eq.3, Eq.5).
  double RoundBoundSeconds() const { return gamma * ttft_target_s; }
  // Eq.3/Eq.5 read literally: the round's predicted switches come off
  // gamma * T_TTFT before its slots share it. false: the slots share
  // gamma * T_TTFT and the switches lengthen the round (measured better on
  // every shipped testbed: docs/reproduction.md, "Round budgets").
  bool switches_in_round_budget = false;
  // A slot always has room for its protected decode plus this much prefill,
  // even when switches eat the round (the overrun is deadline risk).
  double min_prefill_budget_s = 1.0;  // assumption
  std::int32_t sp_max_batch = 8;                 // assumption: bound on one SP batch
  // With SP, a slot with nothing left to run stays open this long after one
  // of its sessions finished a call, so the return can enter by SP instead of
  // waiting a round: the instance side of the soft reservation (tau = 1 s).
  // Bounded by the slot budget; 0 disables.
  double slot_hold_s = 1.0;
  // kAdaptive: each time the slot runs dry, the hold h maximises
  //   W * sum_s P_s(returns within min(h, H - D) | not yet) - h * (N + A W)
  // over the sessions s that finished on the active model within the round
  // bound (P from each session's learned return model, core/return_model.h),
  // where W is what a return that misses the slot waits for the model's next
  // one, N the calls the hold keeps waiting (other models' and the active
  // model's queued first calls, which enter only at a slot's start) and A
  // the rate at which more such calls arrive lately (the other models'
  // calls and the active model's first calls on this instance): a hold
  // delays them too, about A W of them while a missed return waits. W is
  // the other models' Eq.3 slot terms and the switch back (0 when no other
  // model has work), scaled by how long the ways back measured against that
  // estimate (instance/wait_calibration.h; the estimate runs 1.2-3.3x
  // short: docs/policy-matrix.md "Third stop"). H is what is left of the
  // slot and D how long a caught return decodes (the model's recent mean
  // output): a return caught later would be swapped out at the slot's end
  // and wait for the next one all the same. No hold when no h gains; while
  // nothing waits (N = 0) the hold lasts to the slot's end if a return is
  // expected. slot_hold_s is then unused; the slot budget still bounds
  // every hold. While the next slot's model is still being staged
  // (d2d_staging), a switch now would reload the rest of its weights from
  // host at the rate staging copies them, so the first S seconds of a hold
  // (S: what staging has left) delay nobody: the cost is N max(0, h - S).
  HoldPolicy hold = HoldPolicy::kFixed;
  // kAdaptive, true (the default): the hold also pays for what a catch
  // costs the waiting calls and credits what else it saves, so h maximises
  //   sum_s integral_0^h F(H - t) (W - t) dP_s(t | not yet)
  //     + J F_J (W - t_J) + (1 + N + A W) sum_s P_s(caught) R_s
  //     - N max(0, h + (P(any return by h) + J F_J) D - S)
  //     - A W max(0, h + (P(any return by h) + J F_J) C D - S)
  // a caught return decodes alone for D, which the N calls waiting now wait
  // for too, and the A W calls arriving while a missed return would wait
  // only when the model's next slot would have batched it: C = 1 -
  // exp(-a W), the chance that its model's calls (arriving at a per second)
  // give a missed return company there; alone it would take a slot of its
  // own for its decode all the same; a return caught t into the hold saves
  // W - t, not W, and counts by F(H - t), the chance that its decode
  // (the model's output lengths lately, as a log-normal) fits in the H - t
  // left of the slot; the J returns expected while a caught one decodes (each
  // weighed by the chance another session was caught) enter by SP and save
  // theirs (t_J: midway through that decode; F_J: the chance their decode
  // fits), and keep the slot busy for their own decodes, D each (since
  // 2026-12-08; docs/policy-matrix.md "Sixteenth stop"); and a caught
  // return keeps its device KV, where one that misses is readmitted in the
  // model's next slot: R_s, its held context's restore from host KV (HKVR)
  // or, without HKVR, its recompute, which it and the N + A W calls behind
  // that slot would wait for. false: the rule above (the hold and S only).
  // Measured over the seeds of every family and traces/swe-fixed-30.jsonl
  // (docs/policy-matrix.md "Fifth stop").
  bool hold_charges_decode = true;
  // kAdaptive: once another model has work, a hold (idle, waiting for a
  // return) ends by the end of the active slot's place in the round's Eq.3
  // budget, shared equally by the models that have work now, the active
  // one included: the round's k-th slot by the round's start plus k
  // shares (never past the round's gamma * T_TTFT), and never before its
  // own share's end. A slot that opened alone got the whole round, and its
  // work keeps it, but waiting for a return that may not come does not;
  // what the round's earlier slots left of their shares, it may. false: by
  // the slot's end (docs/policy-matrix.md "Fourteenth stop" and "Fifteenth
  // stop").
  bool hold_within_share = true;
  std::int64_t max_prefill_batch_tokens = 65536;  // assumption: chunked-prefill batch size

  Ablation ablation;
};

}  // namespace talaria
