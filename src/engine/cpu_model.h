// The CPU reference model: a small decoder-only transformer of the LLaMA
// family (RMSNorm, rotary position embeddings, grouped-query attention,
// SwiGLU), fp32, with matrix products through OpenBLAS, reading and writing
// its KV cache in fixed-size blocks of a paged arena (KvArena). It computes
// real tokens on real bytes, so every KV path (device hit, host restore,
// recomputation) can be checked token for token (issue 6).
//
// Determinism: a row's result never depends on the other rows of its batch.
// Every output of a matrix product is one OpenBLAS dot product (sdot) of a
// weight row and a token row (OpenBLAS's GEMM picks kernels and summation
// orders by batch shape and row position, so it is not batch-invariant);
// attention and norms run per row. Chunked prefill, one-shot prefill,
// recomputation and batched decode therefore agree bit for bit (tested).
//
// Weights use the Hugging Face LLaMA names and layouts (linear weights are
// [out, in]); see safetensors.h for loading them, or SeededWeights for a
// deterministic initialisation (for tests and demos: not a trained model).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

namespace talaria {

struct CpuModelConfig {
  std::string name = "cpu-tiny";
  std::int32_t vocab = 259;  // byte-level: 3 special ids + 256 bytes
  std::int32_t hidden = 256;
  std::int32_t layers = 4;
  std::int32_t heads = 8;
  std::int32_t kv_heads = 2;
  std::int32_t ffn = 768;
  double rope_theta = 10000.0;
  double rms_eps = 1e-5;
  std::int32_t max_context = 4096;

  std::int32_t head_dim() const { return hidden / heads; }
  // Number of weights (embedding and head untied).
  std::int64_t Parameters() const;
  // Bytes of the fp32 weights, and of one paged KV block of `block_tokens`.
  std::int64_t WeightBytes() const { return Parameters() * static_cast<std::int64_t>(sizeof(float)); }
  std::int64_t KvBlockBytes(std::int32_t block_tokens) const {
    return std::int64_t{2} * layers * kv_heads * block_tokens * head_dim() * static_cast<std::int64_t>(sizeof(float));
  }
  // Throws InputError naming the field when the shapes are inconsistent.
  void Validate() const;
};

// Named fp32 tensors with shapes, in one owning map.
struct Tensor {
  std::vector<std::int64_t> shape;
  std::vector<float> data;
};
using TensorMap = std::unordered_map<std::string, Tensor>;

// The tensor names and shapes a model of `config` needs.
std::vector<std::pair<std::string, std::vector<std::int64_t>>> ExpectedTensors(const CpuModelConfig& config);

// Deterministic weights from `seed`: normal(0, 0.02)-like values from the
// project's Rng, norms at 1. Not a trained model: output is meaningless
// text, but it is a pure function of (config, seed, prompt).
TensorMap SeededWeights(const CpuModelConfig& config, std::uint64_t seed);

// The paged KV cache: `blocks` blocks of `block_tokens` tokens; each block
// holds, per layer, K then V as [kv_heads][block_tokens][head_dim] floats.
// One allocation; block b's bytes are contiguous, so copying a block (to
// host, back, between arenas) is one memcpy.
class KvArena {
 public:
  // An arena of its own.
  KvArena(const CpuModelConfig& config, std::int32_t block_tokens, std::int32_t blocks);
  // A view over `memory` (for instance a device arena's KV region): block b
  // starts at byte b * block_bytes(). Not owning; `memory` must outlive it
  // and be float-aligned.
  KvArena(const CpuModelConfig& config, std::int32_t block_tokens, std::span<std::byte> memory);
  std::int32_t block_tokens() const { return block_tokens_; }
  std::int32_t blocks() const { return blocks_; }
  std::size_t block_floats() const { return block_floats_; }
  std::size_t block_bytes() const { return block_floats_ * sizeof(float); }
  float* Block(std::int32_t b) { return base_ + static_cast<std::size_t>(b) * block_floats_; }
  const float* Block(std::int32_t b) const { return base_ + static_cast<std::size_t>(b) * block_floats_; }
  // K (or V) of `layer` in block `b`: [kv_heads][block_tokens][head_dim].
  float* K(std::int32_t b, std::int32_t layer) { return Block(b) + static_cast<std::size_t>(layer) * 2 * layer_floats_; }
  float* V(std::int32_t b, std::int32_t layer) { return K(b, layer) + layer_floats_; }

 private:
  std::int32_t block_tokens_;
  std::int32_t blocks_;
  std::size_t layer_floats_;  // one of K or V of one layer in one block
  std::size_t block_floats_;
  std::vector<float> owned_;  // empty for a view
  float* base_ = nullptr;
};

// One sequence's share of a forward pass: its new tokens, how many tokens
// of it are already in KV, and the blocks holding positions
// [0, cached + tokens.size()).
struct SeqChunk {
  std::span<const std::int32_t> tokens;
  std::int64_t cached = 0;
  std::span<const std::int32_t> block_table;
};

class CpuModel {
 public:
  // Token rows sharing each weight row while it is in cache.
  static constexpr std::int32_t kRowTile = 8;

  // Throws InputError for a missing tensor or a wrong shape, naming it.
  CpuModel(CpuModelConfig config, const TensorMap& weights);

  const CpuModelConfig& config() const { return config_; }
  std::int64_t weight_bytes() const { return static_cast<std::int64_t>(weights_.size() * sizeof(float)); }
  // Every weight in one contiguous buffer, in ExpectedTensors order: the
  // model's host copy, and the layout a device copy must have.
  std::span<const float> host_weights() const { return weights_; }
  // Computes from the weights at `device` (a copy of host_weights() in the
  // same layout, e.g. in a device arena's weight region) from now on;
  // nullptr returns to the host copy. `device` must outlive its use.
  void Bind(const float* device);

  // Runs every chunk's new tokens (one batch: prefill chunks and decode
  // steps alike), writing their K/V into `kv`, and returns each chunk's
  // last-token logits in `logits` (chunks.size() x vocab).
  void Forward(std::span<const SeqChunk> chunks, KvArena& kv, std::vector<float>& logits);

  // Greedy next token of one logits row.
  static std::int32_t Argmax(std::span<const float> row);
  // Greedy over the byte tokens of printable ASCII only (byte b is token
  // 3 + b), so generated text is valid UTF-8.
  static std::int32_t ArgmaxPrintable(std::span<const float> row);

 private:
  struct Layer {
    const float *attn_norm, *wq, *wk, *wv, *wo, *ffn_norm, *w_gate, *w_up, *w_down;
  };
  // y[rows x out] = x[rows x in] * W^T, W [out x in]. Batch-invariant.
  void MatMul(const float* x, std::int32_t rows, std::int32_t in, const float* w, std::int32_t out, float* y);
  void Rope(float* v, std::int32_t heads, std::int64_t pos) const;

  CpuModelConfig config_;
  std::vector<float> weights_;  // every tensor, one allocation (the host copy)
  const float* bound_ = nullptr;  // the buffer the tensor pointers below point into
  const float* embed_ = nullptr;
  const float* final_norm_ = nullptr;
  const float* lm_head_ = nullptr;
  std::vector<Layer> layers_;
  std::vector<float> inv_freq_;
  // Scratch, kept across calls.
  std::vector<float> x_, h_, q_, k_, v_, att_, o_, gate_, up_, row_, scores_;
};

}  // namespace talaria
