// Agent hints in a replay (issue 18; `talaria replay --hints`): what a
// session's calls tell the server of its future, set on a trace's calls
// before it is replayed, so their value can be measured:
//   none      no hints (those the trace carries are dropped);
//   trace     the hints the trace carries (docs/trace-format.md);
//   exact     each call's expected tool time is the gap before the
//             session's next call as the replay releases it (the gap cap
//             applied), and a session's last call says it is the last;
//   noisy:F   as exact, each tool time multiplied by a factor drawn
//             log-uniformly from [1/F, F] (F >= 1), seeded per session.
#pragma once

#include <cstdint>
#include <string>

#include "driver/session_client.h"
#include "trace/trace.h"

namespace talaria {

struct HintOptions {
  enum class Mode { kNone, kTrace, kExact, kNoisy };
  Mode mode = Mode::kNone;
  double noise = 1;  // kNoisy's F
  std::uint64_t seed = 1;
};

// "none", "trace", "exact" or "noisy:F"; InputError naming `--hints` otherwise.
HintOptions ParseHintOptions(const std::string& spec);
std::string ToString(const HintOptions& o);

// Sets (or clears) the hints of every call of `trace` as `o` says.
void ApplyHints(Trace& trace, const HintOptions& o, const ReleaseRule& release);

}  // namespace talaria
