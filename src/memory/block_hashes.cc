#include "memory/block_hashes.h"

#include <algorithm>

#include <xxhash.h>

#include "core/random.h"

namespace talaria {

void HashTokenBlocks(std::span<const std::int32_t> tokens, std::int32_t block_tokens,
                     std::vector<PrefixHash>& out) {
  out.clear();
  PrefixHash previous = 0;
  for (std::size_t start = 0; start + static_cast<std::size_t>(block_tokens) <= tokens.size();
       start += static_cast<std::size_t>(block_tokens)) {
    previous = XXH3_64bits_withSeed(tokens.data() + start,
                                    static_cast<std::size_t>(block_tokens) * sizeof(std::int32_t),
                                    previous);
    out.push_back(previous);
  }
}

void ExtendSessionChain(std::vector<PrefixHash>& chain, std::int64_t prefix_tokens,
                        std::int64_t context_tokens, std::int32_t block_tokens,
                        std::uint64_t token_seed, std::int32_t call_index) {
  const auto keep = static_cast<std::size_t>(prefix_tokens / block_tokens);
  if (chain.size() > keep) chain.resize(keep);
  const auto full = static_cast<std::size_t>(context_tokens / block_tokens);
  PrefixHash previous = chain.empty() ? Mix64(token_seed) : chain.back();
  const std::uint64_t call = Mix64(token_seed ^ Mix64(static_cast<std::uint64_t>(call_index) + 1));
  for (std::size_t b = chain.size(); b < full; ++b) {
    previous = Mix64(previous ^ Mix64(call ^ b));
    chain.push_back(previous);
  }
}

namespace {
// Hashes name blocks; 0 is never one (BlockChain and callers may use it
// as "none").
PrefixHash NonZero(PrefixHash h) { return h == 0 ? 1 : h; }
}  // namespace

PrefixHash NamePartialSessionBlock(std::span<const PrefixHash> chain, std::int64_t context_tokens,
                                   std::int32_t block_tokens, std::uint64_t token_seed, std::int32_t call_index) {
  const PrefixHash previous = chain.empty() ? Mix64(token_seed) : chain.back();
  const std::uint64_t call = Mix64(token_seed ^ Mix64(static_cast<std::uint64_t>(call_index) + 1));
  const auto length = static_cast<std::uint64_t>(context_tokens % block_tokens);
  return NonZero(Mix64(previous ^ Mix64(call ^ chain.size() ^ (length << 32))));
}

std::int32_t CommonBlocks(std::span<const PrefixHash> a, const BlockChain& b, std::size_t from) {
  const std::size_t full = b.full().size() > from ? std::min(a.size(), b.full().size() - from) : 0;
  auto m = static_cast<std::size_t>(CommonBlocks(a.first(full), b.full().subspan(std::min(from, b.full().size()), full)));
  if (m == full && b.has_partial() && from + m == b.full().size() && m < a.size() && a[m] == b.partial()) ++m;
  return static_cast<std::int32_t>(m);
}

std::int32_t CommonBlocks(std::span<const PrefixHash> a, std::span<const PrefixHash> b) {
  // Hashes are cumulative: the chains agree on a prefix and differ on every
  // block after it, so the boundary is found by bisection (after checking
  // the common case, one chain a prefix of the other, with one comparison).
  const std::size_t n = std::min(a.size(), b.size());
  if (n == 0 || a[n - 1] == b[n - 1]) return static_cast<std::int32_t>(n);
  std::size_t lo = 0, hi = n - 1;  // agree below lo; differ at hi and after
  while (lo < hi) {
    const std::size_t mid = lo + (hi - lo) / 2;
    if (a[mid] == b[mid]) lo = mid + 1;
    else hi = mid;
  }
  return static_cast<std::int32_t>(lo);
}

}  // namespace talaria
