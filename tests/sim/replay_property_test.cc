// Property test: random small workloads on random small clusters, every
// router and every ablation. Whatever the mix, every call completes (the
// replay checks it never stalls), HBM stays under the cap, and the run is
// deterministic. Found a real stall once (a closed slot on an idle model with
// another model's work queued); kept to catch the next one.
#include <gtest/gtest.h>

#include "core/random.h"
#include "sim/replay.h"
#include "trace/generator.h"

namespace talaria {
namespace {

const std::string kRoot = TALARIA_SOURCE_DIR;

TEST(ReplayPropertyTest, RandomWorkloadsAlwaysCompleteWithinHbm) {
  const ProfileSet profiles = ProfileSet::LoadDirectory(kRoot + "/profiles");
  const std::vector<std::string> models = {"qwen3-32b", "qwen2.5-32b-instruct", "qwen3.5-35b-a3b"};
  const RouterPolicy policies[] = {RouterPolicy::kFull, RouterPolicy::kLeastPressure,
                                   RouterPolicy::kSessionSticky, RouterPolicy::kRoundRobin,
                                   RouterPolicy::kPrefixAware};
  Rng rng(2026);
  std::int64_t total_calls = 0;
  for (int round = 0; round < 40; ++round) {
    SCOPED_TRACE("round " + std::to_string(round));
    GeneratorOptions g;
    g.seed = rng.NextU64() & 0xffff;
    g.sessions = static_cast<std::int32_t>(rng.UniformInt(3, 20));
    g.models = models;
    g.session_rate_per_s = rng.Uniform(0.1, 2.0);
    g.max_context_tokens = 60000;
    g.calls_per_session = {{0.0, 1}, {0.5, 4}, {0.95, 10}, {1.0, 16}};  // small sessions
    const Trace trace = GenerateSessions(g);

    ClusterConfig cluster;
    cluster.source = "property";
    cluster.router.policy = policies[rng.UniformInt(0, 4)];
    cluster.router.lease_tau_s = rng.Uniform(0, 3);
    cluster.router.admission_control = rng.Bernoulli(0.5);
    cluster.overload_max_wait_s = 1e6;  // nothing may be rejected: all must complete
    const auto instances = rng.UniformInt(1, 3);
    for (std::int64_t i = 0; i < instances; ++i) {
      InstanceConfig ic;
      ic.name = "w" + std::to_string(i);
      ic.tp = 4;
      ic.models = models;
      ic.pool = Pool::kCold;
      if (rng.Bernoulli(0.5)) {
        ic.max_resident = 2;
        ic.resident = {models[static_cast<std::size_t>(i % 3)]};
      }
      ic.ttft_target_s = rng.Uniform(2, 40);
      ic.host_kv_gib_per_rank = rng.Bernoulli(0.3) ? 1.0 : 64.0;  // sometimes tight
      ic.slot_hold_s = rng.Bernoulli(0.5) ? 1.0 : 0.0;
      ic.staging_chunk_mib = rng.Bernoulli(0.5) ? 256 : 1024;
      ic.ablation = {rng.Bernoulli(0.5), rng.Bernoulli(0.5), rng.Bernoulli(0.5)};
      cluster.instances.push_back(ic);
    }
    if (rng.Bernoulli(0.4)) {  // a hot instance pinning one model beside the cold pool
      InstanceConfig hot;
      hot.name = "hot";
      hot.tp = 4;
      hot.pool = Pool::kHot;
      hot.models = {models[static_cast<std::size_t>(rng.UniformInt(0, 2))]};
      cluster.instances.push_back(hot);
    }
    const ReplayResult a = RunReplay("property", cluster, profiles, trace, {});
    EXPECT_EQ(a.calls_completed, static_cast<std::int64_t>(trace.calls.size()));
    EXPECT_EQ(a.rejected, 0);
    EXPECT_LE(a.hbm_peak_bytes, a.hbm_cap_bytes);
    const ReplayResult b = RunReplay("property", cluster, profiles, trace, {});
    EXPECT_EQ(a.ToJson().dump(), b.ToJson().dump());
    total_calls += a.calls_completed;
  }
  EXPECT_GT(total_calls, 1000);  // the rounds did real work
}

}  // namespace
}  // namespace talaria
