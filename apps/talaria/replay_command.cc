// talaria replay: the closed-loop fixed replay over a simulated cluster.

#include <cstdlib>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "commands.h"
#include "progress.h"
#include "core/error.h"
#include "core/units.h"
#include "config/cluster_config.h"
#include "driver/agent_hints.h"
#include "report/report.h"
#include "server/http_replay.h"
#include "sim/offered_load.h"
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
  std::string routers;     // empty: the cluster config's [router] policy
  std::string loads = "medium";
  std::string lease_sweep;  // comma-separated tau values
  std::string target;       // http://HOST:PORT: replay against a live server
  std::string api_key;
  bool echo_output = false;
  double time_scale = 1.0;
  std::string hold;  // "", "fixed", "none" or "adaptive": every instance's [[instance]] hold
  std::string lease;  // "", "fixed" or "adaptive": the [router] lease
  bool lease_replica_check = false;  // sets the [router] lease_replica_check
  std::string lease_honour;          // "", "route" or "rank": the [router] lease_honour
  std::string hold_charges_decode;  // on | off: sets every instance's hold_charges_decode; empty: the config's
  std::string hold_within_share;    // on | off: sets every instance's hold_within_share; empty: the config's
  std::string report;  // write an HTML report here (talaria report) after the runs
  std::string hints = "trace";  // agent hints (driver/agent_hints.h)
};

std::vector<std::string> SplitList(const std::string& spec) {
  std::vector<std::string> out;
  std::size_t start = 0;
  while (start <= spec.size()) {
    auto comma = spec.find(',', start);
    if (comma == std::string::npos) comma = spec.size();
    out.push_back(spec.substr(start, comma - start));
    start = comma + 1;
  }
  return out;
}

// A load of the form PREFIX:V with V in (0, 100]: true with V set, false
// for any other prefix; throws on a malformed V.
bool PrefixedLoad(const std::string& load, std::string_view prefix, double& v) {
  if (load.size() <= prefix.size() || load.compare(0, prefix.size(), prefix) != 0 || load[prefix.size()] != ':') {
    return false;
  }
  const std::string text = load.substr(prefix.size() + 1);
  char* end = nullptr;
  v = std::strtod(text.c_str(), &end);
  if (text.empty() || end != text.c_str() + text.size() || !(v > 0) || !(v <= 100)) {
    throw InputError("--load", "'" + load + "': " + std::string(prefix) + " takes a number in (0, 100], e.g. " +
                                   std::string(prefix) + ":0.7");
  }
  return true;
}
bool UtilisationLoad(const std::string& load, double& u) { return PrefixedLoad(load, "util", u); }

// Offered load: session arrivals relative to the trace's recorded starts.
// False for a utilisation load (`u` set), whose scale its pilots measure.
bool LoadScale(const std::string& load, double& scale, double& u) {
  if (load == "low") return scale = 2.0, true;      // half the arrival rate
  if (load == "medium") return scale = 1.0, true;   // as recorded
  if (load == "high") return scale = 0.25, true;    // four times the arrival rate
  if (PrefixedLoad(load, "scale", scale)) return true;  // start offsets times S: arrivals at 1/S the rate
  if (UtilisationLoad(load, u)) return false;
  throw InputError("--load", "unknown load '" + load + "' (choose low, medium, high, util:U, scale:S or all)");
}

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

void PrintRoutingRow(const ReplayResult& r) {
  auto pct = [](const Sample& s, double q) { return s.empty() ? 0.0 : s.Percentile(q); };
  std::printf("%-15s %-7s %5.2f %8lld/%-4lld %6lld %6lld %7.1f%% %7.1f%% %6.2f %6.2f %6.2f %6.2f %7.1f %7.1f %6.1f%% %4lld\n",
              r.router.c_str(), r.load.c_str(), r.tau_s, static_cast<long long>(r.calls_completed),
              static_cast<long long>(r.calls_total), static_cast<long long>(r.avoidable_opens),
              static_cast<long long>(r.counters.model_opens), 100 * r.same_instance_return_rate(),
              100 * r.residency_hit_rate(), pct(r.ttft_s, 50), pct(r.ttft_s, 95),
              pct(r.returning_ttft_s, 50), pct(r.returning_ttft_s, 95), pct(r.sct_s, 50), pct(r.sct_s, 95),
              100 * r.unused_lease_proxy(), static_cast<long long>(r.rejected));
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

// The trace, its calls carrying the hints --hints asks for (the gaps as
// the replay releases them: --gap-cap applied).
Trace ReadTraceWithHints(const ReplayArgs& a) {
  Trace trace = ReadTraceFile(a.trace);
  ReleaseRule release;
  release.gap_cap_s = a.gap_cap_s;
  ApplyHints(trace, ParseHintOptions(a.hints), release);
  return trace;
}

// The summary {"runs": [...]} to --json, and the HTML report to --report.
void WriteSummary(const ReplayArgs& a, const nlohmann::ordered_json& out) {
  if (!a.json_path.empty()) {
    std::ofstream f(a.json_path);
    if (!f) throw InputError(a.json_path, "cannot write the JSON summary");
    f << out.dump(2) << '\n';
  }
  if (!a.report.empty()) {
    ReportOptions report;
    report.loaded.push_back(ReportSummary{a.json_path.empty() ? "this replay" : a.json_path, nlohmann::json(out)});
    report.records_dir = a.records_dir;
    WriteReport(report, a.report);
    if (!a.quiet) std::fprintf(stderr, "talaria replay: wrote the report %s\n", a.report.c_str());
  }
}

void RunHttpReplay(const ReplayArgs& a) {
  const Trace trace = ReadTraceWithHints(a);
  HttpReplayOptions o;
  o.target = a.target;
  o.api_key = a.api_key;
  o.echo_output = a.echo_output;
  o.time_scale = a.time_scale;
  o.gap_cap_s = a.gap_cap_s;
  if (!a.records_dir.empty()) o.records_dir = a.records_dir + "/http";
  const ReplayResult r = ReplayOverHttp(trace, o);
  auto pct = [](const Sample& s, double q) { return s.empty() ? 0.0 : s.Percentile(q); };
  if (!a.quiet) {
    std::printf("replay of %s against %s (%zu calls; gap cap %.1f s; server time scale %g)\n", a.trace.c_str(),
                a.target.c_str(), trace.calls.size(), a.gap_cap_s, a.time_scale);
    std::printf("%-8s %14s %8s %8s %7s %7s %7s %7s %5s\n", "target", "calls", "SCTp50", "SCTp95", "TTFT50",
                "TTFT95", "RET50", "RET95", "rej");
    std::printf("%-8s %8lld/%-5lld %8.1f %8.1f %7.2f %7.2f %7.2f %7.2f %5lld\n", "http",
                static_cast<long long>(r.calls_completed), static_cast<long long>(r.calls_total),
                pct(r.sct_s, 50), pct(r.sct_s, 95), pct(r.ttft_s, 50), pct(r.ttft_s, 95),
                pct(r.returning_ttft_s, 50), pct(r.returning_ttft_s, 95), static_cast<long long>(r.rejected));
  }
  nlohmann::ordered_json out;
  out["target"] = a.target;
  out["trace"] = a.trace;
  out["gap_cap_s"] = a.gap_cap_s;
  out["hints"] = a.hints;
  nlohmann::ordered_json run = r.ToJson();
  run["label"] = "http";  // its records are under RECORDS/http/
  out["runs"] = nlohmann::ordered_json::array({std::move(run)});
  WriteSummary(a, out);
}

void RunReplayCommand(const ReplayArgs& a) {
  if (!a.target.empty()) return RunHttpReplay(a);
  ClusterConfig cluster = LoadClusterConfig(a.cluster);
  const ClusterConfig as_configured = cluster;  // a utilisation load's pilot runs on this
  for (auto& ic : cluster.instances) {
    if (a.hold == "none") {  // the fixed hold of length 0
      ic.hold = HoldPolicy::kFixed;
      ic.slot_hold_s = 0;
    } else if (!a.hold.empty()) {
      kHoldPolicies.Parse(a.hold, ic.hold);  // CLI11 checked the name
    }
    if (!a.hold_charges_decode.empty()) ic.hold_charges_decode = a.hold_charges_decode == "on";
    if (!a.hold_within_share.empty()) ic.hold_within_share = a.hold_within_share == "on";
  }
  if (!a.lease.empty()) kLeasePolicies.Parse(a.lease, cluster.router.lease);  // CLI11 checked the name
  if (a.lease_replica_check) cluster.router.lease_replica_check = true;
  if (!a.lease_honour.empty()) kLeaseHonours.Parse(a.lease_honour, cluster.router.lease_honour);
  const ProfileSet profiles = ProfileSet::LoadDirectory(cluster.profiles_dir);
  const Trace trace = ReadTraceWithHints(a);
  const auto names = ParseAblations(a.ablations);
  // Routing experiments: any of --router, --load other than medium, or a sweep.
  const bool routing = !a.routers.empty() || a.loads != "medium" || !a.lease_sweep.empty();
  std::vector<RouterPolicy> routers;
  if (a.routers.empty()) {
    routers.push_back(cluster.router.policy);
  } else {
    for (const auto& r : SplitList(a.routers == "all" ? "full,least-pressure,session-sticky,round-robin,prefix-aware" : a.routers)) {
      RouterPolicy p;
      if (!ParseRouterPolicy(r, p)) {
        throw InputError("--router", "unknown router '" + r +
                                         "' (choose full, least-pressure, session-sticky, round-robin, prefix-aware or all)");
      }
      routers.push_back(p);
    }
  }
  const auto loads = SplitList(a.loads == "all" ? "low,medium,high" : a.loads);
  // Every load's scale, before anything runs. A utilisation load's is
  // measured on the config file's own settings and the trace without
  // agent hints, so every configuration, hold, lease and hint mode compared
  // at util:U sees the same arrivals (sim/offered_load.h).
  std::map<std::string, double> scales;
  std::vector<std::string> util_loads;
  std::vector<double> utilisations;
  for (const auto& l : loads) {
    double scale = 1, u = 0;
    if (LoadScale(l, scale, u)) {
      scales[l] = scale;
    } else if (!scales.contains(l)) {
      scales[l] = 1;  // set below
      util_loads.push_back(l);
      utilisations.push_back(u);
    }
  }
  const auto measured = ScalesForUtilisations(as_configured, profiles, trace, a.gap_cap_s, utilisations);
  for (std::size_t i = 0; i < measured.size(); ++i) {
    scales[util_loads[i]] = measured[i].start_scale;
    if (!a.quiet) {
      std::fprintf(stderr, "talaria replay: %s: start scale %.4g (utilisation %.3f after %d pilot replays)\n",
                   util_loads[i].c_str(), measured[i].start_scale, measured[i].realised, measured[i].pilots);
    }
  }
  std::vector<double> taus;
  if (a.lease_sweep.empty()) {
    taus.push_back(cluster.router.lease_tau_s);
  } else {
    for (const auto& t : SplitList(a.lease_sweep)) {
      char* end = nullptr;
      const double v = std::strtod(t.c_str(), &end);
      if (t.empty() || end != t.c_str() + t.size() || !(v >= 0)) {
        throw InputError("--lease-sweep", "'" + t + "' is not a lease timeout in seconds (>= 0)");
      }
      taus.push_back(v);
    }
  }
  if (!a.quiet) {
    std::printf("replay of %s on %s (%zu calls; gap cap %.1f s; heartbeat %.2f s; deterministic)\n",
                a.trace.c_str(), a.cluster.c_str(), trace.calls.size(), a.gap_cap_s, cluster.heartbeat_s);
    if (routing) {
      std::printf("%-15s %-7s %5s %13s %6s %6s %8s %8s %6s %6s %6s %6s %7s %7s %7s %4s\n", "router", "load",
                  "tau", "calls", "avoid", "opens", "same-in", "resid", "TTFT50", "TTFT95", "RET50",
                  "RET95", "SCT50", "SCT95", "unused", "rej");
    } else {
      std::printf("%-11s %14s %7s %7s %6s %6s %6s %6s %-12s %7s %6s %9s %6s %6s %5s\n", "config",
                  "calls", "SCTp50", "SCTp95", "TTFT50", "TTFT95", "SW50ms", "SW95ms",
                  "d2d/part/h2d", "sw shr", "rounds", "HBM GiB", "SP adm", "SP def", "hmiss");
    }
  }
  nlohmann::ordered_json runs = nlohmann::ordered_json::array();
  const std::size_t run_count = names.size() * routers.size() * loads.size() * taus.size();
  std::size_t run_index = 0;
  for (const auto& name : names) {
    for (RouterPolicy policy : routers) {
      for (const auto& load : loads) {
        for (double tau : taus) {
          ClusterConfig c = cluster;
          Ablation ab;
          AblationByName(name, ab);
          for (auto& ic : c.instances) ic.ablation = ab;
          ReplayOptions options;
          options.gap_cap_s = a.gap_cap_s;
          c.router.policy = policy;
          c.router.lease_tau_s = tau;
          options.start_scale = scales.at(load);
          std::string label = name;
          if (routing) {
            char tau_text[32];
            std::snprintf(tau_text, sizeof tau_text, "%g", tau);
            label += std::string("_") + ToString(policy) + "_" + load + "_tau" + tau_text;
          }
          if (!a.records_dir.empty()) options.records_dir = a.records_dir + "/" + label;
          // Progress on stderr (apps/talaria/progress.h); a sweep numbers its runs.
          ++run_index;
          const std::string what =
              run_count > 1 ? "[" + std::to_string(run_index) + "/" + std::to_string(run_count) + "] " + label : label;
          ProgressReporter progress(what, "calls", a.quiet);
          options.progress = [&](std::int64_t done, std::int64_t total) { progress.Update(done, total); };
          ReplayResult r = RunReplay(name, c, profiles, trace, options);
          r.load = load;
          progress.Finish();
          if (!a.quiet) routing ? PrintRoutingRow(r) : PrintRow(r);
          nlohmann::ordered_json run = r.ToJson();
          run["label"] = label;  // its records are under RECORDS/<label>/
          run["start_scale"] = options.start_scale;
          runs.push_back(std::move(run));
        }
      }
    }
  }
  nlohmann::ordered_json out;
  out["cluster"] = a.cluster;
  out["trace"] = a.trace;
  out["gap_cap_s"] = a.gap_cap_s;
  out["hints"] = a.hints;
  out["runs"] = runs;
  WriteSummary(a, out);
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
                  "write per-call, per-round and per-switch JSONL under DIR/<config>/ (with --target: per-call "
                  "records, under DIR/http/)");
  cmd->add_option("--router", args->routers,
                  "full, least-pressure, session-sticky, round-robin, prefix-aware, a comma list, or "
                  "all (default: the cluster config's [router] policy)");
  cmd->add_option("--load", args->loads,
                  "offered load: low (half the trace's session arrival rate), medium (as recorded), "
                  "high (four times), util:U (arrivals scaled so the trace's work, measured by pilot replays "
                  "at the recorded rate, fills U of the instances over the arrival window; docs/replay.md), "
                  "scale:S (session start offsets times S, as a utilisation load's run reports in start_scale), "
                  "a comma list, or all (low, medium, high)")
      ->capture_default_str();
  cmd->add_option("--hold", args->hold,
                  "slot holds of every instance, overriding the config's `hold`: fixed (slot_hold_s after a "
                  "finish, the paper's), none (fixed with slot_hold_s = 0) or adaptive (as long as the expected "
                  "saving beats the cost; docs/cluster-config.md)")
      ->check(CLI::IsMember([] {
        std::vector<std::string> names = kHoldPolicies.Names();
        names.emplace_back("none");
        return names;
      }()));
  cmd->add_option("--hold-charges-decode", args->hold_charges_decode,
                  "adaptive holds' service accounting, overriding every instance's hold_charges_decode: on "
                  "(charge a caught return's lone decode and the decodes of the returns that join it by SP; "
                  "credit its readmission and what those joiners save) or off (the hold's length only; "
                  "docs/cluster-config.md)")
      ->check(CLI::IsMember({"on", "off"}));
  cmd->add_option("--hold-within-share", args->hold_within_share,
                  "adaptive holds' limit, overriding every instance's hold_within_share: on (the default: once "
                  "another model has work, a hold ends by the slot's place in the round's Eq.3 budget, shared by "
                  "the models that have work) or off (by the slot's end; docs/cluster-config.md)")
      ->check(CLI::IsMember({"on", "off"}));
  cmd->add_option("--lease", args->lease,
                  "successor leases, overriding the config's [router] `lease`: fixed (tau, the paper's) or "
                  "adaptive (until 95% of the session's learned returns have come, never past tau, charged by its "
                  "chance of use; docs/cluster-config.md)")
      ->check(CLI::IsMember(kLeasePolicies.Names()));
  cmd->add_option("--hints", args->hints,
                  "agent hints the calls carry: trace (what the trace's calls say), none, exact (each call's tool "
                  "time is the replayed gap to its session's next call; the last call says it ends the session) or "
                  "noisy:F (exact times a factor log-uniform in [1/F, F]); slot holds and the router's leases read them")
      ->capture_default_str();
  cmd->add_flag("--lease-replica-check", args->lease_replica_check,
               "discard a lease whose honouring would open its model for that call alone and close a model with "
               "work there, placing the call by cost (Eq.2) instead; sets the config's [router] "
               "lease_replica_check (docs/cluster-config.md)");
  cmd->add_option("--lease-honour", args->lease_honour,
                  "what a live lease does, overriding the config's [router] `lease_honour`: route (the return goes "
                  "to the lease's instance, the paper's) or rank (the default: the lease reserves admission there; cost "
                  "placement decides, Eq.5 waived at that instance; docs/cluster-config.md)")
      ->check(CLI::IsMember(kLeaseHonours.Names()));
  cmd->add_option("--lease-sweep", args->lease_sweep,
                  "comma-separated lease timeouts tau in seconds, one run each (e.g. 0,0.5,1,2,5)");
  cmd->add_option("--target", args->target,
                  "replay against a live OpenAI-compatible server at http://HOST:PORT instead of a "
                  "simulated cluster (same per-session rules; --cluster and --ablations are ignored)");
  cmd->add_option("--api-key", args->api_key, "bearer key for --target");
  cmd->add_flag("--echo-output", args->echo_output,
                "with --target: continue sessions on the server's generated text as byte tokens, so a byte-level "
                "server that generates (serve --engine cpu) sees the trace's reusable prefixes");
  cmd->add_option("--time-scale", args->time_scale,
                  "with --target: the server's emulated seconds per wall second")
      ->capture_default_str();
  cmd->add_option("--report", args->report,
                  "also write the HTML report of these runs (talaria report) to FILE; with --records, its Gantt "
                  "and memory plots too");
  cmd->add_flag("-q,--quiet", args->quiet, "print nothing but errors");
  cmd->callback([args] { RunReplayCommand(*args); });
}

}  // namespace talaria::cli
