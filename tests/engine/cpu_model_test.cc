#include "engine/cpu_model.h"

#include <gtest/gtest.h>

#include <cstring>
#include <numeric>
#include <vector>

#include "core/error.h"
#include "engine/test_models.h"
#include "memory/host_kv_store.h"

namespace talaria {
namespace {

CpuModelConfig Tiny() { return testing::TinyCpuModel(); }

constexpr std::int32_t kBlockTokens = 16;

std::vector<std::int32_t> Prompt(std::int32_t n, std::int32_t salt = 0) {
  std::vector<std::int32_t> p(static_cast<std::size_t>(n));
  for (std::int32_t i = 0; i < n; ++i) p[static_cast<std::size_t>(i)] = 3 + (i * 37 + salt * 11) % 256;
  return p;
}

std::vector<std::int32_t> Blocks(std::int32_t first, std::int32_t count) {
  std::vector<std::int32_t> b(static_cast<std::size_t>(count));
  std::iota(b.begin(), b.end(), first);
  return b;
}

// A sequence generating greedily on one arena through its block table.
struct Seq {
  std::vector<std::int32_t> tokens;  // everything in KV so far, then pending
  std::int64_t cached = 0;
  std::vector<std::int32_t> blocks;
};

// Feeds the pending tokens in chunks of `chunk`, then decodes `n` tokens
// greedily; returns the generated tokens and the logits of the first one.
std::vector<std::int32_t> Generate(CpuModel& m, KvArena& kv, Seq& s, std::int32_t chunk, std::int32_t n,
                              std::vector<float>* first_logits = nullptr) {
  std::vector<float> logits;
  while (s.cached < static_cast<std::int64_t>(s.tokens.size())) {
    const auto len = std::min<std::int64_t>(chunk, static_cast<std::int64_t>(s.tokens.size()) - s.cached);
    SeqChunk c{std::span(s.tokens).subspan(static_cast<std::size_t>(s.cached), static_cast<std::size_t>(len)), s.cached,
               s.blocks};
    m.Forward(std::span(&c, 1), kv, logits);
    s.cached += len;
  }
  if (first_logits != nullptr) *first_logits = logits;
  std::vector<std::int32_t> out;
  for (std::int32_t i = 0; i < n; ++i) {
    const std::int32_t next = CpuModel::Argmax(logits);
    out.push_back(next);
    s.tokens.push_back(next);
    if (i + 1 == n) break;
    SeqChunk c{std::span(s.tokens).subspan(static_cast<std::size_t>(s.cached), 1), s.cached, s.blocks};
    m.Forward(std::span(&c, 1), kv, logits);
    s.cached += 1;
  }
  return out;
}

class CpuModelTest : public ::testing::Test {
 protected:
  CpuModelTest() : model_(Tiny(), SeededWeights(Tiny(), 7)) {}
  CpuModel model_;
};

// Prefill in chunks of any size (1 = token by token) writes the same KV
// bytes and ends in the same logits, bit for bit, as one shot.
class ChunkedPrefillTest : public ::testing::TestWithParam<std::int32_t> {};

TEST_P(ChunkedPrefillTest, MatchesOneShotBitForBit) {
  CpuModelConfig config = Tiny();
  if (GetParam() == 16) {  // one wider model too: every product on larger shapes
    config.hidden = 256;
    config.heads = 8;
    config.ffn = 768;
  }
  CpuModel model(config, SeededWeights(config, 7));
  KvArena a(config, kBlockTokens, 32), b(config, kBlockTokens, 32);
  Seq one{Prompt(100), 0, Blocks(0, 10)};
  Seq chunked{Prompt(100), 0, Blocks(0, 10)};
  std::vector<float> la, lb;
  const auto ta = Generate(model, a, one, 1000, 12, &la);
  const auto tb = Generate(model, b, chunked, GetParam(), 12, &lb);
  ASSERT_EQ(la.size(), lb.size());
  EXPECT_EQ(std::memcmp(la.data(), lb.data(), la.size() * sizeof(float)), 0);
  EXPECT_EQ(ta, tb);
  EXPECT_EQ(std::memcmp(a.Block(0), b.Block(0), a.block_bytes() * 7), 0);  // the KV bytes too
}

INSTANTIATE_TEST_SUITE_P(ChunkSizes, ChunkedPrefillTest, ::testing::Values(1, 7, 16, 23, 64));

TEST_F(CpuModelTest, BatchedDecodeMatchesEachSequenceAlone) {
  KvArena kv(Tiny(), kBlockTokens, 32);
  Seq s1{Prompt(40, 1), 0, Blocks(0, 4)};
  Seq s2{Prompt(70, 2), 0, Blocks(4, 6)};
  std::vector<float> logits;
  SeqChunk both[2] = {{s1.tokens, 0, s1.blocks}, {s2.tokens, 0, s2.blocks}};
  model_.Forward(both, kv, logits);  // one prefill batch of two sequences
  std::vector<float> alone1, alone2;
  KvArena kv1(Tiny(), kBlockTokens, 32), kv2(Tiny(), kBlockTokens, 32);
  SeqChunk c1{s1.tokens, 0, s1.blocks}, c2{s2.tokens, 0, s2.blocks};
  model_.Forward(std::span(&c1, 1), kv1, alone1);
  model_.Forward(std::span(&c2, 1), kv2, alone2);
  const auto v = static_cast<std::size_t>(Tiny().vocab);
  EXPECT_EQ(std::memcmp(logits.data(), alone1.data(), v * sizeof(float)), 0);
  EXPECT_EQ(std::memcmp(logits.data() + v, alone2.data(), v * sizeof(float)), 0);
}

// A session's second call: reusing the first call's KV (a device hit), or
// restoring it into other blocks of another arena by copying its bytes (a
// host restore), gives the same tokens as recomputing the whole context.
TEST_F(CpuModelTest, DeviceHitHostRestoreAndRecomputeGiveTheSameTokens) {
  KvArena device(Tiny(), kBlockTokens, 64);
  Seq first{Prompt(50, 3), 0, Blocks(0, 12)};
  Generate(model_, device, first, 32, 6);
  std::vector<std::int32_t> turn = Prompt(20, 4);  // the tool result
  // (a) device hit: continue on the same blocks.
  Seq hit = first;
  hit.tokens.insert(hit.tokens.end(), turn.begin(), turn.end());
  hit.cached = first.cached;
  const auto a = Generate(model_, device, hit, 32, 10);
  // (b) host restore: the cached blocks go to host memory and come back into
  // different blocks of a fresh arena.
  const std::int32_t cached_blocks = static_cast<std::int32_t>((first.cached + kBlockTokens - 1) / kBlockTokens);
  std::vector<float> host(device.block_floats() * static_cast<std::size_t>(cached_blocks));
  for (std::int32_t i = 0; i < cached_blocks; ++i) {
    std::memcpy(host.data() + device.block_floats() * static_cast<std::size_t>(i), device.Block(i), device.block_bytes());
  }
  KvArena other(Tiny(), kBlockTokens, 64);
  Seq restored = first;
  restored.tokens.insert(restored.tokens.end(), turn.begin(), turn.end());
  restored.blocks = Blocks(40, 12);
  for (std::int32_t i = 0; i < cached_blocks; ++i) {
    std::memcpy(other.Block(40 + i), host.data() + device.block_floats() * static_cast<std::size_t>(i), other.block_bytes());
  }
  const auto b = Generate(model_, other, restored, 32, 10);
  // (c) recompute: the whole context from nothing.
  KvArena fresh(Tiny(), kBlockTokens, 64);
  Seq recompute{hit.tokens, 0, Blocks(0, 12)};
  recompute.tokens.resize(first.tokens.size() + turn.size());
  const auto c = Generate(model_, fresh, recompute, 1000, 10);
  EXPECT_EQ(a, b);
  EXPECT_EQ(a, c);
}

// Through the host KV store (real bytes in host slabs, hash-checked): a full
// restore, a partial restore whose tail is recomputed, and a restore that
// finds a corrupted slab and falls back to recomputing from there, all give
// the tokens of the device hit.
TEST_F(CpuModelTest, HostStoreRestoresFullPartialAndCorruptedAlike) {
  KvArena device(Tiny(), kBlockTokens, 64);
  Seq first{Prompt(64, 5), 0, Blocks(0, 12)};  // 64 tokens + 6 generated: 4 full blocks + a tail
  Generate(model_, device, first, 32, 6);
  const std::vector<std::int32_t> turn = Prompt(24, 6);
  Seq hit = first;
  hit.tokens.insert(hit.tokens.end(), turn.begin(), turn.end());
  const auto expected = Generate(model_, device, hit, 32, 8);

  const std::int32_t full_blocks = static_cast<std::int32_t>(first.cached / kBlockTokens);  // checkpointed blocks
  HostKvStore store(device.block_bytes(), 16);
  std::vector<HostKvStore::Slot> slots;
  for (std::int32_t b = 0; b < full_blocks; ++b) slots.push_back(store.Put(device.Block(b)));

  // Restores the first `blocks` slabs into a fresh arena (stopping at the
  // first slab that fails its hash), then recomputes everything after them.
  const auto restore_and_continue = [&](std::int32_t blocks) {
    KvArena fresh(Tiny(), kBlockTokens, 64);
    Seq s = first;
    s.tokens.resize(static_cast<std::size_t>(first.cached));  // the context as of the checkpoint
    s.tokens.insert(s.tokens.end(), turn.begin(), turn.end());
    s.blocks = Blocks(20, 12);
    std::int32_t restored = 0;
    while (restored < blocks && store.Get(slots[static_cast<std::size_t>(restored)], fresh.Block(20 + restored))) ++restored;
    s.cached = static_cast<std::int64_t>(restored) * kBlockTokens;
    return std::make_pair(restored, Generate(model_, fresh, s, 32, 8));
  };
  const auto [all, full] = restore_and_continue(full_blocks);
  EXPECT_EQ(all, full_blocks);
  EXPECT_EQ(full, expected);
  const auto [some, partial] = restore_and_continue(2);  // the unagreed tail is recomputed
  EXPECT_EQ(some, 2);
  EXPECT_EQ(partial, expected);
  store.Bytes(slots[1])[100] ^= std::byte{0x10};  // host memory goes bad under block 1
  const auto [until_bad, recovered] = restore_and_continue(full_blocks);
  EXPECT_EQ(until_bad, 1);  // detected: only block 0 was restored
  EXPECT_EQ(recovered, expected);
}

TEST_F(CpuModelTest, OutputIsAFunctionOfTheSeed) {
  KvArena kv(Tiny(), kBlockTokens, 16);
  Seq s{Prompt(30), 0, Blocks(0, 4)};
  const auto base = Generate(model_, kv, s, 64, 16);
  CpuModel again(Tiny(), SeededWeights(Tiny(), 7));
  KvArena kv2(Tiny(), kBlockTokens, 16);
  Seq s2{Prompt(30), 0, Blocks(0, 4)};
  EXPECT_EQ(Generate(again, kv2, s2, 64, 16), base);
  CpuModel other(Tiny(), SeededWeights(Tiny(), 8));
  KvArena kv3(Tiny(), kBlockTokens, 16);
  Seq s3{Prompt(30), 0, Blocks(0, 4)};
  EXPECT_NE(Generate(other, kv3, s3, 64, 16), base);
}

TEST(CpuModelWeightsTest, AMissingOrMisshapenTensorIsNamed) {
  TensorMap w = SeededWeights(Tiny(), 1);
  w.erase("model.layers.1.mlp.up_proj.weight");
  try {
    CpuModel m(Tiny(), w);
    FAIL() << "accepted a missing tensor";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("model.layers.1.mlp.up_proj.weight"), std::string::npos) << e.what();
  }
  w = SeededWeights(Tiny(), 1);
  w["model.norm.weight"].shape = {63};
  try {
    CpuModel m(Tiny(), w);
    FAIL() << "accepted a wrong shape";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("[63], expected [64]"), std::string::npos) << e.what();
  }
  CpuModelConfig bad = Tiny();
  bad.kv_heads = 3;
  EXPECT_THROW(bad.Validate(), InputError);
}

}  // namespace
}  // namespace talaria
