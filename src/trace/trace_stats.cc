#include "trace/trace_stats.h"


#include "core/stats.h"

namespace talaria {
namespace {

// Statistics over the sessions of `trace` for which `keep` holds.
template <typename Keep>
TraceStats Compute(const Trace& trace, Keep keep) {
  TraceStats out;
  Sample depth, gaps, prompts;
  std::int64_t reuse_over_half = 0;
  for (const auto& session : GroupSessions(trace)) {
    if (!keep(trace.calls[session.calls.front()])) continue;
    ++out.sessions;
    depth.Add(static_cast<double>(session.calls.size()));
    std::int64_t previous_context = 0;
    for (std::size_t i : session.calls) {
      const TraceCall& c = trace.calls[i];
      ++out.calls;
      prompts.Add(static_cast<double>(c.prompt_tokens));
      if (c.call_index > 0) {
        ++out.continuations;
        gaps.Add(c.gap_uncapped_s.value_or(c.gap_s));
        if (2 * c.prefix_tokens > previous_context) ++reuse_over_half;
      }
      previous_context = c.prompt_tokens + c.output_tokens;
    }
  }
  if (!depth.empty()) {
    out.calls_per_session_p50 = depth.Percentile(50);
    out.calls_per_session_p95 = depth.Percentile(95);
    out.calls_per_session_max = depth.Max();
    out.prompt_tokens_p50 = prompts.Percentile(50);
    out.prompt_tokens_p95 = prompts.Percentile(95);
  }
  if (!gaps.empty()) {
    out.gap_p50_s = gaps.Percentile(50);
    out.gap_p95_s = gaps.Percentile(95);
    out.reuse_over_half_fraction =
        static_cast<double>(reuse_over_half) / static_cast<double>(out.continuations);
  }
  return out;
}

}  // namespace

TraceStats ComputeTraceStats(const Trace& trace) {
  return Compute(trace, [](const TraceCall&) { return true; });
}

std::map<std::string, TraceStats> ComputeTraceStatsByModel(const Trace& trace) {
  std::map<std::string, TraceStats> out;
  for (const auto& c : trace.calls) out.try_emplace(c.model);
  for (auto& [model, stats] : out) {
    stats = Compute(trace, [&m = model](const TraceCall& c) { return c.model == m; });
  }
  return out;
}

nlohmann::ordered_json ToJson(const TraceStats& s) {
  nlohmann::ordered_json j;
  j["sessions"] = s.sessions;
  j["calls"] = s.calls;
  j["calls_per_session_p50"] = static_cast<std::int64_t>(s.calls_per_session_p50);
  j["calls_per_session_p95"] = static_cast<std::int64_t>(s.calls_per_session_p95);
  j["calls_per_session_max"] = static_cast<std::int64_t>(s.calls_per_session_max);
  j["gap_p50_s"] = s.gap_p50_s;
  j["gap_p95_s"] = s.gap_p95_s;
  j["prompt_tokens_p50"] = static_cast<std::int64_t>(s.prompt_tokens_p50);
  j["prompt_tokens_p95"] = static_cast<std::int64_t>(s.prompt_tokens_p95);
  j["reuse_over_half_fraction"] = s.reuse_over_half_fraction;
  return j;
}

}  // namespace talaria
