// Errors, in one style for the whole project (docs/conventions.md):
//
//  * Bad input from outside (a trace file, a profile, a config, a CLI flag, an
//    HTTP body) raises InputError, which names where the problem is (file and
//    line, file and key, or a request field) and what is wrong. Readers collect
//    every problem they can before raising, so one run shows them all.
//    Drivers (the CLI, the servers) catch it at their boundary and report it:
//    a message and exit code 2, or an HTTP 4xx with an OpenAI-style body.
//  * A broken internal invariant is a bug: TALARIA_CHECK aborts with the
//    condition, the message and the source location. It is never used for
//    input validation.
//  * Policy code (router, scheduler, memory books) does not throw on its hot
//    paths: outcomes such as "no capacity" are return values, not errors.
#pragma once

#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace talaria {

class InputError : public std::runtime_error {
 public:
  // `where` is "path:line", "path: key a.b" or a field name; may be empty.
  InputError(std::string where, const std::string& message);
  // Several problems found in one input; `problems` are complete messages.
  explicit InputError(const std::vector<std::string>& problems);

  const std::string& where() const { return where_; }

 private:
  std::string where_;
};

// Collects problems found while reading one input, then raises them together.
class ProblemList {
 public:
  void Add(std::string where, std::string_view message);
  bool empty() const { return problems_.empty(); }
  std::size_t size() const { return problems_.size(); }
  // Throws InputError with every problem (the first `kShown`, then a count).
  void ThrowIfAny() const;

  static constexpr std::size_t kShown = 20;

 private:
  std::vector<std::string> problems_;
};

[[noreturn]] void CheckFailed(const char* condition, const char* message, const char* file,
                              int line);

}  // namespace talaria

#define TALARIA_CHECK(cond, msg)                                       \
  do {                                                                 \
    if (!(cond)) ::talaria::CheckFailed(#cond, (msg), __FILE__, __LINE__); \
  } while (0)
