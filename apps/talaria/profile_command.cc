// talaria profile show | measure
#include <cstdio>
#include <fstream>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "commands.h"
#include "progress.h"
#include "core/error.h"
#include "core/units.h"
#include "engine/cpu_profile.h"
#include "profile/profile.h"

namespace talaria::cli {
namespace {

struct ShowArgs {
  std::string dir = "profiles";
  std::vector<std::string> files;
  bool json = false;
};

std::vector<ModelProfile> Load(const ShowArgs& a) {
  std::vector<ModelProfile> out;
  if (!a.files.empty()) {
    for (const auto& f : a.files) out.push_back(LoadProfile(f));
    return out;
  }
  const ProfileSet set = ProfileSet::LoadDirectory(a.dir);
  for (const auto& [key, p] : set.all()) out.push_back(p);
  return out;
}

// The figures a reader checks a profile against: sizes and the paper's anchors.
nlohmann::ordered_json Summary(const ModelProfile& p) {
  nlohmann::ordered_json j;
  j["model"] = p.name;
  j["tp"] = p.tp;
  j["file"] = p.source;
  j["attention"] = ToString(p.family);
  j["weight_gib_per_rank"] = ToGiB(p.weight_bytes_per_rank);
  j["kv_bytes_per_token_per_rank"] = p.KvBytesPerTokenPerRank();
  j["recurrent_state_bytes_per_rank"] = p.RecurrentStateBytesPerRank();
  j["prefill_25k_s"] = p.PrefillSeconds(25000);
  j["prefill_100k_s"] = p.PrefillSeconds(100000);
  j["prefill_1k_after_24k_cached_s"] = p.PrefillSeconds(1000, 24000);
  j["decode_step_b1_32k_s"] = p.DecodeStepSeconds(1, 32768);
  j["open_weights_h2d_s"] = p.OpenWeightsSeconds(0);
  j["open_weights_d2d_s"] = p.OpenWeightsSeconds(p.weight_bytes_per_rank);
  j["kv_restore_25k_s"] = p.KvRestoreSeconds(25000);
  return j;
}

void RunShow(const ShowArgs& a) {
  const auto profiles = Load(a);
  if (a.json) {
    nlohmann::ordered_json out = nlohmann::ordered_json::array();
    for (const auto& p : profiles) out.push_back(Summary(p));
    std::cout << out.dump(2) << '\n';
    return;
  }
  std::printf("%-22s %3s %-7s %9s %9s %8s %8s %8s %8s %8s %9s\n", "model", "tp", "attn",
              "W GiB/rk", "KV B/tok", "pf 25K", "pf 100K", "dec b1", "open H2D", "open D2D",
              "rst 25K");
  for (const auto& p : profiles) {
    std::printf("%-22s %3d %-7s %9.2f %9lld %7.2fs %7.2fs %6.1fms %7.2fs %6.0fms %7.1fms\n",
                p.name.c_str(), p.tp, ToString(p.family), ToGiB(p.weight_bytes_per_rank),
                static_cast<long long>(p.KvBytesPerTokenPerRank()), p.PrefillSeconds(25000),
                p.PrefillSeconds(100000), 1e3 * p.DecodeStepSeconds(1, 32768),
                p.OpenWeightsSeconds(0), 1e3 * p.OpenWeightsSeconds(p.weight_bytes_per_rank),
                1e3 * p.KvRestoreSeconds(25000));
  }
}

struct MeasureArgs {
  std::string engine;
  std::string model;
  std::string out;
  double hbm_gib = 4;
  int repeats = 3;
  int decode_passes = CpuProfileOptions{}.decode_passes;
  std::int64_t max_tokens = 2048;
  bool quiet = false;
};

void RunMeasure(const MeasureArgs& a) {
  if (a.engine != "cpu") {
    throw InputError("--engine", "'" + a.engine +
                                     "' cannot be measured: only the cpu engine computes; the sim engine reads profiles");
  }
  CpuModelConfig config;
  if (!CpuModelByName(a.model, config)) {
    std::string names;
    for (const auto& c : CpuModelCatalog()) names += (names.empty() ? "" : ", ") + c.name;
    throw InputError("--model", "no cpu model '" + a.model + "' (there are: " + names + ")");
  }
  CpuProfileOptions o;
  o.hbm_gib = a.hbm_gib;
  o.repeats = a.repeats;
  o.decode_passes = a.decode_passes;
  std::erase_if(o.prefill_tokens, [&](std::int64_t n) { return n > a.max_tokens; });
  std::erase_if(o.decode_context, [&](std::int64_t n) { return n > a.max_tokens; });
  // A continuation's whole context (cached + new) stays within --max-tokens.
  std::erase_if(o.cached_tokens, [&](std::int64_t n) { return n + o.cached_new_tokens.front() > a.max_tokens; });
  if (!o.cached_tokens.empty()) {
    std::erase_if(o.cached_new_tokens, [&](std::int64_t n) { return n + o.cached_tokens.back() > a.max_tokens; });
  }
  if (o.prefill_tokens.empty() || o.decode_context.empty()) {
    throw InputError("--max-tokens", "leaves no prefill or decode point (the smallest are 16 and 64)");
  }
  ProgressReporter progress("measure " + a.model, "points", a.quiet);
  o.progress = [&](std::int64_t done, std::int64_t total) { progress.Update(done, total); };
  const std::string text = MeasureCpuProfile(config, o);
  progress.Finish();
  if (a.out.empty()) {
    std::fputs(text.c_str(), stdout);
    return;
  }
  std::ofstream out(a.out);
  out << text;
  if (!out) throw InputError("--out", "cannot write '" + a.out + "'");
  std::printf("wrote %s (profile of %s measured on this machine)\n", a.out.c_str(), a.model.c_str());
}

}  // namespace

void AddProfileCommand(CLI::App& app) {
  auto* profile = app.add_subcommand("profile", "Inspect model profiles (profiles/*.toml)");
  profile->require_subcommand(1);
  auto args = std::make_shared<ShowArgs>();
  auto* show = profile->add_subcommand(
      "show", "Load and validate profiles; print sizes and derived step times per model");
  show->add_option("files", args->files, "profile files (default: every *.toml in --dir)");
  show->add_option("--dir", args->dir, "profile directory")->capture_default_str();
  show->add_flag("--json", args->json, "a JSON array, one object per profile");
  show->callback([args] { RunShow(*args); });

  auto m = std::make_shared<MeasureArgs>();
  auto* measure = profile->add_subcommand(
      "measure", "Measure a model on a computing engine and write its profile (prefill and decode tables, copy "
                 "bandwidths, restore and switch costs) in the profiles/*.toml format");
  measure->add_option("--engine", m->engine, "engine to measure: cpu")->required();
  measure->add_option("--model", m->model, "cpu model: cpu-11m, cpu-24m or cpu-83m")->required();
  measure->add_option("--out", m->out, "profile file to write (default: standard output)");
  measure->add_option("--hbm-gib", m->hbm_gib, "emulated device memory the profile declares")->capture_default_str();
  measure->add_option("--repeats", m->repeats, "runs per point (the median is kept)")->capture_default_str()->check(CLI::Range(1, 100));
  measure
      ->add_option("--decode-passes", m->decode_passes,
                   "decode steps are measured in this many interleaved passes over the grid, the median kept (a "
                   "decode step runs at the memory bandwidth of the moment)")
      ->capture_default_str()
      ->check(CLI::Range(1, 1000));
  measure->add_option("--max-tokens", m->max_tokens, "largest prefill length and decode context measured")
      ->capture_default_str();
  measure->add_flag("-q,--quiet", m->quiet, "no progress on stderr");
  measure->callback([m] { RunMeasure(*m); });
}

}  // namespace talaria::cli
