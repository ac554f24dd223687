// Small CPU model configs for the engine tests: fast enough to run many
// forward passes, big enough to exercise GQA, several layers and the FFN.
#pragma once

#include <string>

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

}  // namespace talaria::testing
