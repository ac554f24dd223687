// CPU reference model decode throughput against the memory-bandwidth bound
// of this machine, measured side by side in one run: each decode step reads
// every weight once, so tokens/s cannot exceed (copy bandwidth) / (weight
// bytes) for one sequence. Issue 6's target: >= 50% of that bound. Also the
// host KV restore against memcpy, and a staged switch against an H2D one.
#include <benchmark/benchmark.h>

#include <chrono>
#include <cstring>
#include <numeric>
#include <vector>

#include "core/units.h"
#include "engine/cpu_engine.h"
#include "engine/cpu_model.h"
#include "engine/cpu_profile.h"
#include "memory/hbm_layout.h"
#include "memory/host_kv_store.h"
#include "memory/kv_pool.h"
#include "memory/stager.h"

namespace talaria {
namespace {

// The 24 M-parameter catalogue model: 97.6 MB of fp32 weights.
CpuModelConfig BenchModel() {
  CpuModelConfig c;
  CpuModelByName("cpu-24m", c);
  c.max_context = 2048;
  return c;
}

void BM_CpuDecode(benchmark::State& state) {
  const auto batch = static_cast<std::int32_t>(state.range(0));
  const CpuModelConfig config = BenchModel();
  CpuModel model(config, SeededWeights(config, 1));
  constexpr std::int32_t kBlock = 16, kPrompt = 128;
  const std::int32_t blocks_per_seq = config.max_context / kBlock;
  KvArena kv(config, kBlock, blocks_per_seq * batch);
  std::vector<std::vector<std::int32_t>> tables(static_cast<std::size_t>(batch));
  std::vector<std::vector<std::int32_t>> tokens(static_cast<std::size_t>(batch));
  std::vector<SeqChunk> chunks(static_cast<std::size_t>(batch));
  std::vector<float> logits;
  for (std::int32_t s = 0; s < batch; ++s) {
    auto& table = tables[static_cast<std::size_t>(s)];
    table.resize(static_cast<std::size_t>(blocks_per_seq));
    std::iota(table.begin(), table.end(), s * blocks_per_seq);
    auto& t = tokens[static_cast<std::size_t>(s)];
    for (std::int32_t i = 0; i < kPrompt; ++i) t.push_back(3 + (i * 31 + s) % 256);
    SeqChunk c{t, 0, table};
    model.Forward(std::span(&c, 1), kv, logits);  // prefill, outside the timing
  }
  std::int64_t pos = kPrompt;
  std::vector<std::int32_t> next(static_cast<std::size_t>(batch), 3);
  const auto start = std::chrono::steady_clock::now();
  for (auto _ : state) {
    if (pos + 1 >= config.max_context) pos = kPrompt;  // wrap: context stays bounded
    for (std::int32_t s = 0; s < batch; ++s) {
      chunks[static_cast<std::size_t>(s)] = SeqChunk{std::span(&next[static_cast<std::size_t>(s)], 1), pos,
                                                     tables[static_cast<std::size_t>(s)]};
    }
    model.Forward(chunks, kv, logits);
    for (std::int32_t s = 0; s < batch; ++s) {
      next[static_cast<std::size_t>(s)] =
          CpuModel::Argmax(std::span(logits).subspan(static_cast<std::size_t>(s) * config.vocab, config.vocab));
    }
    ++pos;
  }
  const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const double steps_per_s = static_cast<double>(state.iterations()) / elapsed;
  const double bw = MeasureCopyBytesPerSecond(static_cast<std::size_t>(model.weight_bytes()));
  // One step reads every weight once: at most bw / weight_bytes steps/s.
  const double bound = bw / static_cast<double>(model.weight_bytes());
  state.SetItemsProcessed(state.iterations() * batch);
  state.counters["weight_MB"] = static_cast<double>(model.weight_bytes()) / 1e6;
  state.counters["copy_GBps"] = bw / 1e9;
  state.counters["steps_per_s"] = steps_per_s;
  state.counters["bound_steps_per_s"] = bound;
  state.counters["of_bound"] = steps_per_s / bound;
}
BENCHMARK(BM_CpuDecode)->Arg(1)->Arg(8)->Unit(benchmark::kMillisecond)->MinTime(2.0);

// HKVR restore (H2D: host slab -> device arena block, hash-checked) against
// plain memcpy of the same bytes, side by side in one run. Issue 6's target:
// restore >= 80% of memcpy GB/s.
void BM_HostKvRestore(benchmark::State& state) {
  const CpuModelConfig config = BenchModel();
  constexpr std::int32_t kBlocks = 512;
  KvArena device(config, 16, kBlocks);
  for (std::int32_t b = 0; b < kBlocks; ++b) std::memset(device.Block(b), b & 0xff, device.block_bytes());
  HostKvStore store(device.block_bytes(), kBlocks);
  std::vector<HostKvStore::Slot> slots;
  for (std::int32_t b = 0; b < kBlocks; ++b) slots.push_back(store.Put(device.Block(b)));
  const double bytes = static_cast<double>(device.block_bytes()) * kBlocks;
  double restore_s = 0, memcpy_s = 0;
  std::vector<char> host(static_cast<std::size_t>(bytes));
  for (auto _ : state) {
    auto t0 = std::chrono::steady_clock::now();
    for (std::int32_t b = 0; b < kBlocks; ++b) {
      if (!store.Get(slots[static_cast<std::size_t>(b)], device.Block(b))) state.SkipWithError("hash mismatch");
    }
    auto t1 = std::chrono::steady_clock::now();
    for (std::int32_t b = 0; b < kBlocks; ++b) {
      std::memcpy(device.Block(b), host.data() + static_cast<std::size_t>(b) * device.block_bytes(), device.block_bytes());
    }
    auto t2 = std::chrono::steady_clock::now();
    benchmark::DoNotOptimize(device.Block(0));
    restore_s += std::chrono::duration<double>(t1 - t0).count();
    memcpy_s += std::chrono::duration<double>(t2 - t1).count();
  }
  const double n = static_cast<double>(state.iterations());
  state.counters["block_KB"] = static_cast<double>(device.block_bytes()) / 1024;
  state.counters["restore_GBps"] = bytes * n / restore_s / 1e9;
  state.counters["memcpy_GBps"] = bytes * n / memcpy_s / 1e9;
  state.counters["restore_of_memcpy"] = memcpy_s / restore_s;
}
BENCHMARK(BM_HostKvRestore)->Unit(benchmark::kMillisecond)->MinTime(2.0);

// A model switch on the CPU engine, staged against unstaged, for the same
// target model (cpu-83m, 332 MB of weights), alternating in one run: the
// staged switch gathers every chunk device to device from the KV region
// (the stager has staged them all); the H2D switch copies the weights from
// host memory. Both are memcpy on a CPU, so uncapped they cost the same;
// with arg d > 0 host<->device copies are held to this machine's copy
// bandwidth / d (an emulated link slower than device memory, as PCIe is
// slower than HBM), and the staged switch keeps device speed.
void BM_CpuSwitch(benchmark::State& state) {
  const auto divisor = static_cast<double>(state.range(0));
  CpuModelConfig a, b;
  CpuModelByName("cpu-24m", a);
  CpuModelByName("cpu-83m", b);
  const std::int64_t a_bytes = a.WeightBytes(), b_bytes = b.WeightBytes();
  HbmLayout::Options lo;
  lo.arena_bytes = b_bytes + b_bytes + 256 * kMiB;  // weights, then a KV region that holds b staged
  lo.runtime_bytes = lo.graph_pool_bytes = 16 * kMiB;
  HbmLayout layout(lo);
  layout.AddModel(a.name, a_bytes);
  layout.AddModel(b.name, b_bytes);
  KvPool pool;
  layout.Activate(a.name);
  pool.Format(layout.kv(), a.KvBlockBytes(16));
  Stager stager(8 * kMiB, 1e12);
  stager.Begin(b.name, b_bytes, TimePoint{}, pool);
  stager.AdvanceTo(TimePoint(FromSeconds(100)), pool);
  CpuEngineOptions o;
  o.host_kv_bytes = 64 * kMiB;
  const double copy_bps = MeasureCopyBytesPerSecond(static_cast<std::size_t>(b_bytes));
  o.link_gbps = divisor > 0 ? copy_bps / divisor / 1e9 : 0;
  CpuEngine engine({a, b}, o);
  engine.Attach(Substrate{&layout, &pool, &stager, 16});
  ModelProfile pa, pb;
  pa.name = a.name, pa.weight_bytes_per_rank = a_bytes;
  pb.name = b.name, pb.weight_bytes_per_rank = b_bytes;
  const auto all_h2d = [](const std::string& m, std::int64_t bytes) {
    GatherPlan p;
    p.model = m, p.weight_bytes = p.h2d_bytes = bytes;
    return p;
  };
  const auto to = [&](const ModelProfile& from, const ModelProfile& target, const CpuModelConfig& c, GatherPlan plan) {
    layout.Activate(target.name);
    pool.Format(layout.kv(), c.KvBlockBytes(16));
    return engine.Switch(SwitchStep{&from, &target, plan, {}, false, 0}).open_weights_s;
  };
  // Warm-up: the staged chunks are written into the KV region once.
  to(pa, pb, b, stager.Plan(b.name, b_bytes));
  to(pb, pa, a, all_h2d(a.name, a_bytes));
  double staged_s = 0, h2d_s = 0;
  for (auto _ : state) {
    staged_s += to(pa, pb, b, stager.Plan(b.name, b_bytes));
    to(pb, pa, a, all_h2d(a.name, a_bytes));
    h2d_s += to(pa, pb, b, all_h2d(b.name, b_bytes));
    to(pb, pa, a, all_h2d(a.name, a_bytes));
  }
  if (stager.Plan(b.name, b_bytes).path != SwitchPath::kD2d) state.SkipWithError("b was not fully staged");
  const double n = static_cast<double>(state.iterations());
  state.counters["weights_MB"] = static_cast<double>(b_bytes) / 1e6;
  state.counters["link_GBps"] = o.link_gbps > 0 ? o.link_gbps : copy_bps / 1e9;
  state.counters["staged_ms"] = staged_s / n * 1e3;
  state.counters["h2d_ms"] = h2d_s / n * 1e3;
  state.counters["h2d_over_staged"] = h2d_s / staged_s;
}
BENCHMARK(BM_CpuSwitch)->Arg(0)->Arg(8)->Unit(benchmark::kMillisecond)->Iterations(5);

}  // namespace
}  // namespace talaria
