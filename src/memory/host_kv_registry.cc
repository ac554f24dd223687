#include "memory/host_kv_registry.h"

#include <algorithm>

#include "core/error.h"
#include "core/random.h"

namespace talaria {
namespace {
constexpr std::size_t kDroppedOwnersCap = 4096;
}  // namespace

std::int32_t AgreedBlocks(std::span<const RankReport> ranks) {
  if (ranks.empty()) return 0;
  std::size_t n = ranks[0].hashes.size();
  for (const auto& r : ranks) n = std::min(n, r.hashes.size());
  for (std::size_t i = 0; i < n; ++i) {
    for (const auto& r : ranks) {
      if (r.hashes[i] != ranks[0].hashes[i]) return static_cast<std::int32_t>(i);
    }
  }
  return static_cast<std::int32_t>(n);
}

std::size_t HostKvRegistry::KeyHash::operator()(const Key& k) const noexcept {
  return static_cast<std::size_t>(Mix64(k.hash ^ Mix64(static_cast<std::uint64_t>(k.model))));
}

void HostKvRegistry::Touch(Block& b) {
  if (b.indexed) lru_.splice(lru_.end(), lru_, b.lru);  // no allocation
}

void HostKvRegistry::TouchChain(ModelId model, std::span<const PrefixHash> chain,
                                std::int32_t blocks) {
  // Tail first, so the chain's head ends up most recently used.
  for (std::int32_t i = blocks - 1; i >= 0; --i) {
    if (auto it = blocks_.find(Key{model, chain[static_cast<std::size_t>(i)]}); it != blocks_.end()) {
      Touch(it->second);
    }
  }
}

void HostKvRegistry::TouchFound() {
  for (auto b = found_.rbegin(); b != found_.rend(); ++b) {
    if (*b != nullptr) Touch(**b);  // null: a block not registered yet
  }
}

void HostKvRegistry::Drop(std::unordered_map<Key, Block, KeyHash>::iterator it) {
  Block& b = it->second;
  if (b.indexed) {
    lru_.erase(b.lru);
    b.indexed = false;  // no longer visible to lookups
    ++version_;
    // Chain caches that may hold this block stop holding.
    ChainOwner logged = kAnyOwner;
    if (b.shared || b.owner == 0) {
      ++shared_drops_;
    } else {
      if (auto d = owner_drops_.find(b.owner); d != owner_drops_.end()) ++d->second;
      logged = b.owner;
    }
    if (dropped_owners_.size() >= kDroppedOwnersCap) dropped_owners_.assign(1, kAnyOwner);
    if (dropped_owners_.empty() || dropped_owners_.back() != logged) dropped_owners_.push_back(logged);
  }
  if (b.dma_pins == 0 && b.copy_done) {
    used_ -= b.bytes;
    blocks_.erase(it);
  }
  // Otherwise the bytes stay until the copy completes or the pin goes.
}

bool HostKvRegistry::MakeRoom(std::int64_t bytes) {
  auto it = lru_.begin();
  while (used_ + bytes > capacity_ && it != lru_.end()) {
    Block& b = (*it)->second;
    const Key key = (*it)->first;
    ++it;
    if (b.dma_pins > 0 || !b.copy_done) continue;  // invariant 1: in use by a DMA
    auto block = blocks_.find(key);
    ++evicted_;
    Drop(block);
  }
  return used_ + bytes <= capacity_;
}

HostKvRegistry::CheckpointResult HostKvRegistry::Checkpoint(
    ModelId model, std::span<const PrefixHash> chain, std::int32_t blocks, std::int64_t block_bytes,
    std::int64_t tail_bytes, TimePoint now, double d2h_bytes_per_s, ChainOwner owner, ChainCache* cache) {
  CheckpointResult r;
  r.done = now;
  blocks = std::min<std::int32_t>(blocks, static_cast<std::int32_t>(chain.size()));
  TimePoint t = std::max(now, d2h_free_at_);
  std::vector<std::int32_t>& to_copy = to_copy_;  // head first: a prefix is only useful from its start
  to_copy.clear();
  reserved_.clear();
  found_.clear();  // the chain's blocks in chain order, for touching without a second lookup
  std::uint64_t* drops = nullptr;
  if (owner != 0 && cache != nullptr) {
    drops = &owner_drops_[owner];
    // The blocks the owner's last checkpoint registered are still indexed if
    // none of its own or shared blocks was dropped since; they stand for the
    // chain as far as their keys match it (a new call may branch off early).
    if (cache->model_ == model && cache->owner_drops_ == *drops && cache->shared_drops_ == shared_drops_) {
      const auto n = std::min<std::size_t>(cache->blocks_.size(), static_cast<std::size_t>(blocks));
      const auto same = static_cast<std::size_t>(
          std::mismatch(chain.begin(), chain.begin() + static_cast<std::ptrdiff_t>(n), cache->hashes_.begin()).first -
          chain.begin());
      found_.assign(cache->blocks_.begin(), cache->blocks_.begin() + static_cast<std::ptrdiff_t>(same));
      r.present_blocks = static_cast<std::int32_t>(same);
    }
    cache->blocks_.clear();
    cache->hashes_.clear();
  }
  for (auto i = static_cast<std::int32_t>(found_.size()); i < blocks; ++i) {
    const Key key{model, chain[static_cast<std::size_t>(i)]};
    // One hash lookup either way: a new key is reserved now (unindexed, so
    // invisible to lookups and to eviction) and filled in once it has room.
    auto [it, inserted] = blocks_.try_emplace(key);
    if (!inserted) {
      // Registered, or evicted but still held by a DMA pin: index it again.
      if (!it->second.indexed) {
        it->second.indexed = true;
        it->second.lru = lru_.insert(lru_.end(), &*it);
        ++version_;
      }
      if (it->second.owner != owner) it->second.shared = true;
      ++r.present_blocks;
      found_.push_back(&it->second);
    } else {
      it->second.indexed = false;
      to_copy.push_back(i);
      reserved_.push_back(&*it);
      found_.push_back(nullptr);
    }
  }
  // The chain's registered blocks become most recent before making room, so
  // the eviction below never trims the chain being extended.
  std::int64_t new_bytes = static_cast<std::int64_t>(to_copy.size()) * block_bytes + tail_bytes;
  // Evicting other owners' blocks leaves found_ intact; a drop of one of the
  // owner's own or of a shared block (owner 0: any block) may not.
  const std::uint64_t own_drops_before = drops != nullptr ? *drops : 0;
  const std::uint64_t shared_drops_before = shared_drops_;
  const std::int64_t evicted_before = evicted_;
  if (used_ + new_bytes > capacity_) TouchFound();
  for (std::size_t k = 0; k < to_copy.size(); ++k) {
    const std::int32_t i = to_copy[k];
    const std::int64_t bytes = block_bytes + (i == blocks - 1 ? tail_bytes : 0);
    if (!MakeRoom(bytes)) {
      r.missed_blocks = static_cast<std::int32_t>(to_copy.size() - k);
      for (std::size_t j = k; j < reserved_.size(); ++j) blocks_.erase(reserved_[j]->first);
      break;
    }
    t += FromSeconds(static_cast<double>(bytes) / d2h_bytes_per_s);
    Entry& e = *reserved_[k];
    e.second.bytes = bytes;
    e.second.copy_done_at = t;
    e.second.owner = owner;
    e.second.indexed = true;
    e.second.lru = lru_.insert(lru_.end(), &e);
    found_[static_cast<std::size_t>(i)] = &e.second;
    in_flight_.push_back(&e);
    used_ += bytes;
    r.bytes += bytes;
    ++r.copied_blocks;
  }
  const bool found_intact = drops != nullptr
                                ? *drops == own_drops_before && shared_drops_ == shared_drops_before
                                : evicted_ == evicted_before;
  if (found_intact && r.missed_blocks == 0) {
    TouchFound();  // none of the recorded blocks was dropped
    if (drops != nullptr) {
      cache->blocks_.assign(found_.begin(), found_.end());
      cache->hashes_.assign(chain.begin(), chain.begin() + blocks);
      cache->model_ = model;
      cache->owner_drops_ = *drops;
      cache->shared_drops_ = shared_drops_;
    }
  } else {
    TouchChain(model, chain, blocks);  // the recorded blocks may be gone: look them up again
  }
  d2h_free_at_ = t;
  r.done = t;
  return r;
}

void HostKvRegistry::CompleteCopies(TimePoint now) {
  // Copies run one after another, so in_flight_ is in completion order.
  while (!in_flight_.empty() && in_flight_.front()->second.copy_done_at <= now) {
    Entry& e = *in_flight_.front();
    in_flight_.pop_front();
    e.second.copy_done = true;
    ++version_;
    if (!e.second.indexed) Drop(blocks_.find(e.first));  // evicted while copying: free now
  }
}

TimePoint HostKvRegistry::DrainModel(ModelId model, TimePoint now) {
  TimePoint done = now;
  std::erase_if(in_flight_, [&](Entry* e) {
    if (e->first.model != model) return false;
    done = std::max(done, e->second.copy_done_at);
    e->second.copy_done = true;
    ++version_;
    if (!e->second.indexed) Drop(blocks_.find(e->first));
    return true;
  });
  return done;
}

std::int32_t HostKvRegistry::Lookup(ModelId model, std::span<const PrefixHash> chain, TimePoint now) {
  CompleteCopies(now);
  found_.clear();
  for (PrefixHash h : chain) {
    auto it = blocks_.find(Key{model, h});
    if (it == blocks_.end() || !it->second.indexed || !it->second.copy_done) break;
    found_.push_back(&it->second);
  }
  TouchFound();
  return static_cast<std::int32_t>(found_.size());
}

std::int32_t HostKvRegistry::Probe(ModelId model, std::span<const PrefixHash> chain) const {
  // A chain's published blocks form a prefix: copies complete head first and
  // eviction trims tails first. So binary-search the boundary: O(log n).
  auto published = [&](std::size_t i) {
    auto it = blocks_.find(Key{model, chain[i]});
    return it != blocks_.end() && it->second.indexed && it->second.copy_done;
  };
  std::size_t lo = 0, hi = chain.size();  // answer in [lo, hi]
  while (lo < hi) {
    const std::size_t mid = lo + (hi - lo + 1) / 2;
    if (published(mid - 1)) lo = mid;
    else hi = mid - 1;
  }
  return static_cast<std::int32_t>(lo);
}

void HostKvRegistry::Pin(ModelId model, std::span<const PrefixHash> chain, std::int32_t blocks) {
  for (std::int32_t i = 0; i < blocks; ++i) {
    auto it = blocks_.find(Key{model, chain[static_cast<std::size_t>(i)]});
    TALARIA_CHECK(it != blocks_.end(), "pinning a block the registry does not hold");
    ++it->second.dma_pins;
  }
}

void HostKvRegistry::Unpin(ModelId model, std::span<const PrefixHash> chain, std::int32_t blocks) {
  for (std::int32_t i = 0; i < blocks; ++i) {
    auto it = blocks_.find(Key{model, chain[static_cast<std::size_t>(i)]});
    TALARIA_CHECK(it != blocks_.end() && it->second.dma_pins > 0, "unpinning a block that is not pinned");
    if (--it->second.dma_pins == 0 && !it->second.indexed) Drop(it);
  }
}

std::size_t HostKvRegistry::outstanding_copies() const { return in_flight_.size(); }

bool HostKvRegistry::IsPublished(ModelId model, PrefixHash hash) const {
  auto it = blocks_.find(Key{model, hash});
  return it != blocks_.end() && it->second.indexed && it->second.copy_done;
}

bool HostKvRegistry::HoldsBytes(ModelId model, PrefixHash hash) const {
  return blocks_.contains(Key{model, hash});
}

}  // namespace talaria
