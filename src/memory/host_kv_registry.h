// The host KV registry, HKVR (DESIGN.md §5, paper §4.3 and appendix B).
//
// One host slab pool per instance, shared by every model and attention
// family: a block is a fixed number of tokens of one model's KV (K/V pairs,
// MLA latent, and for hybrid models the recurrent state travels with the
// chain's last block). Blocks are keyed by (model, cumulative prefix hash),
// so a prefix is found by walking its hash chain until the first miss.
//
// Invariants (each has a test):
//  1. DMA pins are separate from radix references. A block under copy is
//     never freed (eviction only drops its radix reference; the bytes are
//     freed when the last pin goes), and a block whose D2H copy has not
//     completed is never visible to lookups.
//  2. Publish only the longest block-aligned prefix on which every TP rank
//     agrees (length and hash); the tail stays private and is recomputed.
//  3. Before a model's KV region is released, its outstanding D2H copies
//     drain; the barrier is scoped to that model.
//
// Capacity is bounded; eviction is least-recently-used over published,
// unpinned blocks, and a chain is touched tail first so its head is the most
// recent: eviction trims chains from the tail, keeping the restorable prefix
// as long as possible. Accounting is per rank (ranks are symmetric).
// Time comes in as arguments. Not synchronized.
#pragma once

#include <cstdint>
#include <deque>
#include <list>
#include <span>
#include <unordered_map>
#include <vector>

#include "core/time.h"

namespace talaria {

using PrefixHash = std::uint64_t;
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
 private:
  struct Block;

 public:
  // Stands in dropped_owners() for a drop that may concern any owner (a
  // block several chains share, or one checkpointed without an owner).
  static constexpr ChainOwner kAnyOwner = ~ChainOwner{0};

  // What one owner's last checkpoint registered, so its next checkpoint of
  // the same (extended) chain looks up only the new blocks. The registry
  // checks it before use: it holds only while no block of the owner, and no
  // block shared with another owner, has been dropped since; a cache that no
  // longer holds is ignored. Opaque to callers.
  class ChainCache {
   public:
    void Clear() {
      blocks_.clear();
      hashes_.clear();
    }

   private:
    friend class HostKvRegistry;
    std::vector<Block*> blocks_;      // the chain's leading registered blocks
    std::vector<PrefixHash> hashes_;  // their keys, in the same order
    ModelId model_ = -1;
    std::uint64_t owner_drops_ = 0;
    std::uint64_t shared_drops_ = 0;
  };

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
  // prefix, see AgreedBlocks). Copies run one after another on the D2H
  // engine at `d2h_bytes_per_s`, starting no earlier than `now` or the end of
  // the engine's previous copy. `tail_bytes` is added to the last block
  // (a hybrid model's recurrent state).
  // With an `owner` and its `cache`, blocks the owner's previous checkpoint
  // registered are touched without a lookup (O(new blocks) lookups per
  // checkpoint instead of O(chain)).
  CheckpointResult Checkpoint(ModelId model, std::span<const PrefixHash> chain, std::int32_t blocks,
                              std::int64_t block_bytes, std::int64_t tail_bytes, TimePoint now,
                              double d2h_bytes_per_s, ChainOwner owner = 0, ChainCache* cache = nullptr);

  // Marks copies that finished by `now` complete (published).
  void CompleteCopies(TimePoint now);

  // Switch barrier: the time at which every outstanding copy of `model`
  // completes (>= now); those copies are then complete. Other models'
  // copies are untouched.
  TimePoint DrainModel(ModelId model, TimePoint now);

  // Longest published prefix of `chain` for `model`, in blocks. Touches the
  // matched blocks (LRU).
  std::int32_t Lookup(ModelId model, std::span<const PrefixHash> chain, TimePoint now);

  // Like Lookup, without completing copies or touching the LRU order, in
  // O(log n) lookups: what a telemetry snapshot reports.
  std::int32_t Probe(ModelId model, std::span<const PrefixHash> chain) const;

  // Restore DMA: pins the first `blocks` of `chain` so eviction cannot free
  // them; Unpin when the copy completes.
  void Pin(ModelId model, std::span<const PrefixHash> chain, std::int32_t blocks);
  void Unpin(ModelId model, std::span<const PrefixHash> chain, std::int32_t blocks);

  // Changes whenever the set of published blocks may have changed (a copy
  // completed, a block was evicted or re-indexed): callers may cache Probe
  // results against it.
  std::uint64_t version() const { return version_; }

  // Owners whose registered blocks were dropped (evicted) since the last
  // ClearDroppedOwners, in drop order with repeats; kAnyOwner when the drop
  // may concern any owner. Lets a caller refresh only the chains that
  // changed. Bounded: past a few thousand entries it collapses to kAnyOwner.
  const std::vector<ChainOwner>& dropped_owners() const { return dropped_owners_; }
  void ClearDroppedOwners() { dropped_owners_.clear(); }
  // The owner is gone (its session was forgotten): drops its bookkeeping.
  void ForgetOwner(ChainOwner owner) { owner_drops_.erase(owner); }

  std::int64_t used_bytes() const { return used_; }
  std::int64_t capacity_bytes() const { return capacity_; }
  std::int64_t evicted_blocks() const { return evicted_; }
  std::size_t outstanding_copies() const;
  // For tests: whether a block is registered at all (published or not), and
  // whether its bytes are still held.
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
  using Entry = std::pair<const Key, Block>;  // blocks_' elements: their addresses are stable
  struct Block {
    std::int64_t bytes = 0;
    bool copy_done = false;  // D2H finished
    bool indexed = true;     // radix reference: visible to lookups once copy_done
    std::int32_t dma_pins = 0;
    TimePoint copy_done_at;
    std::list<Entry*>::iterator lru;  // valid while indexed
    ChainOwner owner = 0;          // who registered it
    bool shared = false;           // another owner's chain holds it too
  };

  bool MakeRoom(std::int64_t bytes);
  void Drop(std::unordered_map<Key, Block, KeyHash>::iterator it);
  void Touch(Block& b);
  void TouchChain(ModelId model, std::span<const PrefixHash> chain, std::int32_t blocks);
  // Touches found_ tail first (the blocks a walk just looked up).
  void TouchFound();

  std::int64_t capacity_;
  std::int64_t used_ = 0;
  std::int64_t evicted_ = 0;
  std::uint64_t version_ = 0;
  TimePoint d2h_free_at_;
  std::unordered_map<Key, Block, KeyHash> blocks_;
  std::list<Entry*> lru_;            // front = least recently used
  std::deque<Entry*> in_flight_;     // copies not yet complete, in completion order
  std::unordered_map<ChainOwner, std::uint64_t> owner_drops_;  // per owner: blocks dropped
  std::uint64_t shared_drops_ = 0;   // drops of shared or ownerless blocks
  std::vector<ChainOwner> dropped_owners_;
  // Scratch for one call (kept to avoid allocating per checkpoint/lookup).
  std::vector<std::int32_t> to_copy_;
  std::vector<Entry*> reserved_;     // to_copy_'s keys, reserved in blocks_
  std::vector<Block*> found_;        // element pointers stay valid until an erase
};

}  // namespace talaria
