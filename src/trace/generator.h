// A seeded generator of agent sessions with the shape of the SWE-Bench
// Verified characterization (paper §2.1): session depth, tool gaps, long and
// growing prompts whose continuations almost always reuse most of the
// previous context. docs/trace-format.md documents every distribution and
// the presets that produce the shipped traces under traces/.
//
// Every draw comes from core/random.h, so a (preset, options, seed) triple
// reproduces a trace byte for byte.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "trace/trace.h"

namespace talaria {

// A point of a quantile function: value at cumulative probability q.
struct QuantilePoint {
  double q;
  double value;
};

// A quantile function interpolated linearly in log(value) between anchors.
// Anchors must start at q=0, end at q=1, increase in q, and be positive and
// non-decreasing in value.
class LogQuantileCurve {
 public:
  explicit LogQuantileCurve(std::vector<QuantilePoint> points);
  double At(double u) const;  // u in [0, 1]

 private:
  std::vector<QuantilePoint> points_;
};

struct GeneratorOptions {
  std::int32_t sessions = 445;
  // Catalogue, most popular first; a session's model is drawn by Zipf(zipf_s).
  std::vector<std::string> models = {"qwen3-235b-a22b", "glm-5-nvfp4", "qwen3.5-122b-a10b"};
  double zipf_s = 1.0;
  std::uint64_t seed = 1;
  // Session starts: Poisson arrivals at this rate; 0 starts every session at t=0.
  double session_rate_per_s = 0.0;
  // Sessions start in bursts of this many at once (the bursts arrive at
  // session_rate_per_s / burst_size, so the mean rate is unchanged).
  std::int32_t burst_size = 1;
  // Gaps above the cap are written as the cap (the original kept in
  // gap_uncapped_s); 0 means no cap.
  double gap_cap_s = 0.0;

  // Calls per session (§2.1: p50 11, p95 49, max 187).
  std::vector<QuantilePoint> calls_per_session = {{0.0, 1}, {0.5, 11}, {0.95, 49}, {1.0, 187}};
  // Tool gaps: log-normal through p50 and p95 (§2.1: 0.39 s and 1.32 s) ...
  double gap_p50_s = 0.39;
  double gap_p95_s = 1.32;
  // ... plus rare environment start-ups before a session's second call
  // (§2.1 / appendix: five > 30 s intervals in 445 sessions) ...
  double env_start_probability = 5.0 / 445.0;
  double env_start_min_s = 30.0;
  double env_start_max_s = 120.0;
  // ... and, per continuation, long tool runs (builds, test suites).
  double long_gap_probability = 0.0;
  double long_gap_min_s = 10.0;
  double long_gap_max_s = 60.0;

  // Context: a first prompt (system prompt, tools, task), then each
  // continuation appends a tool result to the reused prefix.
  double first_prompt_p50_tokens = 10000;
  double first_prompt_sigma = 0.35;
  double tool_result_p50_tokens = 1100;
  double tool_result_sigma = 1.1;
  // Sessions differ in how fast their context grows (large files, verbose
  // tools): each session scales its tool-result median by a log-normal
  // factor with median 1 and this sigma.
  double session_growth_sigma = 0.8;
  std::int64_t tool_result_max_tokens = 32768;
  // Output tokens: log-normal, clamped to [1, output_max_tokens].
  double output_p50_tokens = 90;
  double output_sigma = 1.0;
  std::int64_t output_max_tokens = 8192;
  // Prefix reuse: with full_reuse_probability the whole previous prompt +
  // output is reused; up to reuse_over_half_probability a part above half
  // (edited or trimmed history); otherwise at most half (a compaction).
  double full_reuse_probability = 0.90;
  double reuse_over_half_probability = 0.968;
  // A context that would exceed this is compacted first.
  std::int64_t max_context_tokens = 200000;
};

// Independent sessions (the characterization shape).
Trace GenerateSessions(const GeneratorOptions& options);

// The fixed-replay shape: `tasks` task identities, each replayed on every
// model in options.models with the same call structure (counts, tokens,
// gaps, token seed). Task depths are drawn from calls_per_session and scaled
// so each model gets exactly calls_per_model calls.
Trace GenerateFixedReplay(const GeneratorOptions& options, std::int32_t tasks,
                          std::int32_t calls_per_model);

// The routing subset: the first `calls_per_session` calls of every session of
// `fixed`, models renamed through `model_map` (pairs of from, to), and session
// starts re-drawn as Poisson arrivals at session_rate_per_s (seeded by seed).
Trace RoutingSubset(const Trace& fixed, std::int32_t calls_per_session,
                    const std::vector<std::pair<std::string, std::string>>& model_map,
                    double session_rate_per_s, std::uint64_t seed);

// Calls per session as a quantile curve through p50, p95 and the maximum
// (from 1 call at q = 0).
std::vector<QuantilePoint> CallsPerSession(double p50, double p95, double max);

// A named preset: "characterization" (445 sessions), "swe-fixed" (10 tasks x
// 3 models, 960 calls, 10 s gap cap), "router" (120 calls over 30 sessions,
// TP=4 models), and the workload families the policies are checked on
// (independent sessions, Poisson starts; docs/trace-format.md): "agent-short"
// (the characterization's shape), "long-gap-tools", "chat-paced", "burst",
// "flat-popularity", "steep-popularity". Returns false for an unknown name.
bool PresetOptions(const std::string& name, GeneratorOptions& options);
// Every preset name, in the order above.
const std::vector<std::string>& PresetNames();
Trace GeneratePreset(const std::string& name, const GeneratorOptions& options);

}  // namespace talaria
