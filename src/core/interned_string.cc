#include "core/interned_string.h"

#include <mutex>

#include <absl/container/node_hash_set.h>

#include "core/strings.h"

namespace talaria {
namespace {

struct Pool {
  std::mutex mu;
  // Node-based: a pooled string never moves, so pointers to it stay valid.
  absl::node_hash_set<std::string, StringHash, std::equal_to<>> strings;
};

Pool& ThePool() {
  static auto* pool = new Pool();  // never destroyed: interned strings outlive every static
  return *pool;
}

}  // namespace

const std::string& InternedString::Empty() {
  static const auto* empty = new std::string();
  return *empty;
}

const std::string& InternedString::Intern(std::string_view s) {
  if (s.empty()) return Empty();
  Pool& pool = ThePool();
  const std::lock_guard lock(pool.mu);
  return *pool.strings.emplace(s).first;
}

std::size_t InternedString::PoolSize() {
  Pool& pool = ThePool();
  const std::lock_guard lock(pool.mu);
  return pool.strings.size();
}

}  // namespace talaria
