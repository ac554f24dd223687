// What the gateway and the instance servers both do to a client request
// before it becomes a scheduler call: byte-level tokenization and the
// model's context limit. (Matching the prompt against the session's previous
// context is driver/session_client.h's SessionContexts.)
//
// Token ids are byte-level: byte b is token kFirstByteToken + b; 0-2 are
// reserved for special tokens. Both sides tokenize identically, so the
// gateway's prefix (for routing) and the instance's (for admission) agree.
#pragma once

#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "profile/profile.h"
#include "server/openai_api.h"

namespace talaria {

struct InstanceConfig;

inline constexpr std::int32_t kFirstByteToken = 3;
// The tokenizer's id space, [0, kVocabSize): every served model's. A
// token-id prompt outside it is a client error, never an engine's problem.
inline constexpr std::int32_t kVocabSize = kFirstByteToken + 256;

void AppendByteTokens(std::vector<std::int32_t>& out, std::string_view text);

// The models a server answers for and each one's context limit (the
// smallest over the instances that serve it).
class ModelCatalog {
 public:
  // Every model of `instances`; a model without a profile at the
  // instance's TP gets limit 0 and rejects every prompt.
  ModelCatalog(std::span<const InstanceConfig> instances, const ProfileSet& profiles);

  // The prompt's token ids, or the OpenAI-style error for an unknown model
  // (404), a token id outside the vocabulary (400), or a prompt that, with
  // max_tokens, exceeds the context (400).
  std::variant<std::vector<std::int32_t>, ApiError> PromptTokens(const CompletionRequest& request) const;
  // Sorted model names.
  std::vector<std::string> Models() const;
  bool Serves(const std::string& model) const { return limits_.count(model) != 0; }

 private:
  std::map<std::string, std::int64_t> limits_;
};

}  // namespace talaria
