// The session client: what turns a session's next call into the request an
// instance's scheduler receives, and when a replayed session releases it.
// One place for both drivers:
//   - the closed-loop release rule of a replay (paper §5.1): a session's
//     next call is released when its previous call has ended (finished or
//     rejected) and the recorded tool gap, capped, has elapsed; the
//     simulator and the replay against a live server both follow it;
//   - a CallRequest from a trace call (sizes and a token seed: the
//     simulator names the context's blocks without materialising tokens),
//     or from a prompt's token ids matched against the session's previous
//     context (the servers);
//   - full reuse (the prefix is the session's whole previous context, which
//     a hybrid model's recurrent state needs), derived here only.
// Policy-free and clock-free: times come in as arguments.
#pragma once

#include <cstdint>
#include <functional>
#include <list>
#include <memory>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/time.h"
#include "instance/instance.h"
#include "memory/block_hashes.h"
#include "trace/trace.h"

namespace talaria {

// A continuation fully reuses its session's context when its prefix is the
// whole previous context (prompt + output).
inline bool FullReuse(bool continuation, std::int64_t prefix_tokens, std::int64_t previous_context_tokens) {
  return continuation && prefix_tokens == previous_context_tokens;
}

// The closed-loop release rule of a replay.
struct ReleaseRule {
  double gap_cap_s = 10.0;  // paper §5.1: recorded gaps capped at 10 s
  // Seconds from the end of the call before `next` (finished or rejected)
  // to `next`'s release: its recorded gap (uncapped where the trace kept it),
  // capped.
  double GapSeconds(const TraceCall& next) const;
};

// One replayed session's context as the scheduler sees it: the chain of
// block hashes of the call in flight's context, named from the trace's
// token seed (memory/block_hashes.h), and the previous context's length.
class TraceSessionContext {
 public:
  // Extends the context for trace call `c`, the session's next call (calls
  // in order, one at a time): keeps the blocks inside its prefix, names the
  // rest of its prompt + output. `reserve_tokens`: the chain's room when it
  // must grow (the session's later contexts, so they append in place).
  void Advance(const TraceCall& c, std::int32_t block_tokens, std::int64_t reserve_tokens = 0);
  // The request for `c`, the call Advance was last given. It shares this
  // context's chain (CallRequest::chain_owner, memory/block_chain.h): while
  // the call or an instance holds it, the next Advance appends in place
  // within the chain's capacity, and extends a copy when its prefix cuts
  // into the chain or it outgrows the capacity.
  CallRequest Request(const TraceCall& c, std::int64_t id) const;
  // The session is over: lets go of its chain.
  void End() {
    chain_.reset();
    std::vector<StatePoint>().swap(checkpoints_);
  }
  std::span<const PrefixHash> chain() const { return ChainView(chain_); }

 private:
  std::shared_ptr<std::vector<PrefixHash>> chain_;
  std::int64_t previous_context_ = 0;
  bool advanced_ = false;    // a call came before: the next is a continuation
  bool full_reuse_ = false;  // of the call Advance was last given
  // Where the session's contexts ended (a hybrid model's state is
  // checkpointed there), with the name of the partial block each ends in
  // (0: on a boundary), oldest first, those the current context still
  // contains; the last is the current context's. And the latest at or
  // before the prefix of the call Advance was last given.
  struct StatePoint {
    std::int64_t tokens = 0;
    PrefixHash partial = 0;
  };
  std::vector<StatePoint> checkpoints_;
  StatePoint state_;
};

// Each session's last context, for prefix matching; bounded, least recently
// used first out. A session ends when it has had no call for `idle_s` (or
// is pushed out by the bound): `on_end` then hears its session completion
// time, first call's arrival to last call's end. Ends are noticed when a
// later call updates the table. Not thread-safe: the owner locks.
class SessionContexts {
 public:
  using OnEnd = std::function<void(Duration sct)>;
  explicit SessionContexts(std::size_t max_sessions = 100'000, double idle_s = 60, OnEnd on_end = nullptr)
      : max_sessions_(max_sessions), idle_(FromSeconds(idle_s)), on_end_(std::move(on_end)) {}

  struct Match {
    std::int64_t prefix_tokens = 0;  // leading prompt tokens equal to the previous context
    bool full_reuse = false;         // the whole previous context is a prefix of the prompt
    bool continuation = false;       // the session has a previous call
  };
  Match Find(const std::string& session, std::span<const std::int32_t> prompt) const;
  // The session's context after a call that arrived at `arrived` and ended
  // at `now`: its prompt, then its output.
  void Update(const std::string& session, std::vector<std::int32_t> context, TimePoint arrived, TimePoint now);
  std::size_t size() const { return table_.size(); }

 private:
  struct Entry {
    std::vector<std::int32_t> context;
    std::list<std::string>::iterator lru;
    TimePoint first_arrival;
    TimePoint last_done;
  };
  void EndFront();

  std::size_t max_sessions_;
  Duration idle_;
  OnEnd on_end_;
  std::unordered_map<std::string, Entry> table_;
  std::list<std::string> lru_;  // front = least recently used
};

// The request for a prompt of token ids: `chain` holds the prompt's block
// hashes (memory/block_hashes.h HashTokenBlocks), `match` what the
// session's previous context shares with it. `chain` and `prompt` are
// referenced, not copied: keep them alive until the call has finished.
// It names no partial blocks (the chain covers the prompt, not the output
// the checkpoint would end at), so a hybrid model behind the servers
// restores host KV only where a prefix ends on a block boundary.
CallRequest PromptRequest(std::int64_t id, std::string session, std::string model,
                          std::span<const std::int32_t> prompt, std::span<const PrefixHash> chain,
                          std::int64_t max_tokens, const SessionContexts::Match& match);

}  // namespace talaria
