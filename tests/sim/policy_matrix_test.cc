// The policy matrix's invariants (bench/policy-matrix.sh, docs/policy-matrix.md)
// on small instances of every workload family: on the TP=4 routing testbed,
// at three loads, the full router completes every call any baseline
// completes, and rejects none where every baseline completes every call.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "sim/replay.h"
#include "trace/generator.h"

namespace talaria {
namespace {

const std::string kRoot = TALARIA_SOURCE_DIR;

struct FamilyLoad {
  std::string family;
  double start_scale;
  friend void PrintTo(const FamilyLoad& f, std::ostream* os) { *os << f.family << " x" << f.start_scale; }
};

class PolicyMatrixTest : public ::testing::TestWithParam<FamilyLoad> {};

TEST_P(PolicyMatrixTest, TheFullRouterCompletesWhatAnyBaselineCompletes) {
  GeneratorOptions o;
  ASSERT_TRUE(PresetOptions(GetParam().family, o));
  o.sessions = 16;
  o.models = {"qwen3-32b", "qwen2.5-32b-instruct", "qwen3.5-35b-a3b"};
  const Trace trace = GeneratePreset(GetParam().family, o);
  ClusterConfig c = LoadClusterConfig(kRoot + "/configs/tp4-two-workers.toml");
  const ProfileSet profiles = ProfileSet::LoadDirectory(c.profiles_dir);
  ReplayOptions options;
  options.gap_cap_s = 300;
  options.start_scale = GetParam().start_scale;
  auto run = [&](RouterPolicy p) {
    c.router.policy = p;
    return RunReplay(ToString(p), c, profiles, trace, options);
  };
  const ReplayResult full = run(RouterPolicy::kFull);
  EXPECT_EQ(full.calls_completed + full.rejected, full.calls_total);  // nothing lost
  bool every_baseline_completes = true;
  for (RouterPolicy p : {RouterPolicy::kLeastPressure, RouterPolicy::kSessionSticky, RouterPolicy::kRoundRobin,
                         RouterPolicy::kPrefixAware}) {
    SCOPED_TRACE(ToString(p));
    const ReplayResult base = run(p);
    EXPECT_GE(full.calls_completed, base.calls_completed);
    every_baseline_completes = every_baseline_completes && base.calls_completed == base.calls_total;
  }
  if (every_baseline_completes) {
    EXPECT_EQ(full.rejected, 0);
  }
}

std::vector<FamilyLoad> Cases() {
  std::vector<FamilyLoad> cases;
  for (const char* f : {"agent-short", "long-gap-tools", "chat-paced", "burst", "flat-popularity", "steep-popularity"}) {
    for (double scale : {2.0, 1.0, 0.25}) cases.push_back({f, scale});  // low, medium, high load
  }
  return cases;
}

INSTANTIATE_TEST_SUITE_P(Families, PolicyMatrixTest, ::testing::ValuesIn(Cases()),
                         [](const ::testing::TestParamInfo<FamilyLoad>& i) {
                           std::string name = i.param.family + (i.param.start_scale > 1    ? "_low"
                                                                 : i.param.start_scale == 1 ? "_medium"
                                                                                            : "_high");
                           for (char& ch : name) {
                             if (ch == '-') ch = '_';
                           }
                           return name;
                         });

}  // namespace
}  // namespace talaria
