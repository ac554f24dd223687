// Small CPU model configs for the engine tests: fast enough to run many
// forward passes, big enough to exercise GQA, several layers and the FFN.
#pragma once

#include <cstdint>
#include <numeric>
#include <span>
#include <string>
#include <vector>

#include "engine/cpu_model.h"

namespace talaria::testing {

inline CpuModelConfig TinyCpuModel(std::string name = "test-tiny", std::int32_t hidden = 64, std::int32_t ffn = 128) {
  CpuModelConfig c;
  c.name = std::move(name);
  c.hidden = hidden;
  c.layers = 2;
  c.heads = 4;
  c.kv_heads = 2;
  c.ffn = ffn;
  c.max_context = 1024;
  return c;
}

// What the model alone generates after `prompt`: its own arena, one
// prefill, `n` greedy tokens over printable bytes (as the CPU engine picks).
// The reference the engine's outputs are checked against.
inline std::vector<std::int32_t> GreedyAlone(const CpuModelConfig& c, std::uint64_t seed,
                                             std::span<const std::int32_t> prompt, std::int32_t n,
                                             std::int32_t block_tokens = 16) {
  CpuModel model(c, SeededWeights(c, seed));
  const auto blocks = static_cast<std::int32_t>((prompt.size() + static_cast<std::size_t>(n)) /
                                                static_cast<std::size_t>(block_tokens)) + 1;
  KvArena kv(c, block_tokens, blocks);
  std::vector<std::int32_t> table(static_cast<std::size_t>(blocks));
  std::iota(table.begin(), table.end(), 0);
  std::vector<float> logits;
  SeqChunk chunk{prompt, 0, table};
  model.Forward(std::span(&chunk, 1), kv, logits);
  std::vector<std::int32_t> out{CpuModel::ArgmaxPrintable(logits)};
  while (static_cast<std::int32_t>(out.size()) < n) {
    chunk = SeqChunk{std::span(&out.back(), 1), static_cast<std::int64_t>(prompt.size() + out.size() - 1), table};
    model.Forward(std::span(&chunk, 1), kv, logits);
    out.push_back(CpuModel::ArgmaxPrintable(logits));
  }
  return out;
}

}  // namespace talaria::testing
