// talaria trace gen | stats | validate
#include <cstdio>
#include <fstream>
#include <iostream>
#include <memory>
#include <map>
#include <string>

#include "commands.h"
#include "core/error.h"
#include "trace/generator.h"
#include "trace/trace.h"
#include "trace/trace_stats.h"

namespace talaria::cli {
namespace {

struct GenArgs {
  std::string preset = "characterization";
  GeneratorOptions options;
  std::string models;
  double calls_p50 = 11, calls_p95 = 49, calls_max = 187;
  std::string output = "-";
};

std::string PresetList() {
  std::string s;
  for (const auto& n : PresetNames()) s += (s.empty() ? "" : ", ") + n;
  return s;
}

void RunGen(GenArgs& a, CLI::App& cmd) {
  // The preset fills the defaults; flags the user gave override them.
  GeneratorOptions o;
  if (!PresetOptions(a.preset, o)) {
    throw InputError("--preset", "unknown preset '" + a.preset + "' (choose " + PresetList() + ")");
  }
  auto given = [&](const char* flag) { return cmd.count(flag) > 0; };
  if (given("--sessions")) o.sessions = a.options.sessions;
  if (given("--seed")) o.seed = a.options.seed;
  if (given("--zipf")) o.zipf_s = a.options.zipf_s;
  if (given("--gap-cap")) o.gap_cap_s = a.options.gap_cap_s;
  if (given("--session-rate")) o.session_rate_per_s = a.options.session_rate_per_s;
  if (given("--long-gap-probability")) o.long_gap_probability = a.options.long_gap_probability;
  if (given("--max-context")) o.max_context_tokens = a.options.max_context_tokens;
  if (given("--burst-size")) o.burst_size = a.options.burst_size;
  if (given("--gap-p50")) o.gap_p50_s = a.options.gap_p50_s;
  if (given("--gap-p95")) o.gap_p95_s = a.options.gap_p95_s;
  if (given("--first-prompt-p50")) o.first_prompt_p50_tokens = a.options.first_prompt_p50_tokens;
  if (given("--tool-result-p50")) o.tool_result_p50_tokens = a.options.tool_result_p50_tokens;
  if (given("--output-p50")) o.output_p50_tokens = a.options.output_p50_tokens;
  if (given("--calls-p50") || given("--calls-p95") || given("--calls-max")) {
    // Unset ones keep the preset's.
    const auto& d = o.calls_per_session;
    o.calls_per_session = CallsPerSession(given("--calls-p50") ? a.calls_p50 : d[1].value,
                                          given("--calls-p95") ? a.calls_p95 : d[2].value,
                                          given("--calls-max") ? a.calls_max : d.back().value);
  }
  if (given("--models")) {
    o.models.clear();
    std::size_t start = 0;
    while (start <= a.models.size()) {
      auto comma = a.models.find(',', start);
      if (comma == std::string::npos) comma = a.models.size();
      o.models.push_back(a.models.substr(start, comma - start));
      start = comma + 1;
    }
  }
  const Trace trace = GeneratePreset(a.preset, o);
  if (a.output == "-") {
    WriteTrace(std::cout, trace);
    return;
  }
  std::ofstream out(a.output);
  if (!out) throw InputError(a.output, "cannot open output file for writing");
  WriteTrace(out, trace);
  out.flush();
  if (!out) throw InputError(a.output, "write failed");
}

void PrintTable(const std::string& name, const TraceStats& s) {
  std::printf("%-28s %12s %10s\n", name.c_str(), "trace", "paper §2.1");
  std::printf("%-28s %12lld %10s\n", "sessions", static_cast<long long>(s.sessions), "445");
  std::printf("%-28s %12lld %10s\n", "calls", static_cast<long long>(s.calls), "7386");
  std::printf("%-28s %12.0f %10s\n", "calls per session p50", s.calls_per_session_p50, "11");
  std::printf("%-28s %12.0f %10s\n", "calls per session p95", s.calls_per_session_p95, "49");
  std::printf("%-28s %12.0f %10s\n", "calls per session max", s.calls_per_session_max, "187");
  std::printf("%-28s %12.3f %10s\n", "tool gap p50 (s)", s.gap_p50_s, "0.39");
  std::printf("%-28s %12.3f %10s\n", "tool gap p95 (s)", s.gap_p95_s, "1.32");
  std::printf("%-28s %12.0f %10s\n", "prompt tokens p50", s.prompt_tokens_p50, "25000");
  std::printf("%-28s %12.0f %10s\n", "prompt tokens p95", s.prompt_tokens_p95, "105000");
  std::printf("%-28s %12.3f %10s\n", "reuse > half fraction", s.reuse_over_half_fraction, "0.968");
}

void RunStats(const std::string& path, bool json, bool by_model) {
  const Trace trace = ReadTraceFile(path);
  const TraceStats all = ComputeTraceStats(trace);
  if (json) {
    auto j = ToJson(all);
    if (by_model) {
      nlohmann::ordered_json models = nlohmann::ordered_json::object();
      for (const auto& [model, s] : ComputeTraceStatsByModel(trace)) models[model] = ToJson(s);
      j["by_model"] = models;
    }
    std::cout << j.dump(2) << '\n';
    return;
  }
  PrintTable(path == "-" ? "<stdin>" : path, all);
  if (by_model) {
    for (const auto& [model, s] : ComputeTraceStatsByModel(trace)) {
      std::printf("\n");
      PrintTable("model " + model, s);
    }
  }
}

}  // namespace

void AddTraceCommand(CLI::App& app) {
  auto* trace = app.add_subcommand("trace", "Generate, validate and summarise session traces");
  trace->require_subcommand(1);

  auto gen_args = std::make_shared<GenArgs>();
  auto* gen = trace->add_subcommand(
      "gen", "Generate a seeded synthetic agent trace (JSON Lines, docs/trace-format.md)");
  gen->add_option("--preset", gen_args->preset,
                  "characterization: independent sessions shaped like §2.1; swe-fixed: 10 "
                  "tasks x 3 models, 960 calls, 10 s gap cap; router: its first 4 calls per "
                  "session on the TP=4 models; workload families (60 sessions at 0.5/s, "
                  "docs/trace-format.md): agent-short, long-gap-tools, chat-paced, burst, "
                  "flat-popularity, steep-popularity")
      ->capture_default_str();
  gen->add_option("--sessions", gen_args->options.sessions,
                  "sessions to generate (characterization preset)")
      ->capture_default_str();
  gen->add_option("--seed", gen_args->options.seed, "random seed")->capture_default_str();
  gen->add_option("--models", gen_args->models,
                  "comma-separated model catalogue, most popular first "
                  "(default: qwen3-235b-a22b,glm-5-nvfp4,qwen3.5-122b-a10b)");
  gen->add_option("--zipf", gen_args->options.zipf_s,
                  "popularity skew: model i (from 1) is drawn with weight 1/i^s")
      ->capture_default_str();
  gen->add_option("--gap-cap", gen_args->options.gap_cap_s,
                  "cap tool gaps at this many seconds, keeping the original as gap_uncapped_s "
                  "(0: no cap; swe-fixed and router: 10)")
      ->capture_default_str();
  gen->add_option("--session-rate", gen_args->options.session_rate_per_s,
                  "session starts as Poisson arrivals per second (0: all at t=0; router: 0.5)")
      ->capture_default_str();
  gen->add_option("--long-gap-probability", gen_args->options.long_gap_probability,
                  "probability of a 10-60 s tool run before a continuation "
                  "(swe-fixed and router: 0.021)")
      ->capture_default_str();
  gen->add_option("--max-context", gen_args->options.max_context_tokens,
                  "compact a session's context before it exceeds this many tokens "
                  "(swe-fixed and router: 120000)")
      ->capture_default_str();
  gen->add_option("--burst-size", gen_args->options.burst_size,
                  "sessions that start together; bursts arrive at session-rate / burst-size (burst: 20)")
      ->capture_default_str();
  gen->add_option("--gap-p50", gen_args->options.gap_p50_s,
                  "tool gap median, seconds (log-normal through p50 and p95; long-gap-tools: 2.5, "
                  "chat-paced: 45)")
      ->capture_default_str();
  gen->add_option("--gap-p95", gen_args->options.gap_p95_s,
                  "tool gap 95th percentile, seconds (long-gap-tools: 20, chat-paced: 240)")
      ->capture_default_str();
  gen->add_option("--calls-p50", gen_args->calls_p50, "calls per session, median")->capture_default_str();
  gen->add_option("--calls-p95", gen_args->calls_p95, "calls per session, 95th percentile")
      ->capture_default_str();
  gen->add_option("--calls-max", gen_args->calls_max, "calls per session, most")->capture_default_str();
  gen->add_option("--first-prompt-p50", gen_args->options.first_prompt_p50_tokens,
                  "first prompt median, tokens (long-gap-tools: 40000, chat-paced: 1500)")
      ->capture_default_str();
  gen->add_option("--tool-result-p50", gen_args->options.tool_result_p50_tokens,
                  "tokens a continuation adds to the reused context, median: the context's growth "
                  "(chat-paced: 150)")
      ->capture_default_str();
  gen->add_option("--output-p50", gen_args->options.output_p50_tokens,
                  "output tokens per call, median (chat-paced: 300)")
      ->capture_default_str();
  gen->add_option("-o,--output", gen_args->output, "output file, - for standard output")
      ->capture_default_str();
  gen->callback([gen_args, gen] { RunGen(*gen_args, *gen); });

  auto stats_path = std::make_shared<std::string>();
  auto stats_json = std::make_shared<bool>(false);
  auto stats_by_model = std::make_shared<bool>(false);
  auto* stats = trace->add_subcommand(
      "stats", "Print a trace's §2.1 statistics (depth, gaps, prompt length, prefix reuse)");
  stats->add_option("file", *stats_path, "trace file, - for standard input")->required();
  stats->add_flag("--json", *stats_json, "one JSON object instead of a table");
  stats->add_flag("--by-model", *stats_by_model, "also split the statistics by model");
  stats->callback(
      [stats_path, stats_json, stats_by_model] { RunStats(*stats_path, *stats_json, *stats_by_model); });

  auto validate_path = std::make_shared<std::string>();
  auto* validate = trace->add_subcommand(
      "validate", "Check every record of a trace; print all problems with file, line and field");
  validate->add_option("file", *validate_path, "trace file, - for standard input")->required();
  validate->callback([validate_path] {
    const Trace t = ReadTraceFile(*validate_path);
    std::printf("%s: ok, %zu calls in %zu sessions\n", validate_path->c_str(), t.calls.size(),
                GroupSessions(t).size());
  });
}

}  // namespace talaria::cli
