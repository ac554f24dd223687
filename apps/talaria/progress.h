// Progress of long CLI work (replays, sweeps, profile measurements) on
// stderr, formatted by core/progress.h: on a terminal, a bar with rate and
// ETA rewritten in place five times a second; otherwise (a log, a pipe) a
// plain line every 10 s; nothing when quiet. Short work prints nothing:
// reporting starts once the work has run for a second.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

namespace talaria::cli {

class ProgressReporter {
 public:
  ProgressReporter(std::string label, std::string unit, bool quiet);
  // `done` of `total` units are done (total <= 0: unknown).
  void Update(std::int64_t done, std::int64_t total);
  // Ends the report ("LABEL: done in 12 s") if anything was reported.
  void Finish();
  double elapsed_s() const;

 private:
  std::string label_;
  std::string unit_;
  bool quiet_;
  bool tty_;
  std::chrono::steady_clock::time_point start_;
  double next_s_ = 1.0;
  bool reported_ = false;
};

}  // namespace talaria::cli
