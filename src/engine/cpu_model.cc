#include "engine/cpu_model.h"

#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>

#include "core/error.h"
#include "core/random.h"

namespace talaria {
namespace {

std::string LayerName(std::int32_t i, const char* leaf) { return "model.layers." + std::to_string(i) + "." + leaf; }

void RmsNorm(const float* x, const float* w, std::int32_t n, double eps, float* y) {
  float ss = 0;
  for (std::int32_t i = 0; i < n; ++i) ss += x[i] * x[i];
  const float scale = 1.0f / std::sqrt(ss / static_cast<float>(n) + static_cast<float>(eps));
  for (std::int32_t i = 0; i < n; ++i) y[i] = x[i] * scale * w[i];
}

}  // namespace

std::int64_t CpuModelConfig::Parameters() const {
  std::int64_t n = 0;
  for (const auto& [name, shape] : ExpectedTensors(*this)) {
    std::int64_t size = 1;
    for (auto d : shape) size *= d;
    n += size;
  }
  return n;
}

void CpuModelConfig::Validate() const {
  const std::string where = "cpu model '" + name + "'";
  if (vocab < 1) throw InputError(where, "vocab must be positive");
  if (hidden < 2 || heads < 1 || hidden % heads != 0) throw InputError(where, "hidden must be a multiple of heads");
  if (head_dim() % 2 != 0) throw InputError(where, "head_dim (hidden / heads) must be even for rotary embeddings");
  if (kv_heads < 1 || heads % kv_heads != 0) throw InputError(where, "heads must be a multiple of kv_heads");
  if (layers < 1) throw InputError(where, "layers must be positive");
  if (ffn < 1) throw InputError(where, "ffn must be positive");
  if (max_context < 1) throw InputError(where, "max_context must be positive");
}

std::vector<std::pair<std::string, std::vector<std::int64_t>>> ExpectedTensors(const CpuModelConfig& c) {
  const std::int64_t d = c.hidden, q = static_cast<std::int64_t>(c.heads) * c.head_dim(),
                     kv = static_cast<std::int64_t>(c.kv_heads) * c.head_dim();
  std::vector<std::pair<std::string, std::vector<std::int64_t>>> out;
  out.push_back({"model.embed_tokens.weight", {c.vocab, d}});
  for (std::int32_t i = 0; i < c.layers; ++i) {
    out.push_back({LayerName(i, "input_layernorm.weight"), {d}});
    out.push_back({LayerName(i, "self_attn.q_proj.weight"), {q, d}});
    out.push_back({LayerName(i, "self_attn.k_proj.weight"), {kv, d}});
    out.push_back({LayerName(i, "self_attn.v_proj.weight"), {kv, d}});
    out.push_back({LayerName(i, "self_attn.o_proj.weight"), {d, q}});
    out.push_back({LayerName(i, "post_attention_layernorm.weight"), {d}});
    out.push_back({LayerName(i, "mlp.gate_proj.weight"), {c.ffn, d}});
    out.push_back({LayerName(i, "mlp.up_proj.weight"), {c.ffn, d}});
    out.push_back({LayerName(i, "mlp.down_proj.weight"), {d, c.ffn}});
  }
  out.push_back({"model.norm.weight", {d}});
  out.push_back({"lm_head.weight", {c.vocab, d}});
  return out;
}

TensorMap SeededWeights(const CpuModelConfig& config, std::uint64_t seed) {
  config.Validate();
  TensorMap out;
  Rng root(seed);
  std::uint64_t stream = 0;
  for (const auto& [name, shape] : ExpectedTensors(config)) {
    Tensor t;
    t.shape = shape;
    std::int64_t size = 1;
    for (auto d : shape) size *= d;
    t.data.resize(static_cast<std::size_t>(size));
    if (shape.size() == 1) {
      std::fill(t.data.begin(), t.data.end(), 1.0f);  // norm weights
    } else {
      Rng rng = root.Fork(stream);
      // Uniform with standard deviation 0.02 (half-width 0.02 * sqrt(3)).
      for (float& v : t.data) v = static_cast<float>((rng.Uniform() * 2.0 - 1.0) * 0.034641016);
    }
    ++stream;
    out.emplace(name, std::move(t));
  }
  return out;
}

KvArena::KvArena(const CpuModelConfig& config, std::int32_t block_tokens, std::int32_t blocks)
    : block_tokens_(block_tokens),
      blocks_(blocks),
      layer_floats_(static_cast<std::size_t>(config.kv_heads) * static_cast<std::size_t>(block_tokens) *
                    static_cast<std::size_t>(config.head_dim())),
      block_floats_(layer_floats_ * 2 * static_cast<std::size_t>(config.layers)),
      owned_(block_floats_ * static_cast<std::size_t>(blocks), 0.0f),
      base_(owned_.data()) {
  TALARIA_CHECK(block_tokens > 0 && blocks > 0, "a KV arena needs blocks");
}

KvArena::KvArena(const CpuModelConfig& config, std::int32_t block_tokens, std::span<std::byte> memory)
    : block_tokens_(block_tokens),
      layer_floats_(static_cast<std::size_t>(config.kv_heads) * static_cast<std::size_t>(block_tokens) *
                    static_cast<std::size_t>(config.head_dim())),
      block_floats_(layer_floats_ * 2 * static_cast<std::size_t>(config.layers)),
      base_(reinterpret_cast<float*>(memory.data())) {
  TALARIA_CHECK(reinterpret_cast<std::uintptr_t>(memory.data()) % alignof(float) == 0, "KV memory must be float-aligned");
  blocks_ = static_cast<std::int32_t>(memory.size() / (block_floats_ * sizeof(float)));
  TALARIA_CHECK(block_tokens > 0 && blocks_ > 0, "a KV arena needs blocks");
}

void CpuModel::Bind(const float* device) {
  const float* to = device != nullptr ? device : weights_.data();
  const auto rebase = [&](const float*& p) { p = to + (p - bound_); };
  rebase(embed_);
  rebase(final_norm_);
  rebase(lm_head_);
  for (Layer& L : layers_) {
    for (const float** p : {&L.attn_norm, &L.wq, &L.wk, &L.wv, &L.wo, &L.ffn_norm, &L.w_gate, &L.w_up, &L.w_down}) {
      rebase(*p);
    }
  }
  bound_ = to;
}

CpuModel::CpuModel(CpuModelConfig config, const TensorMap& weights) : config_(std::move(config)) {
  config_.Validate();
  // One thread per instance, as every engine runs (and no thread handoff
  // per dot product).
  openblas_set_num_threads(1);
  const auto expected = ExpectedTensors(config_);
  std::size_t total = 0;
  for (const auto& [name, shape] : expected) {
    auto it = weights.find(name);
    if (it == weights.end()) throw InputError("cpu model '" + config_.name + "'", "missing tensor '" + name + "'");
    if (it->second.shape != shape) {
      std::string want, got;
      for (auto d : shape) want += (want.empty() ? "" : ",") + std::to_string(d);
      for (auto d : it->second.shape) got += (got.empty() ? "" : ",") + std::to_string(d);
      throw InputError("cpu model '" + config_.name + "'",
                       "tensor '" + name + "' has shape [" + got + "], expected [" + want + "]");
    }
    total += it->second.data.size();
  }
  weights_.resize(total);
  std::unordered_map<std::string, const float*> at;
  std::size_t offset = 0;
  for (const auto& [name, shape] : expected) {
    const Tensor& t = weights.at(name);
    std::memcpy(weights_.data() + offset, t.data.data(), t.data.size() * sizeof(float));
    at[name] = weights_.data() + offset;
    offset += t.data.size();
  }
  bound_ = weights_.data();
  embed_ = at["model.embed_tokens.weight"];
  final_norm_ = at["model.norm.weight"];
  lm_head_ = at["lm_head.weight"];
  for (std::int32_t i = 0; i < config_.layers; ++i) {
    layers_.push_back(Layer{at[LayerName(i, "input_layernorm.weight")], at[LayerName(i, "self_attn.q_proj.weight")],
                            at[LayerName(i, "self_attn.k_proj.weight")], at[LayerName(i, "self_attn.v_proj.weight")],
                            at[LayerName(i, "self_attn.o_proj.weight")],
                            at[LayerName(i, "post_attention_layernorm.weight")],
                            at[LayerName(i, "mlp.gate_proj.weight")], at[LayerName(i, "mlp.up_proj.weight")],
                            at[LayerName(i, "mlp.down_proj.weight")]});
  }
  const std::int32_t half = config_.head_dim() / 2;
  for (std::int32_t i = 0; i < half; ++i) {
    inv_freq_.push_back(static_cast<float>(std::pow(config_.rope_theta, -2.0 * i / config_.head_dim())));
  }
}

void CpuModel::MatMul(const float* x, std::int32_t rows, std::int32_t in, const float* w, std::int32_t out,
                      float* y) {
  // Every output element is one BLAS dot product of a weight row and a
  // token row, so a token's result is the same whatever the batch (GEMM
  // kernels pick code paths and summation orders by batch shape and row
  // position). Rows go through one aligned buffer, so the dot kernel also
  // sees the same alignment every time. A tile of token rows shares each
  // weight row while it is in cache: weights stream from memory once per
  // tile, once per step when decoding.
  row_.resize(static_cast<std::size_t>(kRowTile) * in + 16);
  float* tile = row_.data() + (16 - reinterpret_cast<std::uintptr_t>(row_.data()) / sizeof(float) % 16) % 16;
  for (std::int32_t r = 0; r < rows; r += kRowTile) {
    const std::int32_t n = std::min(kRowTile, rows - r);
    for (std::int32_t t = 0; t < n; ++t) {
      std::memcpy(tile + static_cast<std::size_t>(t) * in, x + static_cast<std::size_t>(r + t) * in, in * sizeof(float));
    }
    for (std::int32_t o = 0; o < out; ++o) {
      const float* wo = w + static_cast<std::size_t>(o) * in;
      for (std::int32_t t = 0; t < n; ++t) {
        y[static_cast<std::size_t>(r + t) * out + o] = cblas_sdot(in, wo, 1, tile + static_cast<std::size_t>(t) * in, 1);
      }
    }
  }
}

void CpuModel::Rope(float* v, std::int32_t heads, std::int64_t pos) const {
  const std::int32_t hd = config_.head_dim(), half = hd / 2;
  for (std::int32_t h = 0; h < heads; ++h) {
    float* x = v + static_cast<std::size_t>(h) * hd;
    for (std::int32_t i = 0; i < half; ++i) {
      const float angle = static_cast<float>(pos) * inv_freq_[static_cast<std::size_t>(i)];
      const float c = std::cos(angle), s = std::sin(angle);
      const float x1 = x[i], x2 = x[i + half];
      x[i] = x1 * c - x2 * s;
      x[i + half] = x2 * c + x1 * s;
    }
  }
}

std::int32_t CpuModel::Argmax(std::span<const float> row) {
  return static_cast<std::int32_t>(std::max_element(row.begin(), row.end()) - row.begin());
}

std::int32_t CpuModel::ArgmaxPrintable(std::span<const float> row) {
  constexpr std::size_t kFirst = 3 + 0x20, kLast = 3 + 0x7e;
  TALARIA_CHECK(row.size() > kLast, "a byte vocabulary");
  return static_cast<std::int32_t>(kFirst) + Argmax(row.subspan(kFirst, kLast + 1 - kFirst));
}

void CpuModel::Forward(std::span<const SeqChunk> chunks, KvArena& kv, std::vector<float>& logits) {
  const CpuModelConfig& c = config_;
  const std::int32_t d = c.hidden, hd = c.head_dim(), qd = c.heads * hd, kvd = c.kv_heads * hd;
  const std::int32_t group = c.heads / c.kv_heads, bt = kv.block_tokens();
  std::int32_t rows = 0;
  for (const auto& ch : chunks) {
    TALARIA_CHECK(!ch.tokens.empty(), "a chunk needs at least one new token");
    const std::int64_t end = ch.cached + static_cast<std::int64_t>(ch.tokens.size());
    TALARIA_CHECK(end <= c.max_context, "context beyond the model's max_context");
    TALARIA_CHECK(static_cast<std::int64_t>(ch.block_table.size()) * bt >= end, "block table too short");
    rows += static_cast<std::int32_t>(ch.tokens.size());
  }
  x_.resize(static_cast<std::size_t>(rows) * d);
  h_.resize(x_.size());
  q_.resize(static_cast<std::size_t>(rows) * qd);
  k_.resize(static_cast<std::size_t>(rows) * kvd);
  v_.resize(k_.size());
  att_.resize(q_.size());
  o_.resize(x_.size());
  gate_.resize(static_cast<std::size_t>(rows) * c.ffn);
  up_.resize(gate_.size());

  std::int32_t r = 0;
  for (const auto& ch : chunks) {
    for (std::int32_t t : ch.tokens) {
      TALARIA_CHECK(t >= 0 && t < c.vocab, "token id outside the vocabulary");
      std::memcpy(&x_[static_cast<std::size_t>(r++) * d], embed_ + static_cast<std::size_t>(t) * d, d * sizeof(float));
    }
  }
  const float inv_sqrt = 1.0f / std::sqrt(static_cast<float>(hd));
  for (std::int32_t l = 0; l < c.layers; ++l) {
    const Layer& L = layers_[static_cast<std::size_t>(l)];
    for (std::int32_t i = 0; i < rows; ++i) RmsNorm(&x_[static_cast<std::size_t>(i) * d], L.attn_norm, d, c.rms_eps, &h_[static_cast<std::size_t>(i) * d]);
    MatMul(h_.data(), rows, d, L.wq, qd, q_.data());
    MatMul(h_.data(), rows, d, L.wk, kvd, k_.data());
    MatMul(h_.data(), rows, d, L.wv, kvd, v_.data());
    // Rotary embeddings, then the new K/V into the sequence's blocks.
    r = 0;
    for (const auto& ch : chunks) {
      for (std::size_t t = 0; t < ch.tokens.size(); ++t, ++r) {
        const std::int64_t pos = ch.cached + static_cast<std::int64_t>(t);
        Rope(&q_[static_cast<std::size_t>(r) * qd], c.heads, pos);
        Rope(&k_[static_cast<std::size_t>(r) * kvd], c.kv_heads, pos);
        const std::int32_t block = ch.block_table[static_cast<std::size_t>(pos / bt)];
        const auto slot = static_cast<std::size_t>(pos % bt);
        for (std::int32_t g = 0; g < c.kv_heads; ++g) {
          const std::size_t dst = (static_cast<std::size_t>(g) * bt + slot) * hd;
          std::memcpy(kv.K(block, l) + dst, &k_[static_cast<std::size_t>(r) * kvd + static_cast<std::size_t>(g) * hd], hd * sizeof(float));
          std::memcpy(kv.V(block, l) + dst, &v_[static_cast<std::size_t>(r) * kvd + static_cast<std::size_t>(g) * hd], hd * sizeof(float));
        }
      }
    }
    // Causal attention over the paged cache, one row and head at a time.
    r = 0;
    for (const auto& ch : chunks) {
      for (std::size_t t = 0; t < ch.tokens.size(); ++t, ++r) {
        const std::int64_t pos = ch.cached + static_cast<std::int64_t>(t);
        scores_.resize(static_cast<std::size_t>(pos + 1));
        for (std::int32_t h = 0; h < c.heads; ++h) {
          const float* q = &q_[static_cast<std::size_t>(r) * qd + static_cast<std::size_t>(h) * hd];
          const std::int32_t g = h / group;
          float max_score = -INFINITY;
          for (std::int64_t j = 0; j <= pos; ++j) {
            const float* kj = kv.K(ch.block_table[static_cast<std::size_t>(j / bt)], l) +
                              (static_cast<std::size_t>(g) * bt + static_cast<std::size_t>(j % bt)) * hd;
            float s = 0;
            for (std::int32_t e = 0; e < hd; ++e) s += q[e] * kj[e];
            s *= inv_sqrt;
            scores_[static_cast<std::size_t>(j)] = s;
            max_score = std::max(max_score, s);
          }
          float sum = 0;
          for (std::int64_t j = 0; j <= pos; ++j) {
            const float e = std::exp(scores_[static_cast<std::size_t>(j)] - max_score);
            scores_[static_cast<std::size_t>(j)] = e;
            sum += e;
          }
          float* out = &att_[static_cast<std::size_t>(r) * qd + static_cast<std::size_t>(h) * hd];
          std::fill(out, out + hd, 0.0f);
          for (std::int64_t j = 0; j <= pos; ++j) {
            const float p = scores_[static_cast<std::size_t>(j)] / sum;
            const float* vj = kv.V(ch.block_table[static_cast<std::size_t>(j / bt)], l) +
                              (static_cast<std::size_t>(g) * bt + static_cast<std::size_t>(j % bt)) * hd;
            for (std::int32_t e = 0; e < hd; ++e) out[e] += p * vj[e];
          }
        }
      }
    }
    MatMul(att_.data(), rows, qd, L.wo, d, o_.data());
    for (std::size_t i = 0; i < x_.size(); ++i) x_[i] += o_[i];
    // SwiGLU feed-forward.
    for (std::int32_t i = 0; i < rows; ++i) RmsNorm(&x_[static_cast<std::size_t>(i) * d], L.ffn_norm, d, c.rms_eps, &h_[static_cast<std::size_t>(i) * d]);
    MatMul(h_.data(), rows, d, L.w_gate, c.ffn, gate_.data());
    MatMul(h_.data(), rows, d, L.w_up, c.ffn, up_.data());
    for (std::size_t i = 0; i < gate_.size(); ++i) {
      const float g = gate_[i];
      gate_[i] = g / (1.0f + std::exp(-g)) * up_[i];
    }
    MatMul(gate_.data(), rows, c.ffn, L.w_down, d, o_.data());
    for (std::size_t i = 0; i < x_.size(); ++i) x_[i] += o_[i];
  }
  // Each chunk's last row: final norm, then the head.
  h_.resize(chunks.size() * static_cast<std::size_t>(d));
  r = 0;
  for (std::size_t i = 0; i < chunks.size(); ++i) {
    r += static_cast<std::int32_t>(chunks[i].tokens.size());
    RmsNorm(&x_[static_cast<std::size_t>(r - 1) * d], final_norm_, d, c.rms_eps, &h_[i * static_cast<std::size_t>(d)]);
  }
  logits.resize(chunks.size() * static_cast<std::size_t>(c.vocab));
  MatMul(h_.data(), static_cast<std::int32_t>(chunks.size()), d, lm_head_, c.vocab, logits.data());
}

}  // namespace talaria
