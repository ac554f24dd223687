// A model switch that moves real bytes through the memory substrate: model
// A serves from one device arena (weights region + KV region) while model
// B's weights are staged, chunk by chunk, into the top of A's KV region; A's
// KV then overwrites some staged chunks (dirty); the switch gathers clean
// chunks device-to-device and reloads dirty ones from host. B, computing
// from the gathered device copy, must generate exactly what it generates
// from its host weights.
#include <gtest/gtest.h>

#include <cstring>
#include <numeric>
#include <vector>

#include "engine/cpu_model.h"
#include "engine/test_models.h"
#include "memory/kv_pool.h"
#include "memory/stager.h"

namespace talaria {
namespace {

std::vector<std::int32_t> Greedy(CpuModel& m, KvArena& kv, std::vector<std::int32_t> tokens,
                                 std::span<const std::int32_t> blocks, std::int32_t n) {
  std::vector<float> logits;
  SeqChunk c{tokens, 0, blocks};
  m.Forward(std::span(&c, 1), kv, logits);
  std::vector<std::int32_t> out;
  for (std::int32_t i = 0; i < n; ++i) {
    out.push_back(CpuModel::Argmax(logits));
    if (i + 1 == n) break;
    tokens.push_back(out.back());
    SeqChunk d{std::span(tokens).subspan(tokens.size() - 1), static_cast<std::int64_t>(tokens.size()) - 1, blocks};
    m.Forward(std::span(&d, 1), kv, logits);
  }
  return out;
}

std::vector<std::int32_t> Prompt(std::int32_t n) {
  std::vector<std::int32_t> p(static_cast<std::size_t>(n));
  for (std::int32_t i = 0; i < n; ++i) p[static_cast<std::size_t>(i)] = 3 + (i * 53) % 256;
  return p;
}

TEST(CpuSwitchTest, PartlyStagedPartlyReloadedWeightsGenerateExactly) {
  const CpuModelConfig ca = testing::TinyCpuModel("a", 64, 128), cb = testing::TinyCpuModel("b", 96, 192);
  CpuModel a(ca, SeededWeights(ca, 1)), b(cb, SeededWeights(cb, 2));
  constexpr std::int32_t kBlockTokens = 16;
  constexpr std::int64_t kChunk = 32 * 1024;
  // The device arena: a weight region big enough for either model, then KV.
  const std::int64_t weights = (std::max(a.weight_bytes(), b.weight_bytes()) + 63) / 64 * 64;
  const std::int64_t kv_bytes = 2 * b.weight_bytes();
  std::vector<std::byte> hbm(static_cast<std::size_t>(weights + kv_bytes));
  auto* weight_region = reinterpret_cast<float*>(hbm.data());

  // A is active: its weights copied in, its KV in the KV region's blocks.
  std::memcpy(weight_region, a.host_weights().data(), static_cast<std::size_t>(a.weight_bytes()));
  a.Bind(weight_region);
  KvArena a_kv(ca, kBlockTokens, std::span(hbm).subspan(static_cast<std::size_t>(weights)));
  KvPool pool;
  pool.Format({weights, weights + kv_bytes}, static_cast<std::int64_t>(a_kv.block_bytes()));
  ASSERT_EQ(pool.BlockRange(3).begin, weights + 3 * static_cast<std::int64_t>(a_kv.block_bytes()));

  // B's weights staged into the top of the KV region (the copy engine's
  // writes, done here as the stager completes them).
  Stager stager(kChunk, 1e9);
  stager.Begin("b", b.weight_bytes(), TimePoint{}, pool);
  stager.AdvanceTo(TimePoint(FromSeconds(10)), pool);
  const auto* host_b = reinterpret_cast<const std::byte*>(b.host_weights().data());
  for (std::size_t i = 0; i < stager.chunks().size(); ++i) {
    ASSERT_EQ(stager.chunks()[i], Stager::ChunkState::kClean);
    const Region r = stager.ChunkRange(i);
    std::memcpy(hbm.data() + r.begin, host_b + static_cast<std::int64_t>(i) * kChunk, static_cast<std::size_t>(r.size()));
  }

  // A's sessions grow into the staged rows: their KV overwrites some chunks.
  const std::int32_t take = pool.total_blocks() * 3 / 4;
  std::vector<BlockId> blocks;
  ASSERT_TRUE(pool.Allocate(take, blocks));
  stager.OnAllocated(blocks, pool);
  const std::vector<std::int32_t> top(blocks.end() - 40, blocks.end());  // the highest-addressed blocks
  const auto a_tokens = Greedy(a, a_kv, Prompt(300), top, 8);  // writes real KV bytes into them
  EXPECT_EQ(a_tokens.size(), 8u);

  // The switch: clean chunks device-to-device, dirty ones from host.
  const GatherPlan plan = stager.Plan("b", b.weight_bytes());
  ASSERT_EQ(plan.path, SwitchPath::kPartial);
  ASSERT_GT(plan.d2d_bytes, 0);
  ASSERT_GT(plan.h2d_bytes, 0);
  auto* dst = reinterpret_cast<std::byte*>(weight_region);
  std::vector<std::byte> naive(static_cast<std::size_t>(b.weight_bytes()));  // every chunk taken from device
  for (std::size_t i = 0; i < stager.chunks().size(); ++i) {
    const Region r = stager.ChunkRange(i);
    const auto offset = static_cast<std::size_t>(static_cast<std::int64_t>(i) * kChunk);
    std::memcpy(naive.data() + offset, hbm.data() + r.begin, static_cast<std::size_t>(r.size()));
    const std::byte* src = stager.chunks()[i] == Stager::ChunkState::kClean ? hbm.data() + r.begin : host_b + offset;
    std::memcpy(dst + offset, src, static_cast<std::size_t>(r.size()));
  }
  a.Bind(nullptr);
  b.Bind(weight_region);
  EXPECT_EQ(std::memcmp(weight_region, b.host_weights().data(), static_cast<std::size_t>(b.weight_bytes())), 0);
  EXPECT_NE(std::memcmp(naive.data(), b.host_weights().data(), naive.size()), 0)
      << "the dirty chunks really were overwritten: gathering them from device would be wrong";

  KvArena kv1(cb, kBlockTokens, 16), kv2(cb, kBlockTokens, 16);
  std::vector<std::int32_t> table(16);
  std::iota(table.begin(), table.end(), 0);
  const auto from_device = Greedy(b, kv1, Prompt(60), table, 12);
  b.Bind(nullptr);
  EXPECT_EQ(from_device, Greedy(b, kv2, Prompt(60), table, 12));
}

}  // namespace
}  // namespace talaria
