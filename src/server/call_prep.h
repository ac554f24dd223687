// What the gateway and the instance servers both do to a client request
// before it becomes a scheduler call: byte-level tokenization, the model's
// context limit, and matching the prompt against the session's previous
// context (prompt + output) to find the reusable prefix.
//
// Token ids are byte-level: byte b is token kFirstByteToken + b; 0-2 are
// reserved for special tokens. Both sides tokenize identically, so the
// gateway's prefix (for routing) and the instance's (for admission) agree.
#pragma once

#include <cstdint>
#include <functional>
#include <list>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <variant>
#include <vector>

#include "core/time.h"
#include "profile/profile.h"
#include "server/openai_api.h"

namespace talaria {

struct InstanceConfig;

inline constexpr std::int32_t kFirstByteToken = 3;

void AppendByteTokens(std::vector<std::int32_t>& out, std::string_view text);

// The models a server answers for and each one's context limit (the
// smallest over the instances that serve it).
class ModelCatalog {
 public:
  // Every model of `instances`; a model without a profile at the
  // instance's TP gets limit 0 and rejects every prompt.
  ModelCatalog(std::span<const InstanceConfig> instances, const ProfileSet& profiles);

  // The prompt's token ids, or the OpenAI-style error for an unknown model
  // (404) or a prompt that, with max_tokens, exceeds the context (400).
  std::variant<std::vector<std::int32_t>, ApiError> PromptTokens(const CompletionRequest& request) const;
  // Sorted model names.
  std::vector<std::string> Models() const;
  bool Serves(const std::string& model) const { return limits_.count(model) != 0; }

 private:
  std::map<std::string, std::int64_t> limits_;
};

// Each session's last context, for prefix matching; bounded, least recently
// used first out. A session ends when it has had no call for `idle_s` (or
// is pushed out by the bound): `on_end` then hears its session completion
// time, first call's arrival to last call's end. Ends are noticed when a
// later call updates the table. Not thread-safe: the owner locks.
class SessionContexts {
 public:
  using OnEnd = std::function<void(Duration sct)>;
  explicit SessionContexts(std::size_t max_sessions = 100'000, double idle_s = 60, OnEnd on_end = nullptr)
      : max_sessions_(max_sessions), idle_(FromSeconds(idle_s)), on_end_(std::move(on_end)) {}

  struct Match {
    std::int64_t prefix_tokens = 0;  // leading prompt tokens equal to the previous context
    bool full_reuse = false;         // the whole previous context is a prefix of the prompt
    bool continuation = false;       // the session has a previous call
  };
  Match Find(const std::string& session, std::span<const std::int32_t> prompt) const;
  // The session's context after a call that arrived at `arrived` and ended
  // at `now`: its prompt, then its output.
  void Update(const std::string& session, std::vector<std::int32_t> context, TimePoint arrived, TimePoint now);
  std::size_t size() const { return table_.size(); }

 private:
  struct Entry {
    std::vector<std::int32_t> context;
    std::list<std::string>::iterator lru;
    TimePoint first_arrival;
    TimePoint last_done;
  };
  void EndFront();

  std::size_t max_sessions_;
  Duration idle_;
  OnEnd on_end_;
  std::unordered_map<std::string, Entry> table_;
  std::list<std::string> lru_;  // front = least recently used
};

}  // namespace talaria
