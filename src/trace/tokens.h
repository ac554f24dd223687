// Materialises a session's token ids from its trace records, so real engines
// see exactly the recorded prefix structure.
//
// Each call's context is prompt + output. Position p of call k's context is
//   * position p of call k-1's context, when p < prefix_tokens of call k;
//   * otherwise a fresh id derived from (token_seed, k, p).
// So call k's prompt starts with the first prefix_tokens of call k-1's
// prompt + output, and diverges right after: the reusable prefix is exactly
// prefix_tokens long. Ids fall in [first_id, vocab_size), leaving ids below
// first_id free for a tokenizer's special tokens.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "trace/trace.h"

namespace talaria {

class SessionTokens {
 public:
  // REQUIRES: 0 <= first_id < vocab_size.
  SessionTokens(std::uint64_t token_seed, std::int32_t vocab_size, std::int32_t first_id = 0);

  // Feeds the session's next call (calls must come in call_index order).
  void Advance(const TraceCall& call);

  std::span<const std::int32_t> prompt() const {
    return std::span(context_).first(static_cast<std::size_t>(prompt_tokens_));
  }
  std::span<const std::int32_t> output() const {
    return std::span(context_).subspan(static_cast<std::size_t>(prompt_tokens_));
  }

 private:
  std::int32_t FreshId(std::int32_t call_index, std::int64_t position) const;

  std::uint64_t seed_;
  std::int32_t vocab_size_;
  std::int32_t first_id_;
  std::int32_t next_call_ = 0;
  std::int64_t prompt_tokens_ = 0;
  std::vector<std::int32_t> context_;
};

}  // namespace talaria
