#include "trace/tokens.h"

#include "core/error.h"
#include "core/random.h"

namespace talaria {

SessionTokens::SessionTokens(std::uint64_t token_seed, std::int32_t vocab_size,
                             std::int32_t first_id)
    : seed_(token_seed), vocab_size_(vocab_size), first_id_(first_id) {
  TALARIA_CHECK(first_id >= 0 && first_id < vocab_size, "token id range is empty");
}

std::int32_t SessionTokens::FreshId(std::int32_t call_index, std::int64_t position) const {
  const std::uint64_t h = Mix64(Mix64(seed_ ^ Mix64(static_cast<std::uint64_t>(call_index))) ^
                                static_cast<std::uint64_t>(position));
  const auto range = static_cast<std::uint64_t>(vocab_size_ - first_id_);
  return first_id_ + static_cast<std::int32_t>(h % range);
}

void SessionTokens::Advance(const TraceCall& call) {
  TALARIA_CHECK(call.call_index == next_call_, "SessionTokens fed out of call order");
  TALARIA_CHECK(call.prefix_tokens <= static_cast<std::int64_t>(context_.size()),
                "prefix longer than the previous context");
  const std::int64_t total = call.prompt_tokens + call.output_tokens;
  context_.resize(static_cast<std::size_t>(call.prefix_tokens));
  context_.reserve(static_cast<std::size_t>(total));
  for (std::int64_t p = call.prefix_tokens; p < total; ++p) {
    context_.push_back(FreshId(call.call_index, p));
  }
  prompt_tokens_ = call.prompt_tokens;
  ++next_call_;
}

}  // namespace talaria
