// Cluster-scale replay: many TP=4 cold instances and many sessions in
// virtual time, with the full router and heartbeats. Prints calls simulated
// per second of wall time. Issue 22 item 4's target: 1,024 instances and
// 100,000 sessions (about 1.87 million calls at this trace shape) in 20 s or
// less, ~93,000 calls/s, under 1 GB resident; the benchmark also runs smaller
// points and the 4,096 / 400,000 one (minutes, several GB).
// It also reports the process's peak resident set so far (max_rss_MB): run
// one point per process (--benchmark_filter) for that point's own peak.
#include <sys/resource.h>

#include <benchmark/benchmark.h>

#include "profile/profile.h"
#include "config/cluster_config.h"
#include "sim/replay.h"
#include "trace/generator.h"

namespace talaria {
namespace {

void BM_ClusterReplay(benchmark::State& state) {
  const auto instances = static_cast<int>(state.range(0));
  const auto sessions = static_cast<int>(state.range(1));
  const ProfileSet profiles = ProfileSet::LoadDirectory(std::string(TALARIA_SOURCE_DIR) + "/profiles");
  ClusterConfig cluster;
  cluster.source = "bench";
  cluster.heartbeat_s = 1.0;
  for (int i = 0; i < instances; ++i) {
    InstanceConfig ic;
    ic.name = "w" + std::to_string(i);
    ic.tp = 4;
    ic.models = {"qwen3-32b", "qwen2.5-32b-instruct", "qwen3.5-35b-a3b"};
    cluster.instances.push_back(ic);
  }
  GeneratorOptions o;
  o.sessions = sessions;
  o.models = {"qwen3-32b", "qwen2.5-32b-instruct", "qwen3.5-35b-a3b"};
  o.session_rate_per_s = instances * 0.05;  // keep per-instance offered load constant
  o.max_context_tokens = 120000;
  const Trace trace = GenerateSessions(o);
  std::int64_t calls = 0;
  for (auto _ : state) {
    const ReplayResult r = RunReplay("talaria", cluster, profiles, trace, {});
    calls += r.calls_completed;
  }
  state.SetItemsProcessed(calls);
  state.counters["calls"] = static_cast<double>(trace.calls.size());
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  state.counters["max_rss_MB"] = static_cast<double>(usage.ru_maxrss) / 1024.0;  // ru_maxrss is in KiB
}
BENCHMARK(BM_ClusterReplay)->Args({8, 200})->Args({32, 500})->Args({64, 2000})->Args({256, 8000})->Args({1024, 20000})->Args({1024, 100000})->Args({4096, 400000})->Unit(benchmark::kSecond)->Iterations(1);

}  // namespace
}  // namespace talaria
