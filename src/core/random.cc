#include "core/random.h"

#include <algorithm>
#include <cmath>
#include <numbers>

#include "core/error.h"

namespace talaria {

Rng Rng::Fork(std::uint64_t stream) { return Rng(Mix64(NextU64() ^ Mix64(stream))); }

double Rng::Uniform() { return static_cast<double>(engine_() >> 11) * 0x1.0p-53; }

std::int64_t Rng::UniformInt(std::int64_t lo, std::int64_t hi) {
  TALARIA_CHECK(lo <= hi, "UniformInt with lo > hi");
  const auto span = static_cast<double>(hi - lo) + 1.0;
  auto offset = static_cast<std::int64_t>(Uniform() * span);
  return std::min(lo + offset, hi);
}

double Rng::Normal() {
  // 1 - Uniform() is in (0, 1], so the log is finite.
  const double u1 = 1.0 - Uniform();
  const double u2 = Uniform();
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * std::numbers::pi * u2);
}

double Rng::LogNormal(double median, double sigma) {
  return median * std::exp(sigma * Normal());
}

double Rng::Exponential(double mean) { return -mean * std::log(1.0 - Uniform()); }

}  // namespace talaria
