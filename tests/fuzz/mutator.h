// A seeded mutation fuzzer for the parsers of untrusted input (no libFuzzer
// needed, so it runs in every CI build, the sanitizer one too): each run
// takes a seed input and applies 1 to 8 random edits: a byte changed, a
// dictionary token inserted or written over, a range erased or duplicated,
// a number replaced by an extreme one, a cut, or a splice with another
// seed. Deterministic for a given seed number, so a failure reproduces.
//
// Runs: TALARIA_FUZZ_RUNS executions per driver (default 100,000; CI runs
// the default, `TALARIA_FUZZ_RUNS=10000000 build/tests/fuzz_tests` runs
// longer) from TALARIA_FUZZ_SEED (default 1).
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include "core/random.h"

namespace talaria::fuzz {

inline std::int64_t Runs() {
  const char* env = std::getenv("TALARIA_FUZZ_RUNS");
  return env != nullptr ? std::max<std::int64_t>(1, std::atoll(env)) : 100'000;
}

inline std::uint64_t Seed() {
  const char* env = std::getenv("TALARIA_FUZZ_SEED");
  return env != nullptr ? std::strtoull(env, nullptr, 10) : 1;
}

class Mutator {
 public:
  Mutator(std::vector<std::string> seeds, std::vector<std::string> dictionary)
      : seeds_(std::move(seeds)), dictionary_(std::move(dictionary)), rng_(Seed()) {}

  std::string Next() {
    std::string s = seeds_[Pick(seeds_.size())];
    const auto edits = rng_.UniformInt(1, 8);
    for (std::int64_t e = 0; e < edits; ++e) Edit(s);
    return s;
  }

 private:
  std::size_t Pick(std::size_t n) { return static_cast<std::size_t>(rng_.UniformInt(0, static_cast<std::int64_t>(n) - 1)); }

  void Edit(std::string& s) {
    const std::size_t pos = s.empty() ? 0 : Pick(s.size() + 1);
    switch (rng_.UniformInt(0, 7)) {
      case 0:  // any byte, NUL and high bytes included
        if (!s.empty()) s[std::min(pos, s.size() - 1)] = static_cast<char>(rng_.UniformInt(0, 255));
        break;
      case 1:
        s.insert(pos, dictionary_[Pick(dictionary_.size())]);
        break;
      case 2: {
        const std::string& token = dictionary_[Pick(dictionary_.size())];
        s.replace(pos, token.size(), token);
        break;
      }
      case 3:
        if (pos < s.size()) s.erase(pos, static_cast<std::size_t>(rng_.UniformInt(1, 64)));
        break;
      case 4:
        if (pos < s.size()) s.insert(pos, s.substr(pos, static_cast<std::size_t>(rng_.UniformInt(1, 256))));
        break;
      case 5: {  // a number made extreme
        static const char* const kNumbers[] = {"0", "-1", "4294967296", "18446744073709551615", "-9223372036854775809",
                                               "1e308", "1e-308", "NaN", "0.0000001", "99999999999999999999999"};
        const auto digit = s.find_first_of("0123456789", pos);
        if (digit == std::string::npos) break;
        const auto end = s.find_first_not_of("0123456789.eE+-", digit);
        s.replace(digit, (end == std::string::npos ? s.size() : end) - digit, kNumbers[Pick(std::size(kNumbers))]);
        break;
      }
      case 6:
        s.resize(pos);
        break;
      default: {  // splice: this seed's head, another's tail
        const std::string& other = seeds_[Pick(seeds_.size())];
        s = s.substr(0, pos) + other.substr(std::min(other.size(), Pick(other.size() + 1)));
        break;
      }
    }
  }

  std::vector<std::string> seeds_;
  std::vector<std::string> dictionary_;
  Rng rng_;
};

// Runs `one` on Runs() mutated inputs; `one` returns whether the input was
// accepted (false: rejected with the parser's own error). Anything else it
// throws fails the test with the input that did it. Returns the accepted count.
inline std::int64_t Drive(Mutator& mutator, const std::function<bool(const std::string&)>& one) {
  std::int64_t accepted = 0;
  const std::int64_t runs = Runs();
  for (std::int64_t run = 0; run < runs; ++run) {
    const std::string input = mutator.Next();
    try {
      accepted += one(input) ? 1 : 0;
    } catch (const std::exception& e) {
      ADD_FAILURE() << "run " << run << " (TALARIA_FUZZ_SEED=" << Seed() << "): " << e.what() << "\ninput ("
                    << input.size() << " bytes): " << ::testing::PrintToString(input);
      return accepted;
    }
  }
  std::printf("%lld runs: %lld accepted, %lld refused\n", static_cast<long long>(runs), static_cast<long long>(accepted),
              static_cast<long long>(runs - accepted));
  return accepted;
}

}  // namespace talaria::fuzz
