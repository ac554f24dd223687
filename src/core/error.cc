#include "core/error.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>

namespace talaria {
namespace {

std::string Join(const std::string& where, const std::string& message) {
  return where.empty() ? message : where + ": " + message;
}

std::string JoinProblems(const std::vector<std::string>& problems) {
  std::string out;
  const std::size_t shown = std::min(problems.size(), ProblemList::kShown);
  for (std::size_t i = 0; i < shown; ++i) {
    if (i > 0) out += '\n';
    out += problems[i];
  }
  if (problems.size() > shown) {
    out += "\n... and " + std::to_string(problems.size() - shown) + " more problems";
  }
  return out;
}

}  // namespace

InputError::InputError(std::string where, const std::string& message)
    : std::runtime_error(Join(where, message)), where_(std::move(where)) {}

InputError::InputError(const std::vector<std::string>& problems)
    : std::runtime_error(JoinProblems(problems)) {}

void ProblemList::Add(std::string where, std::string_view message) {
  problems_.push_back(Join(where, std::string(message)));
}

void ProblemList::ThrowIfAny() const {
  if (problems_.size() == 1) throw InputError("", problems_.front());
  if (!problems_.empty()) throw InputError(problems_);
}

void CheckFailed(const char* condition, const char* message, const char* file, int line) {
  std::fprintf(stderr, "%s:%d: check failed: %s: %s\n", file, line, condition, message);
  std::abort();
}

}  // namespace talaria
