// CPU reference model decode throughput against the memory-bandwidth bound
// of this machine, measured side by side in one run: each decode step reads
// every weight once, so tokens/s cannot exceed (copy bandwidth) / (weight
// bytes) for one sequence. Issue 6's target: >= 50% of that bound.
#include <benchmark/benchmark.h>

#include <chrono>
#include <cstring>
#include <numeric>
#include <vector>

#include "engine/cpu_model.h"

namespace talaria {
namespace {

CpuModelConfig BenchModel() {
  CpuModelConfig c;
  c.name = "cpu-24m";
  c.hidden = 512;
  c.layers = 8;
  c.heads = 8;
  c.kv_heads = 2;
  c.ffn = 1536;
  c.max_context = 2048;
  return c;
}

// Bytes per second of a plain memcpy of `bytes`, best of a few.
double CopyBandwidth(std::size_t bytes) {
  std::vector<char> src(bytes, 1), dst(bytes, 0);
  double best = 0;
  for (int i = 0; i < 10; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    std::memcpy(dst.data(), src.data(), bytes);
    benchmark::DoNotOptimize(dst.data());
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    best = std::max(best, static_cast<double>(bytes) / s);
  }
  return best;
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
  const double bw = CopyBandwidth(static_cast<std::size_t>(model.weight_bytes()));
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

}  // namespace
}  // namespace talaria
