// Cumulative block hashes: the names of KV blocks (HKVR keys, device radix
// matches). Block i's hash covers every token of blocks 0..i, so two
// sequences share block i's hash exactly when they share their first
// (i+1) x block_tokens tokens. Only full blocks are named; a partial tail is
// recomputed, never published, except where a hybrid model's recurrent state
// is checkpointed with it (memory/block_chain.h): the sim engine names such
// a partial block (NamePartialSessionBlock), so a later prefix that ends at
// the same token finds it.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "memory/block_chain.h"

namespace talaria {

// From real token ids (engines that compute on tokens): XXH3 of each block,
// chained through the previous block's hash.
void HashTokenBlocks(std::span<const std::int32_t> tokens, std::int32_t block_tokens,
                     std::vector<PrefixHash>& out);

// For a session replayed from a trace without materialising tokens (the sim
// engine): `chain` holds the previous call's context blocks; this keeps the
// blocks wholly inside `prefix_tokens` and names the remaining full blocks of
// a `context_tokens`-long context from (token_seed, call_index, block). The
// sharing structure is exactly that of the materialised tokens
// (trace/tokens.h).
void ExtendSessionChain(std::vector<PrefixHash>& chain, std::int64_t prefix_tokens,
                        std::int64_t context_tokens, std::int32_t block_tokens,
                        std::uint64_t token_seed, std::int32_t call_index);

// For the sim engine: the partial last block of a `context_tokens`-long
// context whose full blocks `chain` names (as ExtendSessionChain left it),
// the tokens after them written by call (token_seed, call_index). REQUIRES:
// context_tokens is not a multiple of block_tokens.
PrefixHash NamePartialSessionBlock(std::span<const PrefixHash> chain, std::int64_t context_tokens,
                                   std::int32_t block_tokens, std::uint64_t token_seed, std::int32_t call_index);

// Number of leading blocks two chains share (cumulative hashes: a
// bisection, O(log n)).
std::int32_t CommonBlocks(std::span<const PrefixHash> a, std::span<const PrefixHash> b);
// Number of leading blocks of `a` that `b` holds from its block `from` on
// (its partial block included).
std::int32_t CommonBlocks(std::span<const PrefixHash> a, const BlockChain& b, std::size_t from);

}  // namespace talaria
