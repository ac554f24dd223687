// Weight staging for the next switch (DESIGN.md §5, paper §4.4).
//
// While model m serves, the next model's weights are copied from host in
// fixed-size chunks into the free high end of m's KV region (chunk 0 at the
// top, then downwards). The copy engine writes one chunk at a time at the
// H2D rate; while a chunk is being written, the KV allocator skips its rows.
// A chunk whose rows a KV allocation later takes is dirty. At switch time the
// gather plan copies clean chunks device-to-device and reloads dirty or
// missing chunks from host; the switch is `d2d` (all clean), `h2d` (none)
// or `partial`. Free staging bytes (staging slack) tell the router how much
// of a future switch could still be staged.
//
// Time comes in as arguments; the stager never reads a clock. Not synchronized.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "core/time.h"
#include "memory/kv_pool.h"
#include "profile/profile.h"

namespace talaria {

struct GatherPlan {
  std::string model;
  std::int64_t weight_bytes = 0;
  std::int64_t d2d_bytes = 0;  // clean staged chunks, gathered on device
  std::int64_t h2d_bytes = 0;  // dirty or missing chunks, reloaded from host
  std::int64_t dirty_bytes = 0;
  SwitchPath path = SwitchPath::kH2d;
  double coverage() const {
    return weight_bytes > 0 ? static_cast<double>(d2d_bytes) / static_cast<double>(weight_bytes) : 0;
  }
};

class Stager {
 public:
  enum class ChunkState : std::uint8_t { kMissing, kWriting, kClean, kDirty };

  Stager(std::int64_t chunk_bytes, double h2d_bytes_per_s);

  // Starts staging `model` (weight_bytes) into the top of pool.region() at
  // `now`, dropping any previous staging.
  void Begin(const std::string& model, std::int64_t weight_bytes, TimePoint now, KvPool& pool);
  // Completes the chunk writes due by `now` and starts the next ones. A
  // chunk whose rows hold KV blocks is passed over and stays missing.
  void AdvanceTo(TimePoint now, KvPool& pool);
  // A KV allocation took `blocks`: staged chunks they overlap become dirty.
  void OnAllocated(std::span<const BlockId> blocks, const KvPool& pool);
  void OnAllocated(const BlockList& blocks, const KvPool& pool);
  // Stops staging (e.g. the KV region is about to be released).
  void Cancel(KvPool& pool);
  // Cancels and forgets the staged model: nothing is staged, and Plan
  // gathers nothing on device until the next Begin.
  void Clear(KvPool& pool);

  // The plan for switching to `model`: all H2D unless it is the staged one.
  GatherPlan Plan(const std::string& model, std::int64_t weight_bytes) const;
  // Bytes of the KV region above the highest allocated block that are not
  // yet staged: what a future switch could still use.
  std::int64_t StagingSlackBytes(const KvPool& pool) const;
  // Seconds the staging still copies towards `model` (weight_bytes) at the
  // staging rate: the weights not yet clean, as far as the KV region's
  // slack and the chunk being written allow. 0 when another model (or
  // none) is staged.
  double SecondsToStage(const std::string& model, std::int64_t weight_bytes, const KvPool& pool) const;

  const std::string& staged_model() const { return model_; }
  // Bumped by every Begin: an engine that writes the staged bytes itself
  // knows its copies belong to an earlier staging when this changes.
  std::uint64_t serial() const { return serial_; }
  // Bytes of clean or in-progress chunks: what staging occupies in HBM now.
  std::int64_t StagedBytes() const { return staged_bytes_; }
  // Bytes of clean chunks: what Plan for the staged model gathers on device.
  std::int64_t CleanBytes() const { return staged_bytes_ - (writing_ != SIZE_MAX ? ChunkBytes(writing_) : 0); }
  std::span<const ChunkState> chunks() const { return states_; }
  // Chunk i holds weight bytes [i * chunk_bytes(), ...) of the staged model.
  std::int64_t chunk_bytes() const { return chunk_bytes_; }
  Region ChunkRange(std::size_t i) const;

 private:
  std::int64_t ChunkBytes(std::size_t i) const;
  // Clean chunks overlapping `bytes` (of newly allocated KV) become dirty.
  void DirtyOverlapping(Region bytes);
  void StartNext(TimePoint at, KvPool& pool);

  std::int64_t chunk_bytes_;
  double h2d_bytes_per_s_;
  std::string model_;
  std::int64_t weight_bytes_ = 0;
  std::uint64_t serial_ = 0;
  Region region_;  // the KV region staged into
  std::vector<ChunkState> states_;
  std::size_t next_ = 0;        // next chunk to consider writing
  std::size_t writing_ = SIZE_MAX;
  std::int64_t staged_bytes_ = 0;  // kept with the chunk states, not recounted
  TimePoint write_done_;
};

}  // namespace talaria
