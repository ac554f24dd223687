#include "engine/cpu_profile.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <numeric>

#include "core/error.h"

namespace talaria {
namespace {

CpuModelConfig Named(const char* name, std::int32_t hidden, std::int32_t layers, std::int32_t heads,
                     std::int32_t kv_heads, std::int32_t ffn) {
  CpuModelConfig c;
  c.name = name;
  c.hidden = hidden;
  c.layers = layers;
  c.heads = heads;
  c.kv_heads = kv_heads;
  c.ffn = ffn;
  c.max_context = 32768;  // agent prompts run to tens of thousands of tokens
  return c;
}

template <typename F>
double SecondsOf(F&& run) {
  const auto t0 = std::chrono::steady_clock::now();
  run();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// The upper median (REQUIRES: not empty); reorders `v`.
double Median(std::vector<double>& v) {
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(v.size() / 2), v.end());
  return v[v.size() / 2];
}

template <typename F>
double MedianSeconds(std::int32_t repeats, F&& run) {
  std::vector<double> s;
  for (std::int32_t i = 0; i < std::max(1, repeats); ++i) s.push_back(SecondsOf(run));
  return Median(s);
}

std::string List(const std::vector<double>& v, const char* fmt) {
  std::string out = "[";
  char buf[64];
  for (std::size_t i = 0; i < v.size(); ++i) {
    std::snprintf(buf, sizeof buf, fmt, v[i]);
    out += (i > 0 ? ", " : "") + std::string(buf);
  }
  return out + "]";
}

}  // namespace

double MeasureCopyBytesPerSecond(std::size_t bytes) {
  if (bytes == 0) return 0;
  std::vector<char> src(bytes, 1), dst(bytes, 0);
  double best = 0;
  for (int i = 0; i < 10; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    std::memcpy(dst.data(), src.data(), bytes);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    best = std::max(best, static_cast<double>(bytes) / std::max(s, 1e-9));
  }
  if (dst[bytes / 2] != 1) return 0;  // keeps the copy observable
  return best;
}

const std::vector<CpuModelConfig>& CpuModelCatalog() {
  static const std::vector<CpuModelConfig> catalog = {
      Named("cpu-11m", 384, 6, 6, 2, 1152),
      Named("cpu-24m", 512, 8, 8, 2, 1536),
      Named("cpu-83m", 768, 12, 12, 4, 2304),
  };
  return catalog;
}

bool CpuModelByName(const std::string& name, CpuModelConfig& out) {
  for (const auto& c : CpuModelCatalog()) {
    if (c.name == name) {
      out = c;
      return true;
    }
  }
  return false;
}

std::string MeasureCpuProfile(const CpuModelConfig& config, const CpuProfileOptions& o) {
  config.Validate();
  CpuModel model(config, SeededWeights(config, 1));
  const std::int32_t bt = o.block_tokens;
  const bool cached_grid = !o.cached_new_tokens.empty() && !o.cached_tokens.empty();
  const std::int64_t max_ctx = std::max(
      {*std::max_element(o.prefill_tokens.begin(), o.prefill_tokens.end()),
       *std::max_element(o.decode_context.begin(), o.decode_context.end()) + 1,
       cached_grid ? *std::max_element(o.cached_new_tokens.begin(), o.cached_new_tokens.end()) +
                         *std::max_element(o.cached_tokens.begin(), o.cached_tokens.end())
                   : 0});
  if (max_ctx > config.max_context) throw InputError("profile grid", "goes beyond the model's max_context");
  const auto blocks_per_seq = static_cast<std::int32_t>((max_ctx + bt - 1) / bt);
  const std::int32_t max_batch = *std::max_element(o.decode_batch.begin(), o.decode_batch.end());
  KvArena kv(config, bt, blocks_per_seq * max_batch);
  std::vector<std::vector<std::int32_t>> tables(static_cast<std::size_t>(max_batch));
  for (std::int32_t s = 0; s < max_batch; ++s) {
    tables[static_cast<std::size_t>(s)].resize(static_cast<std::size_t>(blocks_per_seq));
    std::iota(tables[static_cast<std::size_t>(s)].begin(), tables[static_cast<std::size_t>(s)].end(), s * blocks_per_seq);
  }
  std::vector<float> logits;
  std::vector<std::int32_t> text(static_cast<std::size_t>(max_ctx));
  for (std::size_t i = 0; i < text.size(); ++i) text[i] = 3 + static_cast<std::int32_t>(i * 29 % 256);
  // The cache's contents do not change a step's time, so one fill of the
  // longest prefix (untimed) serves every point that reads a cached one.
  const SeqChunk fill{text, 0, tables[0]};
  model.Forward(std::span(&fill, 1), kv, logits);

  // Every point of every table is one batch of chunks, timed in passes over
  // the whole grid: a point's runs are spread across the measurement, not
  // back to back, so a slow spell of a shared machine (its memory bandwidth,
  // which a decode step runs at, varied by a fifth from one minute to the
  // next, docs/fidelity.md) costs each point one sample, which the median
  // drops. Prefill points run `repeats` passes;
  // decode steps, a few milliseconds each, `decode_passes`.
  struct Point {
    std::vector<SeqChunk> chunks;
    std::int32_t passes;
    std::vector<double> samples;
  };
  std::vector<Point> points;
  const std::int32_t prefill_passes = std::max(1, o.repeats);
  const std::int32_t decode_passes = std::max(1, o.decode_passes);
  // Prefill of n fresh tokens.
  for (std::int64_t n : o.prefill_tokens) {
    points.push_back(
        {{SeqChunk{std::span(text).first(static_cast<std::size_t>(n)), 0, tables[0]}}, prefill_passes, {}});
  }
  // Prefill of n new tokens after c cached ones.
  if (cached_grid) {
    for (std::int64_t n : o.cached_new_tokens) {
      for (std::int64_t c : o.cached_tokens) {
        const auto chunk = std::span(text).subspan(static_cast<std::size_t>(c), static_cast<std::size_t>(n));
        points.push_back({{SeqChunk{chunk, c, tables[0]}}, prefill_passes, {}});
      }
    }
  }
  // One decode step of `batch` sequences at `context` cached tokens.
  const std::vector<std::int32_t> next(static_cast<std::size_t>(max_batch), 3);
  for (std::int32_t b : o.decode_batch) {
    for (std::int64_t ctx : o.decode_context) {
      Point& p = points.emplace_back(Point{{}, decode_passes, {}});
      for (std::int32_t s = 0; s < b; ++s) {
        p.chunks.push_back(
            SeqChunk{std::span(&next[static_cast<std::size_t>(s)], 1), ctx, tables[static_cast<std::size_t>(s)]});
      }
    }
  }
  // Progress: one point per table entry, plus the copies.
  const auto total = static_cast<std::int64_t>(points.size() + 1);
  std::int64_t measured = 0;
  auto point_done = [&] {
    if (o.progress) o.progress(++measured, total);
  };
  for (std::int32_t pass = 0; pass < std::max(prefill_passes, decode_passes); ++pass) {
    for (Point& p : points) {
      if (pass >= p.passes) continue;
      p.samples.push_back(SecondsOf([&] { model.Forward(p.chunks, kv, logits); }));
      if (pass + 1 == p.passes) point_done();
    }
  }
  std::size_t k = 0;
  std::vector<double> prefill_tokens = {0}, prefill_s = {0};
  for (std::int64_t n : o.prefill_tokens) {
    prefill_tokens.push_back(static_cast<double>(n));
    prefill_s.push_back(Median(points[k++].samples));
  }
  std::vector<std::vector<double>> cached_s;
  if (cached_grid) {
    for (std::size_t i = 0; i < o.cached_new_tokens.size(); ++i) {
      std::vector<double>& row = cached_s.emplace_back();
      for (std::size_t j = 0; j < o.cached_tokens.size(); ++j) row.push_back(Median(points[k++].samples));
    }
  }
  std::vector<std::vector<double>> decode_s;
  for (std::size_t i = 0; i < o.decode_batch.size(); ++i) {
    std::vector<double>& row = decode_s.emplace_back();
    for (std::size_t j = 0; j < o.decode_context.size(); ++j) row.push_back(Median(points[k++].samples));
  }
  // Copies: weights move between host and "device" memory by memcpy here,
  // so both links are this machine's copy bandwidth; a restore's fixed cost
  // is one block's copy.
  const double copy = MeasureCopyBytesPerSecond(static_cast<std::size_t>(model.weight_bytes()));
  const double block_copy_s = MedianSeconds(o.repeats, [&] {
    std::memcpy(kv.Block(0), kv.Block(1), kv.block_bytes());
  });
  const double open_s = static_cast<double>(model.weight_bytes()) / copy;
  point_done();

  std::string t;
  char buf[512];
  const auto line = [&](const char* fmt, auto... args) {
    std::snprintf(buf, sizeof buf, fmt, args...);
    t += buf;
    t += '\n';
  };
  line("# %s: the CPU reference model (src/engine/cpu_model.h), measured on this", config.name.c_str());
  line("# machine by `talaria profile measure --engine cpu --model %s` (seeded", config.name.c_str());
  line("# weights; each point the median of %d interleaved passes over the grid,", o.repeats);
  line("# decode steps of %d). Format: docs/profiles.md.", std::max(1, o.decode_passes));
  line("");
  line("[model]");
  line("name = \"%s\"", config.name.c_str());
  line("total_params_b = %.6f", static_cast<double>(config.Parameters()) / 1e9);
  line("active_params_b = %.6f", static_cast<double>(config.Parameters()) / 1e9);
  line("layers = %d", config.layers);
  line("max_context_tokens = %d", config.max_context);
  line("");
  line("[attention]");
  line("family = \"gqa\"");
  line("kv_layers = %d", config.layers);
  line("kv_heads = %d", config.kv_heads);
  line("head_dim = %d", config.head_dim());
  line("kv_dtype = \"fp32\"");
  line("");
  line("[deployment]");
  line("tp = 1");
  line("hbm_gib_per_gpu = %g   # the emulated device memory (an option of the measurement)", o.hbm_gib);
  line("weight_bytes_per_rank = %lld   # fp32 weights", static_cast<long long>(model.weight_bytes()));
  line("");
  line("[prefill]   # measured: one fresh prompt of each length");
  t += "tokens = " + List(prefill_tokens, "%.0f") + "\n";
  t += "seconds = " + List(prefill_s, "%.6g") + "\n\n";
  if (cached_grid) {
    line("[prefill_cached]   # measured: new tokens on top of a cached prefix");
    t += "new_tokens = " + List(std::vector<double>(o.cached_new_tokens.begin(), o.cached_new_tokens.end()), "%.0f") + "\n";
    t += "cached_tokens = " + List(std::vector<double>(o.cached_tokens.begin(), o.cached_tokens.end()), "%.0f") + "\n";
    t += "seconds = [\n";
    for (const auto& row : cached_s) t += "  " + List(row, "%.6g") + ",\n";
    t += "]\n\n";
  }
  line("[decode]   # measured: one step of each batch at each cached context");
  std::vector<double> batch(o.decode_batch.begin(), o.decode_batch.end());
  std::vector<double> context(o.decode_context.begin(), o.decode_context.end());
  t += "batch = " + List(batch, "%.0f") + "\n";
  t += "context_tokens = " + List(context, "%.0f") + "\n";
  t += "seconds = [\n";
  for (const auto& row : decode_s) t += "  " + List(row, "%.6g") + ",\n";
  t += "]\n\n";
  line("[transfer]   # measured memcpy bandwidth (host and device are both host memory here)");
  line("h2d_gbps = %.3f", copy / 1e9);
  line("d2d_gbps = %.3f", copy / 1e9);
  line("");
  line("[restore]");
  line("fixed_s = %.3g   # measured: one KV block's copy", block_copy_s);
  line("");
  line("# Switch phases: phase 2 is the measured weight copy; the others are");
  line("# bookkeeping with no device work on a CPU (1 us, the smallest the format");
  line("# takes).");
  for (const char* path : {"d2d", "partial", "h2d"}) {
    line("[switch.%s]", path);
    line("save_teardown_s = 1e-6");
    line("open_weights_s = %.6g", open_s);
    line("kv_shell_s = 1e-6");
    line("runtime_graph_s = 1e-6");
    line("publish_s = 1e-6");
    line("");
  }
  return t;
}

}  // namespace talaria
