#include "engine/cpu_engine.h"

#include <sys/mman.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <future>
#include <thread>

#include "core/error.h"
#include "memory/block_hashes.h"

namespace talaria {
namespace {

using Clock = std::chrono::steady_clock;

double Since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

}  // namespace

struct CpuEngine::Model {
  CpuModelConfig config;
  CpuModel model;
  std::int64_t block_bytes = 0;  // once the block size is known (Attach)
  // HKVR bytes: per emulated rank, one slab store of that rank's shards.
  std::vector<std::unique_ptr<HostKvStore>> host;
  struct Entry {
    std::vector<HostKvStore::Slot> slots;  // one per rank
    std::list<PrefixHash>::iterator lru;
  };
  std::unordered_map<PrefixHash, Entry> entries;
  std::list<PrefixHash> lru;  // front: least recently used

  Model(CpuModelConfig c, std::uint64_t seed) : config(std::move(c)), model(config, SeededWeights(config, seed)) {}
  const std::byte* host_bytes() const { return reinterpret_cast<const std::byte*>(model.host_weights().data()); }
};

struct CpuEngine::Call {
  Model* model = nullptr;
  std::vector<std::int32_t> prompt;
  std::vector<std::int32_t> output;
  std::vector<BlockId> blocks;  // its block table at its last step
  std::int64_t output_tokens = 0;
  std::int64_t kv_len = 0;  // positions whose K/V are in its blocks
  bool checkpoint = false;
  bool done = false;
  // Its KV while swapped out: the leading kv_len positions' blocks of a host
  // buffer from the engine's pool (CpuEngine::swap_pool_), which may be longer.
  std::vector<float> swap;
  bool swapped = false;
};

CpuEngine::CpuEngine(std::vector<CpuModelConfig> models, CpuEngineOptions options) : options_(options) {
  if (models.empty()) throw InputError("cpu engine", "needs at least one model");
  if (options_.tp_ranks < 1) throw InputError("cpu engine: tp_ranks", "must be at least 1");
  if (options_.link_gbps < 0) throw InputError("cpu engine: link_gbps", "must not be negative");
  if (options_.host_kv_bytes < 0) throw InputError("cpu engine: host_kv_bytes", "must not be negative");
  for (std::size_t i = 0; i < models.size(); ++i) {
    models[i].Validate();
    if (models[i].kv_heads % options_.tp_ranks != 0) {
      throw InputError("cpu model '" + models[i].name + "'",
                       "kv_heads " + std::to_string(models[i].kv_heads) + " cannot be split over " +
                           std::to_string(options_.tp_ranks) + " emulated ranks");
    }
    models_.push_back(std::make_unique<Model>(std::move(models[i]), options_.seed + i));
  }
}

CpuEngine::~CpuEngine() {
  if (copies_.valid()) copies_.get();
  if (arena_ != nullptr) munmap(arena_, arena_bytes_);
}

CpuEngine::Model* CpuEngine::FindModel(const std::string& name) {
  for (auto& m : models_) {
    if (m->config.name == name) return m.get();
  }
  return nullptr;
}

CpuEngine::Model& CpuEngine::ModelNamed(const std::string& name) {
  if (Model* m = FindModel(name)) return *m;
  throw InputError("cpu engine", "no cpu model named '" + name + "' (the instance hosts a model the engine lacks)");
}

void CpuEngine::Attach(const Substrate& substrate) {
  TALARIA_CHECK(arena_ == nullptr, "cpu engine attached twice");
  sub_ = substrate;
  Model& m = ModelNamed(sub_.layout->active());
  if (sub_.layout->weights().size() != m.model.weight_bytes()) {
    throw InputError("cpu model '" + m.config.name + "'",
                     "its profile declares " + std::to_string(sub_.layout->weights().size()) +
                         " weight bytes per rank; the model has " + std::to_string(m.model.weight_bytes()));
  }
  arena_bytes_ = static_cast<std::size_t>(sub_.layout->arena_bytes());
  // The emulated device memory: one mapping, its pages backed when touched.
  void* p = mmap(nullptr, arena_bytes_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) throw InputError("cpu engine", "cannot map a device arena of " + std::to_string(arena_bytes_) + " bytes");
  arena_ = static_cast<std::byte*>(p);

  const std::int32_t ranks = options_.tp_ranks;
  const auto per_model = options_.host_kv_bytes / static_cast<std::int64_t>(models_.size());
  for (auto& m : models_) {
    m->block_bytes = m->config.KvBlockBytes(sub_.block_tokens);
    const auto slabs = static_cast<std::int32_t>(per_model / m->block_bytes);
    for (std::int32_t r = 0; r < ranks && slabs > 0; ++r) {  // no room for a block: no host KV
      m->host.push_back(std::make_unique<HostKvStore>(static_cast<std::size_t>(m->block_bytes / ranks), slabs));
    }
  }
  LoadWeights(m, nullptr);
}

void CpuEngine::LoadWeights(Model& m, const GatherPlan* plan) {
  const Stager& st = *sub_.stager;
  const std::int64_t bytes = m.model.weight_bytes();
  const bool staged = plan != nullptr && plan->d2d_bytes > 0 && st.staged_model() == m.config.name &&
                      st.serial() == staged_serial_;
  const auto t = Clock::now();
  std::int64_t d2d = 0, h2d = 0;
  if (!staged) {
    std::memcpy(arena_, m.host_bytes(), static_cast<std::size_t>(bytes));
    h2d = bytes;
  } else {
    const std::int64_t chunk = st.chunk_bytes();
    for (std::size_t i = 0; static_cast<std::int64_t>(i) * chunk < bytes; ++i) {
      const std::int64_t off = static_cast<std::int64_t>(i) * chunk;
      const auto len = static_cast<std::size_t>(std::min(chunk, bytes - off));
      if (i < st.chunks().size() && st.chunks()[i] == Stager::ChunkState::kClean && materialized_[i]) {
        std::memcpy(arena_ + off, arena_ + st.ChunkRange(i).begin, len);  // D2D from the staged copy
        d2d += static_cast<std::int64_t>(len);
      } else {
        std::memcpy(arena_ + off, m.host_bytes() + off, len);  // H2D: dirty or never staged
        h2d += static_cast<std::int64_t>(len);
      }
    }
    TALARIA_CHECK(d2d == plan->d2d_bytes, "the gather moved other bytes device-to-device than the plan");
  }
  const double copy_s = Since(t);
  stats_.d2d_weight_bytes += d2d;
  stats_.h2d_weight_bytes += h2d;
  HoldToLink(h2d, copy_s * static_cast<double>(h2d) / static_cast<double>(std::max<std::int64_t>(bytes, 1)));

  if (active_ != nullptr && active_ != &m) active_->model.Bind(nullptr);
  m.model.Bind(reinterpret_cast<const float*>(arena_));
  active_ = &m;
  const Region kv = sub_.pool->region();
  kv_.emplace(m.config, sub_.block_tokens,
              std::span<std::byte>(arena_ + kv.begin, static_cast<std::size_t>(kv.size())));
  if (sub_.pool->block_bytes() != m.block_bytes) {
    throw InputError("cpu model '" + m.config.name + "'",
                     "its profile gives KV blocks of " + std::to_string(sub_.pool->block_bytes()) +
                         " bytes; the model's are " + std::to_string(m.block_bytes));
  }
}

void CpuEngine::MaterializeStaging(bool overlap) {
  // The copies started at the last boundary finish before this step
  // touches memory: a block allocated since over one of their chunks is
  // written only after the chunk's (now stale) staged bytes landed.
  if (copies_.valid()) copies_.get();
  const Stager& st = *sub_.stager;
  if (st.serial() != staged_serial_) {
    staged_serial_ = st.serial();
    materialized_.assign(st.chunks().size(), false);
  }
  const Model* m = FindModel(st.staged_model());
  if (m == nullptr) return;  // nothing staged, or not one of ours
  copy_jobs_.clear();
  for (std::size_t i = 0; i < st.chunks().size(); ++i) {
    if (st.chunks()[i] != Stager::ChunkState::kClean || materialized_[i]) continue;
    const Region r = st.ChunkRange(i);
    copy_jobs_.push_back({arena_ + r.begin, m->host_bytes() + static_cast<std::int64_t>(i) * st.chunk_bytes(),
                          static_cast<std::size_t>(r.size())});
    materialized_[i] = true;
    stats_.staged_bytes += r.size();
  }
  if (copy_jobs_.empty()) return;
  if (!overlap) {
    for (const CopyJob& j : copy_jobs_) std::memcpy(j.dst, j.src, j.bytes);
    return;
  }
  // The copy engine: these chunks are written while the step computes
  // (clean chunks overlap no allocated block, so the step never touches them).
  copies_ = std::async(std::launch::async, [jobs = copy_jobs_] {
    for (const CopyJob& j : jobs) std::memcpy(j.dst, j.src, j.bytes);
  });
}

void CpuEngine::HoldToLink(std::int64_t bytes, double copy_s) {
  link_bytes_ += bytes;
  link_copy_s_ += copy_s;
}

double CpuEngine::WaitOutLink() {
  const double link_s = options_.link_gbps > 0 ? static_cast<double>(link_bytes_) / (options_.link_gbps * 1e9) : 0;
  const double wait_s = std::max(0.0, link_s - link_copy_s_);
  if (wait_s > 0) std::this_thread::sleep_for(std::chrono::duration<double>(wait_s));
  return wait_s;
}

std::span<float> CpuEngine::Shard(BlockId block, std::int32_t layer, bool v, std::int32_t rank) {
  const CpuModelConfig& c = active_->config;
  const std::size_t heads = static_cast<std::size_t>(c.kv_heads / options_.tp_ranks);
  const std::size_t n = heads * static_cast<std::size_t>(sub_.block_tokens) * static_cast<std::size_t>(c.head_dim());
  float* base = v ? kv_->V(block, layer) : kv_->K(block, layer);
  return {base + static_cast<std::size_t>(rank) * n, n};
}

std::size_t CpuEngine::KvBlocks(const Call& c) const {
  return static_cast<std::size_t>((c.kv_len + sub_.block_tokens - 1) / sub_.block_tokens);
}

CpuEngine::Call& CpuEngine::CallFor(const SeqRef& seq) {
  auto& slot = calls_[seq.call_id];
  if (slot == nullptr) {
    if (seq.prompt.empty()) {
      throw InputError("cpu engine", "call " + std::to_string(seq.call_id) +
                                         " has no prompt token ids (the cpu engine computes real tokens)");
    }
    slot = std::make_unique<Call>();
    slot->model = active_;
    slot->prompt.assign(seq.prompt.begin(), seq.prompt.end());
    slot->output_tokens = seq.output_tokens;
    slot->checkpoint = seq.checkpoint;
  }
  slot->blocks.clear();
  if (seq.blocks != nullptr) seq.blocks->AppendIds(slot->blocks);
  return *slot;
}

std::int32_t CpuEngine::Pick(std::span<const float> logits) const {
  return options_.printable_output ? CpuModel::ArgmaxPrintable(logits) : CpuModel::Argmax(logits);
}

std::int64_t CpuEngine::RestoreFromHost(Model& m, Call& c, std::span<const BlockId> blocks, std::int64_t tokens) {
  const std::int32_t bt = sub_.block_tokens;
  HashTokenBlocks(c.prompt, bt, hashes_);
  const auto want = std::min<std::size_t>(static_cast<std::size_t>((tokens + bt - 1) / bt), hashes_.size());
  // Each rank copies its shards in and reports how many leading blocks it
  // holds with bytes matching their checkpoint hash; the call resumes at the
  // shortest (the prefix they all agree on).
  std::size_t agreed = want;
  std::size_t longest = 0;
  const auto t = Clock::now();
  std::int64_t moved = 0;
  for (std::int32_t r = 0; r < options_.tp_ranks; ++r) {
    std::size_t len = 0;
    for (; len < want; ++len) {
      auto it = m.entries.find(hashes_[len]);
      if (it == m.entries.end()) break;
      const HostKvStore::Slot slot = it->second.slots[static_cast<std::size_t>(r)];
      bool ok;
      if (options_.tp_ranks == 1) {
        ok = m.host[0]->Get(slot, kv_->Block(blocks[len]));
      } else {
        shard_.resize(m.host[static_cast<std::size_t>(r)]->block_bytes());
        ok = m.host[static_cast<std::size_t>(r)]->Get(slot, shard_.data());
        if (ok) {  // scatter the shard's heads into every layer's K and V
          std::size_t off = 0;
          for (std::int32_t l = 0; l < m.config.layers; ++l) {
            for (bool v : {false, true}) {
              const auto dst = Shard(blocks[len], l, v, r);
              std::memcpy(dst.data(), shard_.data() + off, dst.size_bytes());
              off += dst.size_bytes();
            }
          }
        }
      }
      moved += static_cast<std::int64_t>(m.host[static_cast<std::size_t>(r)]->block_bytes());
      if (!ok) {
        ++stats_.rejected_blocks;
        DropHostEntry(m, hashes_[len]);  // bad bytes: checkpoint afresh later
        break;
      }
    }
    agreed = std::min(agreed, len);
    longest = std::max(longest, len);
  }
  HoldToLink(moved, Since(t));
  if (longest != agreed) ++stats_.rank_disagreements;
  for (std::size_t i = 0; i < agreed; ++i) {
    auto it = m.entries.find(hashes_[i]);
    m.lru.splice(m.lru.end(), m.lru, it->second.lru);
  }
  stats_.restored_blocks += static_cast<std::int64_t>(agreed);
  return std::min<std::int64_t>(tokens, static_cast<std::int64_t>(agreed) * bt);
}

void CpuEngine::DropHostEntry(Model& m, PrefixHash hash) {
  auto it = m.entries.find(hash);
  if (it == m.entries.end()) return;
  for (std::size_t r = 0; r < it->second.slots.size(); ++r) m.host[r]->Free(it->second.slots[r]);
  m.lru.erase(it->second.lru);
  m.entries.erase(it);
}

bool CpuEngine::PutBlock(Model& m, PrefixHash hash, BlockId block) {
  if (m.host.empty()) return false;
  while (m.host[0]->free_slabs() == 0) {
    if (m.lru.empty()) return false;
    DropHostEntry(m, m.lru.front());
  }
  Model::Entry e;
  for (std::int32_t r = 0; r < options_.tp_ranks; ++r) {
    HostKvStore& store = *m.host[static_cast<std::size_t>(r)];
    if (options_.tp_ranks == 1) {
      e.slots.push_back(store.Put(kv_->Block(block)));
    } else {
      shard_.resize(store.block_bytes());
      std::size_t off = 0;
      for (std::int32_t l = 0; l < m.config.layers; ++l) {
        for (bool v : {false, true}) {
          const auto src = Shard(block, l, v, r);
          std::memcpy(shard_.data() + off, src.data(), src.size_bytes());
          off += src.size_bytes();
        }
      }
      e.slots.push_back(store.Put(shard_.data()));
    }
  }
  m.lru.push_back(hash);
  e.lru = std::prev(m.lru.end());
  m.entries.emplace(hash, std::move(e));
  return true;
}

void CpuEngine::Checkpoint(Model& m, Call& c) {
  const std::int32_t bt = sub_.block_tokens;
  // The context whose K/V is in the blocks: prompt, then every output token
  // but the last (sampled, never fed back).
  context_.assign(c.prompt.begin(), c.prompt.end());
  context_.insert(context_.end(), c.output.begin(), c.output.end());
  context_.resize(static_cast<std::size_t>(c.kv_len));
  HashTokenBlocks(context_, bt, hashes_);
  const auto t = Clock::now();
  std::int64_t moved = 0;
  for (std::size_t i = 0; i < hashes_.size() && i < c.blocks.size(); ++i) {
    auto it = m.entries.find(hashes_[i]);
    if (it != m.entries.end()) {  // already there (a shared prefix): refresh its place
      m.lru.splice(m.lru.end(), m.lru, it->second.lru);
      continue;
    }
    if (!PutBlock(m, hashes_[i], c.blocks[i])) break;
    moved += m.block_bytes;
    ++stats_.checkpointed_blocks;
  }
  HoldToLink(moved, Since(t));
}

CpuEngine::Model& CpuEngine::BeginStep(const ModelProfile& model) {
  link_bytes_ = 0;
  link_copy_s_ = 0;
  MaterializeStaging(true);
  Model& m = ModelNamed(model.name);
  TALARIA_CHECK(&m == active_, "a step for a model that is not active");
  return m;
}

void CpuEngine::TakeTokens(Model& m) {
  const auto vocab = static_cast<std::size_t>(m.config.vocab);
  for (std::size_t i = 0; i < chunk_calls_.size(); ++i) {
    Call& c = *chunk_calls_[i];
    c.kv_len = chunks_[i].cached + static_cast<std::int64_t>(chunks_[i].tokens.size());
    c.output.push_back(Pick(std::span<const float>(logits_).subspan(i * vocab, vocab)));
    if (static_cast<std::int64_t>(c.output.size()) >= c.output_tokens) {
      c.done = true;
      if (c.checkpoint) Checkpoint(m, c);
    }
  }
}

Duration CpuEngine::Prefill(const PrefillStep& step) {
  const auto start = Clock::now();
  Model& m = BeginStep(*step.model);
  chunks_.clear();
  chunk_calls_.clear();
  for (const PrefillItem& item : step.items) {
    Call& c = CallFor(item.seq);
    if (item.new_tokens == 0) {  // swapped out at its last slot's end: copy its KV back
      TALARIA_CHECK(c.swapped, "a restore of a call that was not swapped out");
      const auto t = Clock::now();
      const std::size_t n = kv_->block_floats();
      const std::size_t blocks = KvBlocks(c);
      for (std::size_t b = 0; b < blocks; ++b) {
        std::memcpy(kv_->Block(c.blocks[b]), c.swap.data() + b * n, n * sizeof(float));
      }
      HoldToLink(static_cast<std::int64_t>(blocks * n * sizeof(float)), Since(t));
      swap_pool_.push_back(std::move(c.swap));
      c.swap = {};
      c.swapped = false;
      continue;
    }
    std::int64_t cached = item.cached_tokens;
    if (item.restore_tokens > 0) cached = RestoreFromHost(m, c, c.blocks, item.restore_tokens);
    const auto prompt = std::span<const std::int32_t>(c.prompt);
    chunks_.push_back(SeqChunk{prompt.subspan(static_cast<std::size_t>(cached)), cached, c.blocks});
    chunk_calls_.push_back(&c);
    stats_.computed_tokens += static_cast<std::int64_t>(prompt.size()) - cached;
  }
  if (!chunks_.empty()) m.model.Forward(chunks_, *kv_, logits_);
  TakeTokens(m);
  WaitOutLink();
  return std::chrono::duration_cast<Duration>(Clock::now() - start);
}

Duration CpuEngine::Decode(const DecodeStep& step) {
  const auto start = Clock::now();
  Model& m = BeginStep(*step.model);
  for (const SeqRef& seq : step.seqs) CallFor(seq);
  for (std::int32_t it = 0; it < step.iterations; ++it) {
    chunks_.clear();
    chunk_calls_.clear();
    for (const SeqRef& seq : step.seqs) {
      Call& c = *calls_.at(seq.call_id);
      if (c.done) continue;
      chunks_.push_back(SeqChunk{std::span<const std::int32_t>(&c.output.back(), 1), c.kv_len, c.blocks});
      chunk_calls_.push_back(&c);
    }
    if (chunks_.empty()) break;
    m.model.Forward(chunks_, *kv_, logits_);
    TakeTokens(m);
  }
  WaitOutLink();
  return std::chrono::duration_cast<Duration>(Clock::now() - start);
}

SwitchTiming CpuEngine::Switch(const SwitchStep& step) {
  SwitchTiming timing;
  link_bytes_ = 0;
  link_copy_s_ = 0;
  auto t = Clock::now();
  // Save: the outgoing model's unfinished calls leave with its KV region.
  if (active_ != nullptr) {
    const std::size_t n = kv_->block_floats();
    for (auto& [id, c] : calls_) {
      if (c->model != active_ || c->done || c->swapped || c->kv_len == 0) continue;
      const std::size_t blocks = KvBlocks(*c);
      // Into a pooled host buffer: one written before is already backed, so
      // the copy runs at memory bandwidth rather than faulting in fresh pages
      // (as a GPU engine swaps into pinned buffers allocated once).
      if (c->swap.empty() && !swap_pool_.empty()) {
        c->swap = std::move(swap_pool_.back());
        swap_pool_.pop_back();
      }
      if (c->swap.size() < blocks * n) c->swap.resize(blocks * n);
      for (std::size_t b = 0; b < blocks; ++b) {
        std::memcpy(c->swap.data() + b * n, kv_->Block(c->blocks[b]), n * sizeof(float));
      }
      c->swapped = true;
      ++stats_.swapped_out_calls;
      HoldToLink(static_cast<std::int64_t>(blocks * n * sizeof(float)), 0);
    }
  }
  timing.save_teardown_s = Since(t);
  t = Clock::now();
  // Open: gather the target's weights (clean staged chunks on device).
  MaterializeStaging(false);
  Model& to = ModelNamed(step.to->name);
  if (to.model.weight_bytes() != step.to->weight_bytes_per_rank) {
    throw InputError("cpu model '" + to.config.name + "'",
                     "its profile declares " + std::to_string(step.to->weight_bytes_per_rank) +
                         " weight bytes per rank; the model has " + std::to_string(to.model.weight_bytes()));
  }
  LoadWeights(to, &step.plan);
  timing.open_weights_s = Since(t);
  timing.open_weights_s += WaitOutLink();
  return timing;
}

std::span<const std::int32_t> CpuEngine::Output(std::int64_t call_id) const {
  auto it = calls_.find(call_id);
  return it == calls_.end() ? std::span<const std::int32_t>() : std::span<const std::int32_t>(it->second->output);
}

void CpuEngine::Forget(std::int64_t call_id) {
  auto it = calls_.find(call_id);
  if (it == calls_.end()) return;
  if (!it->second->swap.empty()) swap_pool_.push_back(std::move(it->second->swap));  // cancelled while swapped out
  calls_.erase(it);
}

std::span<std::byte> CpuEngine::HostShard(const std::string& model, PrefixHash hash, std::int32_t rank) {
  Model& m = ModelNamed(model);
  auto it = m.entries.find(hash);
  if (it == m.entries.end()) return {};
  return m.host[static_cast<std::size_t>(rank)]->Bytes(it->second.slots[static_cast<std::size_t>(rank)]);
}

}  // namespace talaria
