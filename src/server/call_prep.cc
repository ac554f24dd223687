#include "server/call_prep.h"

#include <algorithm>

#include "instance/config.h"

namespace talaria {

void AppendByteTokens(std::vector<std::int32_t>& out, std::string_view text) {
  out.reserve(out.size() + text.size());
  for (unsigned char c : text) out.push_back(kFirstByteToken + c);
}

ModelCatalog::ModelCatalog(std::span<const InstanceConfig> instances, const ProfileSet& profiles) {
  for (const auto& ic : instances) {
    for (const auto& m : ic.models) {
      const ModelProfile* p = profiles.Find(m, ic.tp);
      const std::int64_t limit = p != nullptr ? p->max_context_tokens : 0;
      auto [it, inserted] = limits_.try_emplace(m, limit);
      if (!inserted) it->second = std::min(it->second, limit);
    }
  }
}

std::vector<std::string> ModelCatalog::Models() const {
  std::vector<std::string> out;
  out.reserve(limits_.size());
  for (const auto& [m, limit] : limits_) out.push_back(m);
  return out;
}

std::variant<std::vector<std::int32_t>, ApiError> ModelCatalog::PromptTokens(const CompletionRequest& request) const {
  auto limit = limits_.find(request.model);
  if (limit == limits_.end()) {
    ApiError e;
    e.status = 404;
    e.param = "model";
    e.code = "model_not_found";
    e.message = "the model '" + request.model + "' does not exist";
    return e;
  }
  std::vector<std::int32_t> prompt;
  if (request.chat) {
    AppendByteTokens(prompt, RenderChat(request.messages));
  } else if (!request.prompt_ids.empty()) {
    prompt = request.prompt_ids;
  } else {
    AppendByteTokens(prompt, request.prompt_text);
  }
  const auto prompt_tokens = static_cast<std::int64_t>(prompt.size());
  if (prompt_tokens == 0 || prompt_tokens + request.max_tokens > limit->second) {
    ApiError e;
    e.param = request.chat ? "messages" : "prompt";
    e.code = "context_length_exceeded";
    e.message = "this model's maximum context length is " + std::to_string(limit->second) +
                " tokens; the request has " + std::to_string(prompt_tokens) + " prompt tokens and asks for " +
                std::to_string(request.max_tokens);
    return e;
  }
  return prompt;
}

SessionContexts::Match SessionContexts::Find(const std::string& session, std::span<const std::int32_t> prompt) const {
  Match m;
  auto it = table_.find(session);
  if (it == table_.end()) return m;
  const auto& prev = it->second.context;
  const auto n = std::min(prev.size(), prompt.size());
  m.prefix_tokens = std::mismatch(prev.begin(), prev.begin() + static_cast<std::ptrdiff_t>(n), prompt.begin()).first -
                    prev.begin();
  m.full_reuse = m.prefix_tokens == static_cast<std::int64_t>(prev.size());
  m.continuation = true;
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

}  // namespace talaria
