// A seeded random source whose outputs are fixed by the seed on every
// platform: std::mt19937_64 is specified bit for bit by the standard, and the
// transforms below are written out here (the std:: distributions are
// implementation-defined). Generated traces are therefore reproducible byte
// for byte from a documented command. Not synchronized.
#pragma once

#include <cstdint>
#include <random>

namespace talaria {

class Rng {
 public:
  explicit Rng(std::uint64_t seed) : engine_(seed) {}

  // A fresh, independent stream for a sub-task (e.g. one session), so adding
  // draws to one session does not shift every later session.
  Rng Fork(std::uint64_t stream);

  std::uint64_t NextU64() { return engine_(); }
  // Uniform in [0, 1), 53 random bits.
  double Uniform();
  double Uniform(double lo, double hi) { return lo + (hi - lo) * Uniform(); }
  // Uniform integer in [lo, hi]. REQUIRES: lo <= hi.
  std::int64_t UniformInt(std::int64_t lo, std::int64_t hi);
  bool Bernoulli(double p) { return Uniform() < p; }
  // Standard normal, Box-Muller.
  double Normal();
  // exp(N(ln median, sigma^2)).
  double LogNormal(double median, double sigma);
  // Exponential with the given mean.
  double Exponential(double mean);

 private:
  std::mt19937_64 engine_;
};

// splitmix64 finaliser: a good 64-bit mix, used to derive seeds and token
// ids (inline: a replay names every block of every context with it).
inline std::uint64_t Mix64(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

}  // namespace talaria
