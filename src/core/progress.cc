#include "core/progress.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace talaria {

std::string FormatDuration(double seconds) {
  const auto s = static_cast<std::int64_t>(std::llround(std::max(0.0, seconds)));
  char out[48];
  if (s < 60) {
    std::snprintf(out, sizeof out, "%lld s", static_cast<long long>(s));
  } else if (s < 3600) {
    std::snprintf(out, sizeof out, "%lld min %lld s", static_cast<long long>(s / 60), static_cast<long long>(s % 60));
  } else {
    std::snprintf(out, sizeof out, "%lld h %lld min", static_cast<long long>(s / 3600),
                  static_cast<long long>(s % 3600 / 60));
  }
  return out;
}

std::string FormatProgress(std::string_view label, std::int64_t done, std::int64_t total, std::string_view unit,
                           double elapsed_s, int bar_width) {
  std::string out(label);
  const bool known = total > 0;
  const double fraction = known ? std::clamp(static_cast<double>(done) / static_cast<double>(total), 0.0, 1.0) : 0;
  if (known && bar_width > 0) {
    const int filled = static_cast<int>(fraction * bar_width);
    out += " [" + std::string(static_cast<std::size_t>(filled), '#') +
           std::string(static_cast<std::size_t>(bar_width - filled), '.') + "]";
  }
  char text[160];
  if (known) {
    std::snprintf(text, sizeof text, " %3.0f%% %lld/%lld %.*s", 100 * fraction, static_cast<long long>(done),
                  static_cast<long long>(total), static_cast<int>(unit.size()), unit.data());
  } else {
    std::snprintf(text, sizeof text, " %lld %.*s", static_cast<long long>(done), static_cast<int>(unit.size()),
                  unit.data());
  }
  out += text;
  if (done > 0 && elapsed_s > 0) {
    const double rate = static_cast<double>(done) / elapsed_s;
    std::snprintf(text, sizeof text, ", %.3g %.*s/s", rate, static_cast<int>(unit.size()), unit.data());
    out += text;
    if (known && done < total) out += ", ETA " + FormatDuration(static_cast<double>(total - done) / rate);
  }
  return out;
}

}  // namespace talaria
