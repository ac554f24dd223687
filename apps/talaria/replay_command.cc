// talaria replay: the closed-loop fixed replay over a simulated cluster.
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "commands.h"
#include "core/error.h"
#include "core/units.h"
#include "sim/cluster_config.h"
#include "sim/replay.h"
#include "trace/trace.h"

namespace talaria::cli {
namespace {

struct ReplayArgs {
  std::string cluster = "configs/tp8-three-models.toml";
  std::string trace = "traces/swe-fixed-30.jsonl";
  std::string ablations = "all";
  std::string json_path;
  std::string records_dir;
  double gap_cap_s = 10.0;
  bool quiet = false;
};

std::vector<std::string> ParseAblations(const std::string& spec) {
  if (spec == "all") return AblationNames();
  std::vector<std::string> out;
  std::size_t start = 0;
  while (start <= spec.size()) {
    auto comma = spec.find(',', start);
    if (comma == std::string::npos) comma = spec.size();
    std::string name = spec.substr(start, comma - start);
    Ablation unused;
    if (!AblationByName(name, unused)) {
      throw InputError("--ablations", "unknown configuration '" + name +
                                          "' (choose all, or a list of talaria, no-sp, no-hkvr, "
                                          "h2d-only, round-only)");
    }
    out.push_back(name);
    start = comma + 1;
  }
  return out;
}

void PrintRow(const ReplayResult& r) {
  auto pct = [](const Sample& s, double q) { return s.empty() ? 0.0 : s.Percentile(q); };
  const auto path = [&](const char* p) {
    auto it = r.switch_paths.find(p);
    return it == r.switch_paths.end() ? 0LL : static_cast<long long>(it->second);
  };
  std::printf("%-11s %8lld/%-5lld %7.1f %7.1f %6.2f %6.2f %6.0f %6.0f %4lld/%lld/%-4lld %6.1f%% %6lld %5.1f/%3.0f %6lld %6lld %5lld\n",
              r.config.c_str(), static_cast<long long>(r.calls_completed),
              static_cast<long long>(r.calls_total), pct(r.sct_s, 50), pct(r.sct_s, 95),
              pct(r.ttft_s, 50), pct(r.ttft_s, 95), pct(r.switch_ms, 50), pct(r.switch_ms, 95),
              path("d2d"), path("partial"), path("h2d"), 100 * r.switch_share(),
              static_cast<long long>(r.rounds), ToGiB(r.hbm_peak_bytes), ToGiB(r.hbm_cap_bytes),
              static_cast<long long>(r.counters.sp_admitted),
              static_cast<long long>(r.counters.sp_deferred),
              static_cast<long long>(r.counters.host_capacity_misses));
}

void RunReplayCommand(const ReplayArgs& a) {
  const ClusterConfig cluster = LoadClusterConfig(a.cluster);
  const ProfileSet profiles = ProfileSet::LoadDirectory(cluster.profiles_dir);
  const Trace trace = ReadTraceFile(a.trace);
  const auto names = ParseAblations(a.ablations);
  if (!a.quiet) {
    std::printf("replay of %s on %s (%zu calls; gap cap %.1f s; deterministic: no random draws)\n",
                a.trace.c_str(), a.cluster.c_str(), trace.calls.size(), a.gap_cap_s);
    std::printf("%-11s %14s %7s %7s %6s %6s %6s %6s %-12s %7s %6s %9s %6s %6s %5s\n", "config",
                "calls", "SCTp50", "SCTp95", "TTFT50", "TTFT95", "SW50ms", "SW95ms",
                "d2d/part/h2d", "sw shr", "rounds", "HBM GiB", "SP adm", "SP def", "hmiss");
  }
  nlohmann::ordered_json runs = nlohmann::ordered_json::array();
  for (const auto& name : names) {
    ClusterConfig c = cluster;
    Ablation ab;
    AblationByName(name, ab);
    for (auto& ic : c.instances) ic.ablation = ab;
    ReplayOptions options;
    options.gap_cap_s = a.gap_cap_s;
    if (!a.records_dir.empty()) options.records_dir = a.records_dir + "/" + name;
    const auto wall_start = std::chrono::steady_clock::now();
    options.progress = [&](std::int64_t done, std::int64_t total) {
      const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - wall_start).count();
      if (wall > 1.0 && !a.quiet) {
        std::fprintf(stderr, "\r%s: %lld/%lld calls", name.c_str(), static_cast<long long>(done),
                     static_cast<long long>(total));
      }
    };
    const ReplayResult r = RunReplay(name, c, profiles, trace, options);
    const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - wall_start).count();
    if (wall > 1.0 && !a.quiet) std::fprintf(stderr, "\r%s: done in %.1f s\n", name.c_str(), wall);
    if (!a.quiet) PrintRow(r);
    runs.push_back(r.ToJson());
  }
  if (!a.json_path.empty()) {
    nlohmann::ordered_json out;
    out["cluster"] = a.cluster;
    out["trace"] = a.trace;
    out["gap_cap_s"] = a.gap_cap_s;
    out["runs"] = runs;
    std::ofstream f(a.json_path);
    if (!f) throw InputError(a.json_path, "cannot write the JSON summary");
    f << out.dump(2) << '\n';
  }
}

}  // namespace

void AddReplayCommand(CLI::App& app) {
  auto args = std::make_shared<ReplayArgs>();
  auto* cmd = app.add_subcommand(
      "replay", "Closed-loop fixed replay of a session trace over a simulated cluster "
                "(virtual time, sim engine: a model of the GPUs, not GPUs)");
  cmd->add_option("--cluster", args->cluster, "cluster config (docs/cluster-config.md)")
      ->capture_default_str();
  cmd->add_option("--trace", args->trace, "session trace (docs/trace-format.md), - for stdin")
      ->capture_default_str();
  cmd->add_option("--ablations", args->ablations,
                  "all, or a comma-separated list of talaria, no-sp, no-hkvr, h2d-only, round-only")
      ->capture_default_str();
  cmd->add_option("--gap-cap", args->gap_cap_s, "cap on recorded tool gaps, seconds")
      ->capture_default_str();
  cmd->add_option("--json", args->json_path, "write the summary {\"runs\": [...]} to this file");
  cmd->add_option("--records", args->records_dir,
                  "write per-call, per-round and per-switch JSONL under DIR/<config>/");
  cmd->add_flag("-q,--quiet", args->quiet, "print nothing but errors");
  cmd->callback([args] { RunReplayCommand(*args); });
}

}  // namespace talaria::cli
