#include "progress.h"

#include <unistd.h>

#include <cstdio>

#include "core/progress.h"

namespace talaria::cli {

ProgressReporter::ProgressReporter(std::string label, std::string unit, bool quiet)
    : label_(std::move(label)),
      unit_(std::move(unit)),
      quiet_(quiet),
      tty_(isatty(STDERR_FILENO) != 0),
      start_(std::chrono::steady_clock::now()) {}

double ProgressReporter::elapsed_s() const {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
}

void ProgressReporter::Update(std::int64_t done, std::int64_t total) {
  const double elapsed = elapsed_s();
  if (quiet_ || elapsed < next_s_) return;
  next_s_ = elapsed + (tty_ ? 0.2 : 10.0);
  reported_ = true;
  const std::string line = FormatProgress(label_, done, total, unit_, elapsed, tty_ ? 24 : 0);
  // On a terminal the line is rewritten in place (and cleared to its end).
  std::fprintf(stderr, tty_ ? "\r%s\033[K" : "%s\n", line.c_str());
}

void ProgressReporter::Finish() {
  if (!reported_) return;
  std::fprintf(stderr, tty_ ? "\r%s: done in %s\033[K\n" : "%s: done in %s\n", label_.c_str(),
               FormatDuration(elapsed_s()).c_str());
  reported_ = false;
}

}  // namespace talaria::cli
