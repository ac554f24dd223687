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
    for (std::size_t i = 0; i < request.prompt_ids.size(); ++i) {
      const std::int32_t id = request.prompt_ids[i];
      if (id < 0 || id >= kVocabSize) {
        ApiError e;
        e.param = "prompt";
        e.code = "invalid_value";
        e.message = "prompt token " + std::to_string(i) + " is id " + std::to_string(id) +
                    ", outside the vocabulary [0, " + std::to_string(kVocabSize) + ")";
        return e;
      }
    }
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

}  // namespace talaria
