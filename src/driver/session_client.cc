#include "driver/session_client.h"

#include <algorithm>

namespace talaria {

double ReleaseRule::GapSeconds(const TraceCall& next) const {
  return std::min(next.gap_uncapped_s.value_or(next.gap_s), gap_cap_s);
}

void TraceSessionContext::Advance(const TraceCall& c, std::int32_t block_tokens, std::int64_t reserve_tokens) {
  const std::int64_t context = c.prompt_tokens + c.output_tokens;
  const auto keep = static_cast<std::size_t>(c.prefix_tokens / block_tokens);
  const auto full = static_cast<std::size_t>(context / block_tokens);
  const auto room = static_cast<std::size_t>(std::max(context, reserve_tokens) / block_tokens);
  // Holders see a prefix of the chain, no longer than it is now: blocks may
  // be appended in place past it, within the capacity (the data does not
  // move), but a chain cut inside it, or grown past its capacity while
  // held, is extended as a copy of what the prefix keeps.
  const bool held = chain_ != nullptr && chain_.use_count() > 1;
  if (chain_ == nullptr || (held && (keep < chain_->size() || full > chain_->capacity()))) {
    auto fresh = std::make_shared<std::vector<PrefixHash>>();
    fresh->reserve(room);
    if (chain_ != nullptr) {
      fresh->assign(chain_->begin(), chain_->begin() + static_cast<std::ptrdiff_t>(std::min(chain_->size(), keep)));
    }
    chain_ = std::move(fresh);
  } else if (full > chain_->capacity()) {
    chain_->reserve(room);
  }
  ExtendSessionChain(*chain_, c.prefix_tokens, context, block_tokens, c.token_seed, c.call_index);
  full_reuse_ = FullReuse(advanced_, c.prefix_tokens, previous_context_);
  // Checkpoints past the prefix were of a context this call does not keep.
  const std::int64_t prefix = advanced_ ? c.prefix_tokens : 0;
  while (!checkpoints_.empty() && checkpoints_.back().tokens > prefix) checkpoints_.pop_back();
  state_ = checkpoints_.empty() ? StatePoint{} : checkpoints_.back();
  const PrefixHash partial = context % block_tokens != 0
                                 ? NamePartialSessionBlock(*chain_, context, block_tokens, c.token_seed, c.call_index)
                                 : 0;
  checkpoints_.push_back(StatePoint{context, partial});
  previous_context_ = context;
  advanced_ = true;
}

CallRequest TraceSessionContext::Request(const TraceCall& c, std::int64_t id) const {
  CallRequest r;
  r.id = id;
  r.session_id = c.session_id;
  r.continuation = c.call_index > 0;
  r.model = c.model;
  r.prompt_tokens = c.prompt_tokens;
  r.prefix_tokens = c.prefix_tokens;
  r.output_tokens = c.output_tokens;
  r.full_reuse = full_reuse_;
  r.chain = chain();
  r.chain_owner = chain_;
  r.state_tokens = state_.tokens;
  r.state_partial = state_.partial;
  r.context_partial = checkpoints_.empty() ? 0 : checkpoints_.back().partial;
  r.expected_tool_s = c.expected_tool_s.value_or(-1.0);
  r.session_end = c.session_end;
  return r;
}

SessionContexts::Match SessionContexts::Find(const std::string& session, std::span<const std::int32_t> prompt) const {
  Match m;
  auto it = table_.find(session);
  if (it == table_.end()) return m;
  const auto& prev = it->second.context;
  const auto n = std::min(prev.size(), prompt.size());
  m.prefix_tokens = std::mismatch(prev.begin(), prev.begin() + static_cast<std::ptrdiff_t>(n), prompt.begin()).first -
                    prev.begin();
  m.continuation = true;
  m.full_reuse = FullReuse(m.continuation, m.prefix_tokens, static_cast<std::int64_t>(prev.size()));
  return m;
}

void SessionContexts::EndFront() {
  auto it = table_.find(lru_.front());
  if (on_end_) on_end_(it->second.last_done - it->second.first_arrival);
  table_.erase(it);
  lru_.pop_front();
}

void SessionContexts::Update(const std::string& session, std::vector<std::int32_t> context, TimePoint arrived,
                             TimePoint now) {
  // Sessions idle for longer than the limit have ended (least recent
  // first); this one too, if it comes back after that: it starts anew.
  while (!lru_.empty() && now - table_.at(lru_.front()).last_done > idle_) EndFront();
  auto [it, inserted] = table_.try_emplace(session);
  if (inserted) {
    it->second.lru = lru_.insert(lru_.end(), it->first);
    it->second.first_arrival = arrived;
    if (table_.size() > max_sessions_) EndFront();  // bounded: the least recently used goes
  } else {
    lru_.splice(lru_.end(), lru_, it->second.lru);
  }
  it->second.context = std::move(context);
  it->second.last_done = now;
}

CallRequest PromptRequest(std::int64_t id, std::string session, std::string model,
                          std::span<const std::int32_t> prompt, std::span<const PrefixHash> chain,
                          std::int64_t max_tokens, const SessionContexts::Match& match) {
  CallRequest r;
  r.id = id;
  r.session_id = std::move(session);
  r.continuation = match.continuation;
  r.model = std::move(model);
  r.prompt_tokens = static_cast<std::int64_t>(prompt.size());
  r.prefix_tokens = match.prefix_tokens;
  r.output_tokens = max_tokens;
  r.full_reuse = match.full_reuse;
  // The previous context's end is the only state point the servers name.
  r.state_tokens = match.full_reuse ? match.prefix_tokens : 0;
  r.chain = chain;
  r.prompt_ids = prompt;
  return r;
}

}  // namespace talaria
