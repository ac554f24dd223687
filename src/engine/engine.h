// The Engine interface (DESIGN.md rule 2): an engine executes one step the
// instance scheduler chose and reports how long it took. It never decides
// what runs next.
//
// Steps are described by value; every size is per rank. An engine that
// models time (the sim engine) reads the sizes only; an engine that computes
// real tokens (the cpu engine) also reads each sequence's SeqRef: its token
// ids and its blocks in the instance's KV pool. Engines are driven from one
// thread per instance.
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include "core/time.h"
#include "memory/hbm_layout.h"
#include "memory/kv_pool.h"
#include "memory/stager.h"
#include "profile/profile.h"

namespace talaria {

// What an engine that computes real tokens needs of one call. Spans point
// into the scheduler's and the caller's state and stay valid for the step.
struct SeqRef {
  std::int64_t call_id = -1;
  std::span<const std::int32_t> prompt;  // the prompt's token ids (empty when the caller has none)
  const BlockList* blocks = nullptr;     // its KV blocks in the active model's pool, in context order
  std::int64_t output_tokens = 0;        // tokens the call generates in all
  bool checkpoint = false;               // keep its context KV in host memory when it finishes (HKVR)
};

// One request's share of a prefill (or session-prefill) batch. A call
// swapped out at a slot end comes back as new_tokens 0 with its whole
// context to restore.
struct PrefillItem {
  std::int64_t new_tokens = 0;      // computed now
  std::int64_t cached_tokens = 0;   // already in device KV (device hit or restored)
  std::int64_t restore_tokens = 0;  // of cached_tokens, restored from host (H2D) first
  SeqRef seq;
};

struct PrefillStep {
  const ModelProfile* model = nullptr;
  std::span<const PrefillItem> items;
};

struct DecodeStep {
  const ModelProfile* model = nullptr;
  std::int32_t batch = 0;
  std::int64_t mean_context_tokens = 0;  // at the first iteration
  std::int32_t iterations = 1;           // consecutive decode boundaries
  std::span<const SeqRef> seqs;          // the batch's calls (batch of them)
};

struct SwitchStep {
  const ModelProfile* from = nullptr;  // null when nothing was active
  const ModelProfile* to = nullptr;
  GatherPlan plan;                      // how the target's weights arrive
  Duration drain{};                     // wait for the outgoing model's D2H copies
  bool recapture = false;               // the pointer check saw moved regions
  double full_open_s = 0;               // the target was not resident: load it from storage first
};

// The five phases of a switch (paper appendix, Table 2), seconds.
struct SwitchTiming {
  double save_teardown_s = 0;  // includes the D2H drain
  double open_weights_s = 0;
  double kv_shell_s = 0;
  double runtime_graph_s = 0;  // includes a recapture when one was needed
  double publish_s = 0;
  double total_s() const {
    return save_teardown_s + open_weights_s + kv_shell_s + runtime_graph_s + publish_s;
  }
};

// The instance's memory substrate, read-only: where the active model's
// weights and KV pool lie in the device arena, and what the stager has
// staged. Owned by the instance; valid while it lives.
struct Substrate {
  const HbmLayout* layout = nullptr;
  const KvPool* pool = nullptr;
  const Stager* stager = nullptr;
  std::int32_t block_tokens = 0;
};

class Engine {
 public:
  virtual ~Engine() = default;
  // Called once, after the instance's warm-up activated its first model:
  // an engine with real memory allocates its device arena and loads that
  // model. The sim engine has nothing to do.
  virtual void Attach(const Substrate& substrate) { (void)substrate; }
  // True when step durations are modeled, so a real-time driver waits them
  // out; false when they were measured while the step ran.
  virtual bool emulated() const { return true; }
  // Restores then prefills the batch; the duration covers both. A prefill
  // yields each new call's first token.
  virtual Duration Prefill(const PrefillStep& step) = 0;
  virtual Duration Decode(const DecodeStep& step) = 0;
  virtual SwitchTiming Switch(const SwitchStep& step) = 0;
  // The tokens generated so far for a call (empty for engines that model
  // time only), until Forget.
  virtual std::span<const std::int32_t> Output(std::int64_t call_id) const {
    (void)call_id;
    return {};
  }
  // The call finished or was cancelled: drop what the engine keeps for it.
  virtual void Forget(std::int64_t call_id) { (void)call_id; }
};

}  // namespace talaria
