// Measuring a profile of the CPU reference model on this machine: prefill
// and decode step tables, copy bandwidths, restore and switch costs, written
// in the profiles/*.toml format (docs/profiles.md) so the sim engine can run
// with measured numbers instead of assumed ones (`talaria profile measure
// --engine cpu`).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "engine/cpu_model.h"

namespace talaria {

// The CPU models served together (10 M to 100 M parameters), by name.
const std::vector<CpuModelConfig>& CpuModelCatalog();
// False when `name` is not in the catalogue.
bool CpuModelByName(const std::string& name, CpuModelConfig& out);

struct CpuProfileOptions {
  double hbm_gib = 4;  // the emulated device memory the profile declares
  std::int32_t repeats = 3;  // each point: the median of this many runs
  std::int32_t block_tokens = 16;
  std::vector<std::int64_t> prefill_tokens = {16, 64, 128, 256, 512, 768, 1024, 1536, 2048};
  // Dense enough that linear interpolation follows the measured curves
  // (decode time bends upward past 512 tokens of context): with batches
  // {1, 4, 8} and contexts {64, 512, 2048} interpolation charged up to a
  // tenth more than the grid points around it (docs/fidelity.md).
  std::vector<std::int32_t> decode_batch = {1, 2, 3, 4, 6, 8};
  std::vector<std::int64_t> decode_context = {64, 256, 512, 768, 1024, 1536, 2048};
  // Decode points are measured in this many interleaved passes over the
  // grid (the median of each point's passes): decode runs at the memory
  // bandwidth of the moment.
  std::int32_t decode_passes = 21;
  // Prefill of new tokens after a cached prefix (a continuation's cost),
  // every pair; skipped when either list is empty.
  std::vector<std::int64_t> cached_new_tokens = {16, 64, 128, 256, 384, 512, 768};
  std::vector<std::int64_t> cached_tokens = {128, 256, 512, 768, 1024};
  // Told after each measured point: points done, points in all.
  std::function<void(std::int64_t, std::int64_t)> progress;
};

// Bytes per second of memcpy over a buffer of `bytes` (best of a few):
// this machine's copy bandwidth, the reference for copy-bound figures.
double MeasureCopyBytesPerSecond(std::size_t bytes);

// Measures `config` (seeded weights: timings do not depend on values) and
// returns the profile's TOML text.
std::string MeasureCpuProfile(const CpuModelConfig& config, const CpuProfileOptions& options);

}  // namespace talaria
