// Costs of the foundation's inputs: reading and validating a trace,
// generating one, computing its statistics, and profile lookups. The replay
// and servers pay these once per run or per call, so they must stay small
// next to a replay step.
#include <benchmark/benchmark.h>

#include <fstream>
#include <sstream>

#include "profile/profile.h"
#include "trace/generator.h"
#include "trace/tokens.h"
#include "trace/trace.h"
#include "trace/trace_stats.h"

namespace talaria {
namespace {

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

void BM_ReadTraceSweFixed(benchmark::State& state) {
  const std::string text = ReadFile(std::string(TALARIA_SOURCE_DIR) + "/traces/swe-fixed-30.jsonl");
  for (auto _ : state) {
    std::istringstream in(text);
    benchmark::DoNotOptimize(ReadTrace(in, "swe-fixed-30"));
  }
  state.SetItemsProcessed(state.iterations() * 960);
  state.SetBytesProcessed(state.iterations() * static_cast<std::int64_t>(text.size()));
}
BENCHMARK(BM_ReadTraceSweFixed)->Unit(benchmark::kMillisecond);

void BM_GenerateCharacterization(benchmark::State& state) {
  GeneratorOptions o;
  for (auto _ : state) benchmark::DoNotOptimize(GenerateSessions(o));
}
BENCHMARK(BM_GenerateCharacterization)->Unit(benchmark::kMillisecond);

void BM_TraceStatsCharacterization(benchmark::State& state) {
  const Trace t = GenerateSessions(GeneratorOptions{});
  for (auto _ : state) benchmark::DoNotOptimize(ComputeTraceStats(t));
  state.SetItemsProcessed(state.iterations() * static_cast<std::int64_t>(t.calls.size()));
}
BENCHMARK(BM_TraceStatsCharacterization)->Unit(benchmark::kMillisecond);

// Materialising a 25K-token prompt then a continuation that appends 1.1K.
void BM_SessionTokensContinuation(benchmark::State& state) {
  TraceCall first;
  first.prompt_tokens = 25000;
  first.output_tokens = 200;
  TraceCall next = first;
  next.call_index = 1;
  next.prefix_tokens = 25200;
  next.prompt_tokens = 26300;
  for (auto _ : state) {
    SessionTokens tokens(7, 151936);
    tokens.Advance(first);
    tokens.Advance(next);
    benchmark::DoNotOptimize(tokens.prompt().data());
  }
}
BENCHMARK(BM_SessionTokensContinuation)->Unit(benchmark::kMicrosecond);

// A profile lookup as the router and scheduler make per decision.
void BM_ProfilePrefillAndDecodeLookup(benchmark::State& state) {
  const ModelProfile p =
      LoadProfile(std::string(TALARIA_SOURCE_DIR) + "/profiles/qwen3-235b-a22b.tp8.toml");
  std::int64_t tokens = 1000;
  for (auto _ : state) {
    tokens = tokens % 120000 + 997;
    benchmark::DoNotOptimize(p.PrefillSeconds(tokens, tokens / 2) +
                             p.DecodeStepSeconds(static_cast<int>(tokens % 64) + 1, tokens));
  }
}
BENCHMARK(BM_ProfilePrefillAndDecodeLookup);

}  // namespace
}  // namespace talaria

