// The §2.1 characterization statistics of a trace.
//
// Gaps are taken over continuations (call_index > 0) and use gap_uncapped_s
// when present, so a capped replay trace still reports its recorded gaps.
// A continuation "reuses more than half" when prefix_tokens is more than half
// of the previous call's prompt + output.
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <string>

#include "trace/trace.h"

namespace talaria {

struct TraceStats {
  std::int64_t sessions = 0;
  std::int64_t calls = 0;
  std::int64_t continuations = 0;
  double calls_per_session_p50 = 0;
  double calls_per_session_p95 = 0;
  double calls_per_session_max = 0;
  double gap_p50_s = 0;
  double gap_p95_s = 0;
  double prompt_tokens_p50 = 0;
  double prompt_tokens_p95 = 0;
  double reuse_over_half_fraction = 0;
};

TraceStats ComputeTraceStats(const Trace& trace);
// Per model, keyed by model name.
std::map<std::string, TraceStats> ComputeTraceStatsByModel(const Trace& trace);

// The keys scripts depend on, exactly: sessions, calls, calls_per_session_p50,
// calls_per_session_p95, calls_per_session_max, gap_p50_s, gap_p95_s,
// prompt_tokens_p50, prompt_tokens_p95, reuse_over_half_fraction.
nlohmann::ordered_json ToJson(const TraceStats& stats);

}  // namespace talaria
