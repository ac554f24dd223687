// The host KV registry, HKVR (DESIGN.md §5, paper §4.3 and appendix B).
//
// One host slab pool per instance, shared by every model and attention
// family: a block is a fixed number of tokens of one model's KV (K/V pairs,
// MLA latent, and for hybrid models the recurrent state travels with the
// chain's last block). A block is named by (model, cumulative prefix hash).
//
// Blocks are held in segments, as a radix tree holds token spans in nodes:
// one checkpoint registers the blocks it adds to a chain as one segment,
// keyed by (model, hash of its first block), or appends them to the owner's
// segment the chain ends in when no other chain runs through it. A prefix is found by walking
// segments: look up the segment that starts at the current block, match as
// many of its blocks as the chain agrees with, continue after them. A chain
// that branches off inside a segment continues in a segment keyed by the
// first block after the branch. So a checkpoint, lookup or probe costs one
// hash lookup per segment of the chain, not one per block.
//
// Invariants (each has a test):
//  1. DMA pins: a block under a restore copy (pinned) is never evicted, and
//     a block whose D2H copy has not completed is never visible to lookups
//     nor evicted.
//  2. Publish only the longest block-aligned prefix on which every TP rank
//     agrees (length and hash); the tail stays private and is recomputed.
//  3. Before a model's KV region is released, its outstanding D2H copies
//     drain; the barrier is scoped to that model.
//
// Capacity is bounded; eviction is least-recently-used over segments and
// trims a segment from its tail, one block at a time. A chain is touched
// tail first so its head is the most recent: eviction trims chains from the
// tail, keeping the restorable prefix as long as possible. Accounting is
// per rank (ranks are symmetric). Time comes in as arguments. Not
// synchronized.
#pragma once

#include <array>
#include <cstdint>
#include <deque>
#include <span>
#include <vector>

#include <absl/container/node_hash_map.h>

#include "core/time.h"
#include "memory/block_chain.h"

namespace talaria {

using ModelId = std::int32_t;
// Who checkpoints a chain (an instance's session); 0: nobody in particular.
using ChainOwner = std::uint64_t;

// What one TP rank reports for a checkpoint: how many blocks it committed
// and the cumulative hash of each.
struct RankReport {
  std::span<const PrefixHash> hashes;
};

// The longest prefix of blocks on which every rank agrees (length and hash).
std::int32_t AgreedBlocks(std::span<const RankReport> ranks);

class HostKvRegistry {
 public:
  // Stands in drops() for a drop that may concern any owner (a
  // block several owners' chains hold, or one checkpointed without owner).
  static constexpr ChainOwner kAnyOwner = ~ChainOwner{0};

  explicit HostKvRegistry(std::int64_t capacity_bytes) : capacity_(capacity_bytes) {}
  HostKvRegistry(const HostKvRegistry&) = delete;
  HostKvRegistry& operator=(const HostKvRegistry&) = delete;

  struct CheckpointResult {
    std::int32_t copied_blocks = 0;   // new D2H copies started
    std::int32_t present_blocks = 0;  // already registered, only touched
    std::int32_t missed_blocks = 0;   // no room even after eviction (capacity miss)
    std::int64_t bytes = 0;           // bytes the new copies move
    TimePoint done;                   // when the last new copy completes
  };

  // Checkpoints the first `blocks` of `chain` for `model` (the agreed
  // prefix, see AgreedBlocks), on behalf of `owner`. Copies run one after
  // another on the D2H engine at `d2h_bytes_per_s`, starting no earlier than
  // `now` or the end of the engine's previous copy. `tail_bytes` is added to
  // the last block (a hybrid model's recurrent state).
  //
  // `state_points` (ascending block counts) name further points inside the
  // new blocks where a state of the same size was captured on the way (a hybrid
  // model's interior checkpoints): each gets `tail_bytes` on its block, so
  // a call that rewinds into the chain restores at the latest point before
  // its rewind. Each ends a segment, so eviction takes it with its block
  // (the chain's head, most recent, keeps its states longest); none is
  // registered when not everything fits.
  CheckpointResult Checkpoint(ModelId model, BlockChain chain, std::int32_t blocks,
                              std::int64_t block_bytes, std::int64_t tail_bytes, TimePoint now,
                              double d2h_bytes_per_s, ChainOwner owner = 0,
                              std::span<const std::int32_t> state_points = {});

  // Marks copies that finished by `now` complete (published).
  void CompleteCopies(TimePoint now);

  // Switch barrier: the time at which every outstanding copy of `model`
  // completes (>= now); those copies are then complete. Other models'
  // copies are untouched.
  TimePoint DrainModel(ModelId model, TimePoint now);

  // Longest published prefix of `chain` for `model`, in blocks. Touches the
  // matched segments (LRU).
  std::int32_t Lookup(ModelId model, BlockChain chain, TimePoint now);

  // Like Lookup, without completing copies or touching the LRU order: what
  // a telemetry snapshot reports.
  std::int32_t Probe(ModelId model, BlockChain chain) const;

  // Whether `chain` is registered and published whole and its last block
  // still carries a checkpoint's tail bytes (a hybrid model's recurrent
  // state at exactly that point).
  bool HoldsTail(ModelId model, BlockChain chain) const;

  // The session `owner` said it ended (an agent hint): the segments of
  // `chain` that only it holds go to the front of the eviction order, so
  // they are the first to make room; nothing is freed now (the hint may be
  // wrong, and the blocks stay restorable until room is needed).
  void Demote(ModelId model, BlockChain chain, ChainOwner owner);

  // Restore DMA: pins the first `blocks` of `chain` so eviction cannot free
  // them; Unpin when the copy completes.
  void Pin(ModelId model, BlockChain chain, std::int32_t blocks);
  void Unpin(ModelId model, BlockChain chain, std::int32_t blocks);

  // Changes whenever the set of published blocks may have changed (a copy
  // completed, a block was evicted): callers may cache Probe results
  // against it.
  std::uint64_t version() const { return version_; }

  // A drop (eviction) since the last ClearDrops: a segment of `model` that
  // starts at block `start` of its owner's chains keeps its first `kept`
  // blocks; `dropped` is the hash of the first block that went (chain
  // position start + kept). So a chain of `owner` that ran through that
  // block (chain[start + kept] == dropped) now holds at most start + kept
  // blocks; other chains of that owner (one that branched off the segment
  // before it) are untouched. owner kAnyOwner: the
  // drop may concern any owner (a segment several owners' chains run
  // through, or one checkpointed without owner). In drop order, repeated
  // trims of one segment folded. Bounded: past a few thousand entries the
  // log collapses to one kAnyOwner.
  struct Drop {
    ChainOwner owner = 0;
    ModelId model = 0;
    PrefixHash first = 0;    // the segment's key
    std::int32_t start = 0;
    std::int32_t kept = 0;
    PrefixHash dropped = 0;
  };
  const std::vector<Drop>& drops() const { return drops_; }
  void ClearDrops() { drops_.clear(); }

  std::int64_t used_bytes() const { return used_; }
  std::int64_t capacity_bytes() const { return capacity_; }
  std::int64_t evicted_blocks() const { return evicted_; }
  // Blocks whose D2H copy has not completed.
  std::size_t outstanding_copies() const;
  // For tests (a scan of every segment): whether a block is published, and
  // whether its bytes are held at all.
  bool IsPublished(ModelId model, PrefixHash hash) const;
  bool HoldsBytes(ModelId model, PrefixHash hash) const;

 private:
  struct Key {
    ModelId model;
    PrefixHash hash;
    friend bool operator==(const Key&, const Key&) = default;
  };
  struct KeyHash {
    std::size_t operator()(const Key& k) const noexcept;
  };
  struct Segment {
    ModelId model = 0;
    PrefixHash first = 0;             // its key's hash (the first block's, even once trimmed away)
    std::int32_t start = 0;           // the first block's position in the chain
    std::vector<PrefixHash> hashes;   // its blocks, in chain order (trimmed from the back)
    PrefixHash last = 0;              // hashes.back() (0: none), kept in the node for walks
    std::int32_t published = 0;       // leading blocks whose copy completed
    // The D2H copies of its blocks from flight_first on, one checkpoint's
    // (a segment is extended only once its copies landed): they run back to
    // back, one every flight_step from flight_start, the last ending at
    // flight_end (it may carry the recurrent state). Arithmetic, so a
    // checkpoint stores no per-block times.
    std::int32_t flight_first = 0;
    TimePoint flight_start;
    Duration flight_step{};
    TimePoint flight_end;
    std::int64_t block_bytes = 0;
    std::int64_t tail_bytes = 0;      // extra bytes on its last block, while it holds it
    std::vector<std::int32_t> pins;   // pinned prefix lengths, one per restore in flight
    // Where other chains were last seen to leave it (block counts from its
    // start, newest first, 0: none): sessions that share a prompt prefix
    // branch off the first one's segment at the same block, and a walk
    // tries these before bisecting its hashes (KnownBranch).
    std::array<std::int32_t, 4> branches{};
    ChainOwner owner = 0;
    bool shared = false;              // another owner's chain runs through it
    Segment* lru_prev = nullptr;      // its neighbours in the LRU order (intrusive:
    Segment* lru_next = nullptr;      // the map's nodes do not move)
    std::int32_t size() const { return static_cast<std::int32_t>(hashes.size()); }
    std::int32_t pinned() const;
    // When block i's copy lands. REQUIRES: flight_first <= i < size().
    TimePoint DoneAt(std::int32_t i) const {
      return i == size() - 1 ? flight_end : flight_start + (i - flight_first + 1) * flight_step;
    }
  };
  // One step of a chain walk: a segment and how many of its leading blocks
  // the chain matches from `start`.
  struct Match {
    Segment* segment;
    std::int32_t start;
    std::int32_t blocks;
  };

  // Walks `chain` (its first `limit` blocks) through the segments of `model`
  // into `out`; returns the blocks matched. Changes nothing itself; the
  // matches point at the segments for callers that then touch or pin.
  std::int32_t Walk(ModelId model, BlockChain chain, std::int32_t limit,
                    std::vector<Match>& out);
  // The walk itself, for a const or a mutable registry: calls
  // on_match(segment, start, blocks) for each segment the chain runs
  // through, in chain order, until it returns false.
  template <typename Registry, typename OnMatch>
  static std::int32_t WalkChain(Registry& self, ModelId model, BlockChain chain,
                                std::int32_t limit, OnMatch on_match);
  // How many of s's first n blocks `chain` matches from block `pos`, when it
  // leaves s at one of s's known branch points; -1 when it does not.
  static std::int32_t KnownBranch(const Segment& s, BlockChain chain, std::size_t pos, std::size_t n);
  // A chain left s after its first `blocks` (0 < blocks < s.size()).
  static void NoteBranch(Segment& s, std::int32_t blocks);
  // The segment a checkpoint's new blocks can be appended to, or null.
  Segment* Extendable(ModelId model, BlockChain chain, std::int32_t present,
                      std::int64_t block_bytes, std::int64_t tail_bytes, ChainOwner owner);
  // Evicts until `bytes` more fit; false if they cannot.
  bool MakeRoom(std::int64_t bytes);
  // A new segment of `model` starting at block `start` of `chain`, most recent.
  Segment& NewSegment(ModelId model, BlockChain chain, std::int32_t start, std::int64_t block_bytes,
                      ChainOwner owner);
  // Appends blocks [from, to) of `chain` to `s`, the last carrying `tail`
  // bytes, as D2H copies from `t`; returns when they land.
  TimePoint Append(Segment& s, BlockChain chain, std::int32_t from, std::int32_t to, std::int64_t tail,
                   TimePoint t, double d2h_bytes_per_s);
  // Drops a segment's last n blocks; erases the segment when it is empty.
  void TrimTail(Segment& s, std::int32_t n);
  void Touch(Segment& s);
  void LruAppend(Segment& s);
  void LruPrepend(Segment& s);
  void LruUnlink(Segment& s);
  void TouchMatches();  // walk_ tail first
  void LogDrop(const Segment& s, PrefixHash dropped);

  std::int64_t capacity_;
  std::int64_t used_ = 0;
  std::int64_t evicted_ = 0;
  std::uint64_t version_ = 0;
  TimePoint d2h_free_at_;
  // Node-based (segments are pointed at from the LRU list, in_flight_ and walks);
  // open addressing finds a segment in fewer cache misses than buckets.
  absl::node_hash_map<Key, Segment, KeyHash> segments_;
  Segment* lru_head_ = nullptr;      // least recently used
  Segment* lru_tail_ = nullptr;      // most recently used
  std::deque<Segment*> in_flight_;   // segments with copies pending, in completion order
  std::vector<Drop> drops_;
  std::vector<Match> walk_;  // scratch for one call (no allocation per call)
  std::vector<std::int32_t> pieces_;  // scratch: where a checkpoint's new blocks split
  std::vector<Segment*> appended_;    // scratch: the segments they went to
};

}  // namespace talaria
