// CpuEngine: the Engine interface on the CPU reference model (cpu_model.h),
// computing real tokens on real bytes under the instance's memory substrate
// (issue 6). The instance's HBM arena is one allocation here (the emulated
// device memory); the active model's weights live at the layout's weight
// region and its KV blocks at the KV pool's offsets, so the scheduler's
// block tables are the model's block tables. Host weights, host KV slabs and
// swapped-out KV are separate host memory. Every copy is a real copy:
//   - switch: the outgoing model's running calls are swapped out (D2H), the
//     target's weights gathered into the weight region, clean staged chunks
//     from the KV region (D2D) and the rest from host weights (H2D);
//   - staging: chunks the stager reports written are copied into the KV
//     region from the next step boundary on, on a copy thread while the
//     step computes (the copy engine), finished before the step after;
//   - HKVR: a call's full context blocks are checkpointed to host slabs when
//     it finishes, named by the hash of their tokens; a restore copies them
//     back, each emulated tensor-parallel rank checking the bytes of its
//     shard of the KV heads against the hash recorded at checkpoint, and
//     resumes only the prefix every rank agrees on: the rest is recomputed.
// With `link_gbps` set, host<->device copies are held to that rate (an
// emulation of a PCIe link: the step waits out the difference).
//
// Durations are measured on this machine's clock while the step runs
// (emulated() is false). Output is greedy; with `printable_output` only
// printable ASCII bytes are chosen, so streamed text is valid UTF-8.
// Weights are seeded (SeededWeights): not trained models, so the text is
// meaningless, but a pure function of model, seed and prompt.
#pragma once

#include <cstddef>
#include <cstdint>
#include <future>
#include <list>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "engine/cpu_model.h"
#include "engine/engine.h"
#include "memory/host_kv_registry.h"
#include "memory/host_kv_store.h"

namespace talaria {

struct CpuEngineOptions {
  std::int64_t host_kv_bytes = std::int64_t{1} << 30;  // host KV slabs, over all models and ranks
  std::int32_t tp_ranks = 1;      // emulated ranks, each holding a shard of every block's KV heads
  double link_gbps = 0;           // emulated host<->device link in GB/s; 0: memory speed
  bool printable_output = true;   // greedy over printable ASCII bytes only
  std::uint64_t seed = 1;         // model i gets SeededWeights(config, seed + i)
};

class CpuEngine final : public Engine {
 public:
  struct Stats {
    std::int64_t restored_blocks = 0;      // host KV blocks restored, agreed by every rank
    std::int64_t rejected_blocks = 0;      // host blocks whose bytes failed their hash on some rank
    std::int64_t rank_disagreements = 0;   // restores where ranks reported different lengths
    std::int64_t computed_tokens = 0;      // prompt tokens computed by prefill
    std::int64_t checkpointed_blocks = 0;  // blocks copied to host slabs at a call's end
    std::int64_t swapped_out_calls = 0;
    std::int64_t d2d_weight_bytes = 0;     // weights gathered from staged chunks
    std::int64_t h2d_weight_bytes = 0;     // weights copied from host
    std::int64_t staged_bytes = 0;         // staging writes into the KV region
  };

  // One entry per model the instance hosts, named as its profile. Throws
  // InputError for a bad option or model config.
  CpuEngine(std::vector<CpuModelConfig> models, CpuEngineOptions options);
  ~CpuEngine() override;
  CpuEngine(const CpuEngine&) = delete;
  CpuEngine& operator=(const CpuEngine&) = delete;

  // Allocates the device arena (layout->arena_bytes(), lazily backed) and
  // loads the active model. Throws InputError when a model's profile
  // disagrees with its config (weight bytes, KV bytes per block).
  void Attach(const Substrate& substrate) override;
  bool emulated() const override { return false; }
  Duration Prefill(const PrefillStep& step) override;
  Duration Decode(const DecodeStep& step) override;
  SwitchTiming Switch(const SwitchStep& step) override;
  std::span<const std::int32_t> Output(std::int64_t call_id) const override;
  void Forget(std::int64_t call_id) override;

  const Stats& stats() const { return stats_; }
  // Rank `rank`'s host slab of `model`'s block named `hash`, writable (for
  // tests that corrupt host memory); empty when not checkpointed.
  std::span<std::byte> HostShard(const std::string& model, PrefixHash hash, std::int32_t rank);

 private:
  struct Model;
  struct Call;

  Model* FindModel(const std::string& name);  // nullptr when not hosted
  Model& ModelNamed(const std::string& name);  // throws when not hosted
  // Starts a prefill or decode step of `model` (the active one).
  Model& BeginStep(const ModelProfile& model);
  // After a forward pass over chunks_: each chunk's call takes its next
  // token; a call that is complete is checkpointed (when asked).
  void TakeTokens(Model& m);
  Call& CallFor(const SeqRef& seq);
  // The KV blocks holding a call's kv_len positions.
  std::size_t KvBlocks(const Call& c) const;
  // Writes the chunks the stager reports staged since the last boundary into
  // the KV region: in the background while the step computes (`overlap`),
  // or before returning.
  void MaterializeStaging(bool overlap);
  void LoadWeights(Model& m, const GatherPlan* plan);
  std::int64_t RestoreFromHost(Model& m, Call& c, std::span<const BlockId> blocks, std::int64_t tokens);
  void Checkpoint(Model& m, Call& c);
  bool PutBlock(Model& m, PrefixHash hash, BlockId block);
  void DropHostEntry(Model& m, PrefixHash hash);
  std::int32_t Pick(std::span<const float> logits) const;
  // Counts a host<->device copy of the step in flight (bytes, time it took).
  void HoldToLink(std::int64_t bytes, double copy_s);
  // With a link cap, sleeps until the step's host<->device bytes would have
  // crossed the link; returns the seconds waited.
  double WaitOutLink();
  std::span<float> Shard(BlockId block, std::int32_t layer, bool v, std::int32_t rank);

  CpuEngineOptions options_;
  std::vector<std::unique_ptr<Model>> models_;
  Substrate sub_;
  std::byte* arena_ = nullptr;
  std::size_t arena_bytes_ = 0;
  Model* active_ = nullptr;
  std::optional<KvArena> kv_;
  std::unordered_map<std::int64_t, std::unique_ptr<Call>> calls_;
  std::uint64_t staged_serial_ = 0;
  std::vector<bool> materialized_;
  struct CopyJob {
    std::byte* dst;
    const std::byte* src;
    std::size_t bytes;
  };
  std::vector<CopyJob> copy_jobs_;
  std::future<void> copies_;  // staging copies in flight
  Stats stats_;
  // Per step, reused.
  std::vector<SeqChunk> chunks_;
  std::vector<Call*> chunk_calls_;
  // Host buffers of swapped-in calls, reused by the next swap-outs.
  std::vector<std::vector<float>> swap_pool_;
  std::vector<float> logits_;
  std::vector<PrefixHash> hashes_;
  std::vector<std::int32_t> context_;
  std::vector<std::byte> shard_;
  std::int64_t link_bytes_ = 0;  // host<->device bytes of the step in flight
  double link_copy_s_ = 0;       // and the time their copies took
};

}  // namespace talaria
