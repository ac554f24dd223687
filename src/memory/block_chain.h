// A chain of cumulative block hashes as the host KV registry walks it: the
// full blocks of a prefix, then at most one partial block that ends it.
//
// Only full blocks are shared between calls (a later call's block at that
// position holds more tokens, so its hash differs). A partial block matters
// for a hybrid model: its recurrent state cannot be rolled back, so a host
// checkpoint is usable only at the exact end of the context it was taken at.
// The session's checkpoint publishes the context's partial last block (the
// state travels with it), and a continuation that reuses that whole context
// looks it up as its prefix's partial block.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

namespace talaria {

using PrefixHash = std::uint64_t;

// A chain of full-block hashes shared by its holders (a replayed session's
// context, its call in flight, an instance's session entry), append-only:
// each holder sees the prefix as long as the chain was when it took it, and
// the chain's maker may append past every holder's view within its
// capacity (so the data does not move), never change a held block; a maker
// that needs other blocks there makes a new chain. A session's chain is
// held once however many hold it.
using SharedChain = std::shared_ptr<const std::vector<PrefixHash>>;

// A shared chain's hashes (none when it is null).
template <typename Vector>
std::span<const PrefixHash> ChainView(const std::shared_ptr<Vector>& chain) {
  return chain != nullptr ? std::span<const PrefixHash>(*chain) : std::span<const PrefixHash>();
}

class BlockChain {
 public:
  BlockChain() = default;
  // Full blocks only (implicit: most chains are).
  BlockChain(std::span<const PrefixHash> full) : full_(full) {}  // NOLINT(google-explicit-constructor)
  BlockChain(const std::vector<PrefixHash>& full) : full_(full) {}  // NOLINT(google-explicit-constructor)
  BlockChain(std::span<const PrefixHash> full, PrefixHash partial) : full_(full), partial_(partial), has_partial_(true) {}

  std::size_t size() const { return full_.size() + (has_partial_ ? 1 : 0); }
  bool empty() const { return size() == 0; }
  PrefixHash operator[](std::size_t i) const { return i < full_.size() ? full_[i] : partial_; }
  std::span<const PrefixHash> full() const { return full_; }
  bool has_partial() const { return has_partial_; }
  PrefixHash partial() const { return partial_; }
  // Its first n blocks (n <= size()).
  BlockChain first(std::size_t n) const {
    return n > full_.size() ? *this : BlockChain(full_.first(n));
  }

 private:
  std::span<const PrefixHash> full_;
  PrefixHash partial_ = 0;
  bool has_partial_ = false;
};

}  // namespace talaria
