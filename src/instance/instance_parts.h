// The cold/hot instance scheduler's private state (instance.h's Model,
// Request and Session) and small helpers, shared by the .cc files that
// implement its concepts, one each:
//   instance.cc            lifecycle, arrivals, Plan/Commit, cancel, finish
//   prefill_planner.cc     reuse (device, host) and KV for P and SP batches
//   round_planner.cc       slots and rounds: open, hold, decode, switch (Eq.3-5)
//   residency.cc           which models are open, warm-up, staging, HBM peak
//   session_book.cc        the SessionBook (session_book.h) and requests' sessions
//   telemetry_snapshot.cc  the snapshot the router reads (§4.1)
// Internal to the instance layer: nothing outside src/instance includes it.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <deque>
#include <limits>
#include <list>
#include <span>
#include <string>
#include <vector>

#include "core/return_model.h"
#include "core/stats.h"
#include "instance/instance.h"

namespace talaria {

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
  TimePoint left_at;  // its latest switch out: its swapped-out calls wait since
  // Adaptive holds: W as predicted at that switch when it left with work
  // (< 0: none), measured against its next slot's opening (WaitCalibration).
  double predicted_wait_s = -1;
  // Adaptive holds: how fast its calls, and its sessions' first calls on
  // this instance, arrive lately.
  ArrivalRate arrivals;
  ArrivalRate first_calls;
  // When this model's sessions come back after a call (adaptive holds).
  ReturnModel returns;
  // Its finished calls' mean output and context tokens lately (adaptive
  // holds: how long a caught return decodes), over kFinishWindow finishes.
  WindowedMean output_tokens;
  WindowedMean context_tokens;
  // The same finishes' output lengths as a log-normal: how likely a caught
  // return's decode is to end before the slot does (DecodeFits).
  WindowedLogNormal output_dist;
  static constexpr std::int64_t kFinishWindow = 64;
  void ObserveFinish(std::int64_t prompt, std::int64_t output) {
    output_tokens.Add(static_cast<double>(output), kFinishWindow);
    context_tokens.Add(static_cast<double>(prompt + output), kFinishWindow);
    output_dist.Add(static_cast<double>(std::max<std::int64_t>(output, 1)), kFinishWindow);
  }
  // P(a call decoding alone, `token_s` a token, is done within `t_s`).
  double DecodeFits(double t_s, double token_s) const {
    return t_s <= 0 ? 0 : token_s <= 0 ? 1 : output_dist.Cdf(t_s / token_s);
  }
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
  BlockList blocks;
  KvSource source = KvSource::kRecompute;
  AdmitPath path = AdmitPath::kPrefill;
  std::int64_t reused = 0;
  std::int32_t pinned_host_blocks = 0;
  std::int32_t preemptions = 0;
  std::int64_t deferred_in_slot = -1;  // the slot it was last counted as deferred in
  mutable std::uint64_t host_probe_version = UINT64_MAX;  // HKVR version of host_probe_blocks
  mutable std::int32_t host_probe_blocks = 0;
  mutable bool host_probe_declined = false;  // held, but a hybrid model's state rules decline it
  // A hybrid call's host restore point, tokens (0: none): the latest
  // checkpointed state the probe found. Set while queued, fixed once
  // admitted (the restore pins and unpins the chain to it).
  mutable std::int64_t host_state_tokens = 0;
  // Its session, looked up once (FindSession); null until the session exists.
  mutable Session* session = nullptr;
  mutable bool session_looked_up = false;

  std::span<const PrefixHash> prompt_chain(std::int32_t block_tokens) const {
    const auto n = std::min<std::size_t>(call.chain.size(),
                                         static_cast<std::size_t>(call.prompt_tokens / block_tokens));
    return call.chain.first(n);
  }
};

namespace instance_internal {

// Decode iterations of `step_s` each until the first boundary at or after
// `seconds` from the step's start (at least one).
inline std::int64_t IterationsCovering(double seconds, double step_s) {
  return std::max<std::int64_t>(1, std::llround(std::ceil(std::max(0.0, seconds) / step_s)));
}

inline constexpr TimePoint kNever = TimePoint::max();
// Sessions idle this long with no device KV leave the instance's session
// table (their host KV stays in the registry).
inline constexpr double kForgetIdleSessionS = 600.0;

}  // namespace instance_internal
}  // namespace talaria
