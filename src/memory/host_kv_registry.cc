#include "memory/host_kv_registry.h"

#include <algorithm>

#include "core/error.h"
#include "core/random.h"
#include "memory/block_hashes.h"

namespace talaria {
namespace {
constexpr std::size_t kDropsCap = 4096;
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

std::int32_t HostKvRegistry::Segment::pinned() const {
  return pins.empty() ? 0 : *std::max_element(pins.begin(), pins.end());
}

template <typename Registry, typename OnMatch>
std::int32_t HostKvRegistry::WalkChain(Registry& self, ModelId model, BlockChain chain,
                                       std::int32_t limit, OnMatch on_match) {
  limit = std::min<std::int32_t>(limit, static_cast<std::int32_t>(chain.size()));
  std::int32_t pos = 0;
  while (pos < limit) {
    auto it = self.segments_.find(Key{model, chain[static_cast<std::size_t>(pos)]});
    if (it == self.segments_.end()) break;
    auto& s = it->second;  // const exactly when the registry is
    const auto n = static_cast<std::size_t>(std::min(s.size(), limit - pos));
    // The matched blocks are a prefix of the segment (hashes are cumulative):
    // all of it when its last block matches, found without its hash array;
    // else where the chain leaves it, at a branch point seen before or by
    // bisection.
    auto m = static_cast<std::int32_t>(n);
    if (n != s.hashes.size() || s.last != chain[static_cast<std::size_t>(pos) + n - 1]) {
      m = KnownBranch(s, chain, static_cast<std::size_t>(pos), n);
      if (m < 0) m = CommonBlocks(std::span(s.hashes).first(n), chain, static_cast<std::size_t>(pos));
    }
    if (m == 0) break;  // a segment starts with its key block, so m >= 1; never loop in place
    if (!on_match(s, pos, m)) break;
    pos += m;  // a partial match continues in the branch that starts here, if any
  }
  return pos;
}

std::int32_t HostKvRegistry::KnownBranch(const Segment& s, BlockChain chain, std::size_t pos, std::size_t n) {
  // Hashes are cumulative: agreeing on block b - 1 and not on block b, the
  // chain matches exactly s's first b blocks.
  for (const std::int32_t b : s.branches) {
    const auto at = static_cast<std::size_t>(b);
    if (b > 0 && at < n && s.hashes[at - 1] == chain[pos + at - 1] && s.hashes[at] != chain[pos + at]) return b;
  }
  return -1;
}

void HostKvRegistry::NoteBranch(Segment& s, std::int32_t blocks) {
  // Newest first: a known one moves to the front; a new one takes the
  // oldest's place there.
  auto& b = s.branches;
  auto* at = std::find(b.begin(), b.end(), blocks);
  if (at == b.end()) --at;
  std::rotate(b.begin(), at, at + 1);
  b.front() = blocks;
}

std::int32_t HostKvRegistry::Walk(ModelId model, BlockChain chain, std::int32_t limit,
                                  std::vector<Match>& out) {
  out.clear();
  return WalkChain(*this, model, chain, limit, [&](Segment& s, std::int32_t start, std::int32_t blocks) {
    out.push_back(Match{&s, start, blocks});
    return true;
  });
}

void HostKvRegistry::LruAppend(Segment& s) {
  s.lru_prev = lru_tail_;
  s.lru_next = nullptr;
  (lru_tail_ != nullptr ? lru_tail_->lru_next : lru_head_) = &s;
  lru_tail_ = &s;
}

void HostKvRegistry::LruPrepend(Segment& s) {
  s.lru_prev = nullptr;
  s.lru_next = lru_head_;
  (lru_head_ != nullptr ? lru_head_->lru_prev : lru_tail_) = &s;
  lru_head_ = &s;
}

void HostKvRegistry::Demote(ModelId model, BlockChain chain, ChainOwner owner) {
  // In chain order, each to the front: the deepest segment is evicted first.
  Walk(model, chain, static_cast<std::int32_t>(chain.size()), walk_);
  for (const Match& m : walk_) {
    Segment& s = *m.segment;
    if (s.owner != owner || s.shared || lru_head_ == &s) continue;
    LruUnlink(s);
    LruPrepend(s);
  }
}

void HostKvRegistry::LruUnlink(Segment& s) {
  (s.lru_prev != nullptr ? s.lru_prev->lru_next : lru_head_) = s.lru_next;
  (s.lru_next != nullptr ? s.lru_next->lru_prev : lru_tail_) = s.lru_prev;
  s.lru_prev = s.lru_next = nullptr;
}

void HostKvRegistry::Touch(Segment& s) {
  if (lru_tail_ == &s) return;
  LruUnlink(s);
  LruAppend(s);
}

void HostKvRegistry::TouchMatches() {
  for (auto m = walk_.rbegin(); m != walk_.rend(); ++m) Touch(*m->segment);  // tail first
}

void HostKvRegistry::LogDrop(const Segment& s, PrefixHash dropped) {
  if (!drops_.empty() && drops_.back().owner == kAnyOwner) return;  // says it all already
  if (!s.shared && s.owner != 0 && !drops_.empty() && drops_.back().owner == s.owner &&
      drops_.back().model == s.model && drops_.back().first == s.first) {
    drops_.back().kept = s.size();  // the same segment trimmed again
    drops_.back().dropped = dropped;
    return;
  }
  if (s.shared || s.owner == 0 || drops_.size() >= kDropsCap) {
    drops_.assign(1, Drop{kAnyOwner});
    return;
  }
  drops_.push_back(Drop{s.owner, s.model, s.first, s.start, s.size(), dropped});
}

void HostKvRegistry::TrimTail(Segment& s, std::int32_t n) {
  used_ -= n * s.block_bytes + s.tail_bytes;
  s.tail_bytes = 0;
  const PrefixHash dropped = s.hashes[static_cast<std::size_t>(s.size() - n)];  // the lowest that goes
  s.hashes.resize(static_cast<std::size_t>(s.size() - n));  // (only published blocks go)
  s.last = s.hashes.empty() ? 0 : s.hashes.back();
  s.published = std::min(s.published, s.size());
  evicted_ += n;
  ++version_;
  LogDrop(s, dropped);
  if (s.hashes.empty()) {
    LruUnlink(s);
    segments_.erase(Key{s.model, s.first});
  }
}

bool HostKvRegistry::MakeRoom(std::int64_t bytes) {
  for (Segment* next = lru_head_; used_ + bytes > capacity_ && next != nullptr;) {
    Segment& s = *next;
    next = s.lru_next;  // TrimTail may erase s
    // Invariant 1: only published blocks past every pinned prefix go.
    const std::int32_t keep = s.pinned();
    if (s.size() <= keep || s.published != s.size()) continue;
    // As many tail blocks as the room needs, at once (the segment's last
    // block also frees its tail bytes).
    const std::int64_t excess = used_ + bytes - capacity_;
    const std::int64_t first = s.block_bytes + s.tail_bytes;
    std::int64_t n = s.size() - keep;
    if (excess <= first) n = 1;
    else if (s.block_bytes > 0) n = std::min(n, 1 + (excess - first + s.block_bytes - 1) / s.block_bytes);
    TrimTail(s, static_cast<std::int32_t>(n));
  }
  return used_ + bytes <= capacity_;
}

HostKvRegistry::CheckpointResult HostKvRegistry::Checkpoint(
    ModelId model, BlockChain chain, std::int32_t blocks, std::int64_t block_bytes,
    std::int64_t tail_bytes, TimePoint now, double d2h_bytes_per_s, ChainOwner owner,
    std::span<const std::int32_t> state_points) {
  CheckpointResult r;
  blocks = std::min<std::int32_t>(blocks, static_cast<std::int32_t>(chain.size()));
  TimePoint t = std::max(now, d2h_free_at_);
  const std::int32_t present = Walk(model, chain, blocks, walk_);
  for (const Match& m : walk_) {
    if (m.segment->owner != owner) m.segment->shared = true;
  }
  // The chain leaves its last segment inside it: later chains of this
  // prompt prefix will likely leave there too.
  if (present < blocks && !walk_.empty() && walk_.back().blocks < walk_.back().segment->size()) {
    NoteBranch(*walk_.back().segment, walk_.back().blocks);
  }
  r.present_blocks = present;
  // The chain's registered blocks become most recent before making room, so
  // the eviction below trims other chains first.
  TouchMatches();
  std::int32_t n = blocks - present;
  if (n > 0) {
    const std::int64_t evicted_before = evicted_;
    // The interior state points among the new blocks.
    pieces_.clear();
    for (const std::int32_t p : state_points) {
      if (p > present && p < blocks) pieces_.push_back(p);
    }
    bool with_tail = true;
    if (!MakeRoom(static_cast<std::int64_t>(n) * block_bytes +
                  tail_bytes * static_cast<std::int64_t>(pieces_.size() + 1))) {
      // Only part fits (everything evictable is gone): register what does,
      // with no state.
      const std::int64_t room = std::max<std::int64_t>(0, capacity_ - used_);
      const auto fit = static_cast<std::int32_t>(std::min<std::int64_t>(n - 1, room / block_bytes));
      r.missed_blocks = n - fit;
      n = fit;
      with_tail = false;
      pieces_.clear();
    }
    if (n > 0) {
      // A piece may not start where a segment already starts (one whose
      // head eviction took, or a chain cut back to there): no state there.
      std::erase_if(pieces_, [&](std::int32_t p) {
        return segments_.contains(Key{model, chain[static_cast<std::size_t>(p)]});
      });
      pieces_.push_back(present + n);
      appended_.clear();
      std::int32_t from = present;
      for (std::size_t i = 0; i < pieces_.size(); ++i) {
        const std::int64_t tail = with_tail ? tail_bytes : 0;
        Segment* s = i == 0 ? Extendable(model, chain, present, block_bytes, tail, owner) : nullptr;
        if (s == nullptr) s = &NewSegment(model, chain, from, block_bytes, owner);
        t = Append(*s, chain, from, pieces_[i], tail, t, d2h_bytes_per_s);
        appended_.push_back(s);
        r.bytes += static_cast<std::int64_t>(pieces_[i] - from) * block_bytes + tail;
        from = pieces_[i];
      }
      used_ += r.bytes;
      r.copied_blocks = n;
      for (auto p = appended_.rbegin(); p != appended_.rend(); ++p) Touch(**p);  // tail first
    }
    // Head most recent: walk again if eviction may have removed what was matched.
    if (evicted_ != evicted_before) Walk(model, chain, present, walk_);
    TouchMatches();
  }
  d2h_free_at_ = t;
  r.done = t;
  return r;
}

HostKvRegistry::Segment& HostKvRegistry::NewSegment(ModelId model, BlockChain chain, std::int32_t start,
                                                    std::int64_t block_bytes, ChainOwner owner) {
  auto [it, inserted] = segments_.try_emplace(Key{model, chain[static_cast<std::size_t>(start)]});
  TALARIA_CHECK(inserted, "a chain walk stopped at a block that starts a segment");
  Segment& s = it->second;
  s.model = model;
  s.first = chain[static_cast<std::size_t>(start)];
  s.start = start;
  s.block_bytes = block_bytes;
  s.owner = owner;
  LruAppend(s);
  return s;
}

TimePoint HostKvRegistry::Append(Segment& s, BlockChain chain, std::int32_t from, std::int32_t to,
                                 std::int64_t tail, TimePoint t, double d2h_bytes_per_s) {
  // Grown by half again when full, not to the exact size: a session's
  // segment is extended at every call, and exact growth copied the whole
  // segment each time.
  const std::size_t need = s.hashes.size() + static_cast<std::size_t>(to - from);
  if (need > s.hashes.capacity()) s.hashes.reserve(std::max(need, s.hashes.size() + s.hashes.size() / 2));
  s.flight_first = s.size();
  for (std::int32_t i = from; i < to; ++i) s.hashes.push_back(chain[static_cast<std::size_t>(i)]);
  s.last = s.hashes.back();
  s.tail_bytes = tail;
  // Back to back on the D2H engine; the last block carries the tail.
  s.flight_start = t;
  s.flight_step = FromSeconds(static_cast<double>(s.block_bytes) / d2h_bytes_per_s);
  t += (to - from - 1) * s.flight_step + FromSeconds(static_cast<double>(s.block_bytes + tail) / d2h_bytes_per_s);
  s.flight_end = t;
  in_flight_.push_back(&s);
  return t;
}

HostKvRegistry::Segment* HostKvRegistry::Extendable(ModelId model, BlockChain chain,
                                                    std::int32_t present, std::int64_t block_bytes,
                                                    std::int64_t tail_bytes, ChainOwner owner) {
  // The owner's own segment that the chain's registered part ends with, if
  // the new blocks can simply follow it: nobody else's chain runs through
  // it, its copies are complete (in_flight_ stays in completion order), no
  // recurrent state sits on its last block, and eviction has not touched it.
  if (walk_.empty() || owner == 0 || tail_bytes != 0) return nullptr;
  const Match& last = walk_.back();
  if (last.start + last.blocks != present) return nullptr;
  auto it = segments_.find(Key{model, chain[static_cast<std::size_t>(last.start)]});
  if (it == segments_.end() || &it->second != last.segment) return nullptr;
  Segment& s = it->second;
  if (s.owner != owner || s.shared || s.size() != last.blocks || s.published != s.size() || s.tail_bytes != 0 ||
      s.block_bytes != block_bytes) {
    return nullptr;
  }
  return &s;
}

void HostKvRegistry::CompleteCopies(TimePoint now) {
  // Copies run one after another, so in_flight_ is in completion order.
  while (!in_flight_.empty()) {
    Segment& s = *in_flight_.front();
    std::int32_t p = s.published;
    while (p < s.size() && s.DoneAt(p) <= now) ++p;
    if (p != s.published) {
      s.published = p;
      ++version_;
    }
    if (p < s.size()) break;
    in_flight_.pop_front();
  }
}

TimePoint HostKvRegistry::DrainModel(ModelId model, TimePoint now) {
  TimePoint done = now;
  std::erase_if(in_flight_, [&](Segment* s) {
    if (s->model != model) return false;
    done = std::max(done, s->flight_end);
    s->published = s->size();
    ++version_;
    return true;
  });
  return done;
}

std::int32_t HostKvRegistry::Lookup(ModelId model, BlockChain chain, TimePoint now) {
  CompleteCopies(now);
  Walk(model, chain, static_cast<std::int32_t>(chain.size()), walk_);
  std::int32_t found = 0;
  std::size_t used = 0;
  for (const Match& m : walk_) {
    const std::int32_t published = std::min(m.blocks, m.segment->published);
    if (published == 0) break;
    found += published;
    ++used;
    if (published < m.blocks) break;
  }
  walk_.resize(used);
  TouchMatches();
  return found;
}

std::int32_t HostKvRegistry::Probe(ModelId model, BlockChain chain) const {
  std::int32_t found = 0;
  WalkChain(*this, model, chain, static_cast<std::int32_t>(chain.size()),
            [&](const Segment& s, std::int32_t, std::int32_t blocks) {
              const std::int32_t published = std::min(blocks, s.published);
              found += published;
              return published == blocks;  // the published prefix ends inside this segment
            });
  return found;
}

bool HostKvRegistry::HoldsTail(ModelId model, BlockChain chain) const {
  if (chain.empty()) return false;
  bool tail = false;
  const std::int32_t found = WalkChain(*this, model, chain, static_cast<std::int32_t>(chain.size()),
                                       [&](const Segment& s, std::int32_t, std::int32_t blocks) {
                                         // A segment starts at the chain block that keys it.
                                         tail = blocks == s.size() && s.published == s.size() && s.tail_bytes > 0;
                                         return s.published >= blocks;
                                       });
  return tail && static_cast<std::size_t>(found) == chain.size();
}

void HostKvRegistry::Pin(ModelId model, BlockChain chain, std::int32_t blocks) {
  TALARIA_CHECK(Walk(model, chain, blocks, walk_) == blocks, "pinning a block the registry does not hold");
  for (const Match& m : walk_) m.segment->pins.push_back(m.blocks);
}

void HostKvRegistry::Unpin(ModelId model, BlockChain chain, std::int32_t blocks) {
  TALARIA_CHECK(Walk(model, chain, blocks, walk_) == blocks, "unpinning a block the registry does not hold");
  for (const Match& m : walk_) {
    auto& pins = m.segment->pins;
    auto it = std::find(pins.begin(), pins.end(), m.blocks);
    TALARIA_CHECK(it != pins.end(), "unpinning a block that is not pinned");
    pins.erase(it);
  }
}

std::size_t HostKvRegistry::outstanding_copies() const {
  std::size_t n = 0;
  for (const Segment* s : in_flight_) n += static_cast<std::size_t>(s->size() - s->published);
  return n;
}

bool HostKvRegistry::IsPublished(ModelId model, PrefixHash hash) const {
  for (const auto& [key, s] : segments_) {
    if (key.model != model) continue;
    auto it = std::find(s.hashes.begin(), s.hashes.end(), hash);
    if (it != s.hashes.end()) return it - s.hashes.begin() < s.published;
  }
  return false;
}

bool HostKvRegistry::HoldsBytes(ModelId model, PrefixHash hash) const {
  for (const auto& [key, s] : segments_) {
    if (key.model == model && std::find(s.hashes.begin(), s.hashes.end(), hash) != s.hashes.end()) return true;
  }
  return false;
}

}  // namespace talaria
