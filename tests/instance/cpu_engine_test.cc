// The instance scheduler driving the CPU engine (real tokens on real bytes):
// every KV path the scheduler picks — device hit, host restore after a
// forced switch, recomputation, a partial restore stopped by a corrupted
// shard, a call swapped out at a slot end, a switch whose weights came
// partly from staged chunks — generates exactly the tokens of the model run
// alone on the same prompt (issue 6, "Correctness, token-exact").
#include "engine/cpu_engine.h"

#include <gtest/gtest.h>

#include <cstring>
#include <deque>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/units.h"
#include "driver/instance_runner.h"
#include "engine/test_models.h"
#include "instance/instance.h"
#include "instance/test_profiles.h"
#include "memory/block_hashes.h"

namespace talaria {
namespace {

constexpr std::int32_t kBlockTokens = 16;
constexpr std::int32_t kKvBlocks = 150;  // of model a: small, so sessions reach the staged rows

CpuModelConfig ModelA() { return testing::TinyCpuModel("a", 64, 128); }
CpuModelConfig ModelB() { return testing::TinyCpuModel("b", 96, 192); }


std::vector<std::int32_t> Printable(std::int32_t n, std::int32_t salt) {
  std::vector<std::int32_t> t(static_cast<std::size_t>(n));
  for (std::int32_t i = 0; i < n; ++i) t[static_cast<std::size_t>(i)] = 3 + 32 + (i * 37 + salt * 11) % 95;
  return t;
}

std::vector<std::int32_t> Reference(const CpuModelConfig& c, std::uint64_t seed, const std::vector<std::int32_t>& prompt,
                                    std::int32_t n) {
  return testing::GreedyAlone(c, seed, prompt, n, kBlockTokens);
}

// One instance over models a and b on the CPU engine, driven in virtual
// time advanced by each step's measured duration.
class CpuInstance : public InstanceEvents {
 public:
  explicit CpuInstance(CpuEngineOptions options = {}, Ablation ablation = {},
                       const std::function<void(InstanceConfig&)>& tweak = nullptr) {
    const std::int64_t weights = std::max(ModelA().WeightBytes(), ModelB().WeightBytes());
    const std::int64_t block_a = ModelA().KvBlockBytes(kBlockTokens);
    const std::int64_t fixed = 128 * kKiB;
    const double hbm_gib = static_cast<double>(weights + kKvBlocks * block_a + fixed) / static_cast<double>(kGiB);
    profiles_.Add(testing::CpuModelProfile(ModelA(), hbm_gib));
    profiles_.Add(testing::CpuModelProfile(ModelB(), hbm_gib));
    InstanceConfig c = testing::TinyInstance("cpu-0", {"a", "b"});
    c.engine = "cpu";
    c.runtime_gib = c.graph_pool_gib = static_cast<double>(fixed / 2) / static_cast<double>(kGiB);
    c.min_kv_gib = 0;
    c.block_tokens = kBlockTokens;
    c.staging_chunk_mib = 0.0625;  // 64 KiB chunks
    c.host_kv_gib_per_rank = 0.0625;
    c.ablation = ablation;
    if (tweak) tweak(c);
    instance_ = std::make_unique<Instance>(c, profiles_);
    options.host_kv_bytes = 16 * kMiB;
    engine_ = std::make_unique<CpuEngine>(std::vector<CpuModelConfig>{ModelA(), ModelB()}, options);
    instance_->Warmup("a", now_);
    engine_->Attach(instance_->substrate());
    runner_ = std::make_unique<InstanceRunner>(*instance_, *engine_);
  }

  std::int64_t Submit(const std::string& session, std::int32_t index, const std::string& model,
                      std::vector<std::int32_t> prompt, std::int64_t output) {
    prompts_.push_back(std::move(prompt));
    chains_.emplace_back();
    HashTokenBlocks(prompts_.back(), kBlockTokens, chains_.back());
    CallRequest c;
    c.id = next_id_++;
    c.session_id = session;
    c.continuation = index > 0;
    c.model = model;
    c.prompt_tokens = static_cast<std::int64_t>(prompts_.back().size());
    c.prefix_tokens = index > 0 ? c.prompt_tokens / 2 : 0;
    c.output_tokens = output;
    c.chain = chains_.back();
    c.prompt_ids = prompts_.back();
    instance_->Enqueue(c, now_);
    return c.id;
  }

  void Run() {
    for (int steps = 0; steps < 100000; ++steps) {
      const Instance::Step& step = runner_->Plan(now_, now_);
      if (step.kind == Instance::Step::Kind::kIdle) {
        if (step.wake_at == TimePoint::max()) return;
        now_ = step.wake_at;
        continue;
      }
      now_ += runner_->Execute();
      runner_->Commit(now_);
      runner_->Deliver(*this);
    }
    FAIL() << "the instance never went idle";
  }
  void Wait(double s) { now_ += FromSeconds(s); }

  void OnFirstToken(std::int64_t, TimePoint) override {}
  void OnFinished(const CallRecord& r) override {
    const auto out = engine_->Output(r.id);
    outputs[r.id].assign(out.begin(), out.end());
    records[r.id] = r;
    engine_->Forget(r.id);
  }
  void OnSwitch(const SwitchRecord& r) override { switches.push_back(r); }
  void OnRound(const RoundRecord&) override {}

  CpuEngine& engine() { return *engine_; }
  Instance& instance() { return *instance_; }
  std::map<std::int64_t, std::vector<std::int32_t>> outputs;
  std::map<std::int64_t, CallRecord> records;
  std::vector<SwitchRecord> switches;

 private:
  ProfileSet profiles_;
  std::unique_ptr<Instance> instance_;
  std::unique_ptr<CpuEngine> engine_;
  std::unique_ptr<InstanceRunner> runner_;
  TimePoint now_{};
  std::int64_t next_id_ = 1;
  std::deque<std::vector<std::int32_t>> prompts_;
  std::deque<std::vector<PrefixHash>> chains_;
};

// Call 0 of a session on a, optionally a call on b in between (a forced
// switch), then call 1 of the session on a with call 0's context as prefix.
struct Continuation {
  std::vector<std::int32_t> first_output;
  std::vector<std::int32_t> prompt;  // call 1's
  std::vector<std::int32_t> output;  // call 1's
  CallRecord record;                 // call 1's
};

Continuation RunSession(CpuInstance& inst, bool switch_between,
                        const std::function<void(CpuInstance&)>& before_return = nullptr) {
  Continuation c;
  const auto p0 = Printable(200, 1);
  const std::int64_t first = inst.Submit("s", 0, "a", p0, 8);
  inst.Run();
  c.first_output = inst.outputs.at(first);
  if (switch_between) {
    inst.Wait(2);  // past the slot hold
    inst.Submit("other", 0, "b", Printable(50, 2), 4);
    inst.Run();
  }
  if (before_return) before_return(inst);
  c.prompt = p0;
  c.prompt.insert(c.prompt.end(), c.first_output.begin(), c.first_output.end());
  const auto tool = Printable(40, 3);
  c.prompt.insert(c.prompt.end(), tool.begin(), tool.end());
  const std::int64_t second = inst.Submit("s", 1, "a", c.prompt, 8);
  inst.Run();
  c.output = inst.outputs.at(second);
  c.record = inst.records.at(second);
  return c;
}

TEST(CpuEngineTest, EveryKvPathGeneratesTheModelsOwnTokens) {
  CpuInstance device_hit;
  const Continuation d = RunSession(device_hit, false);
  EXPECT_EQ(d.record.kv_source, KvSource::kDevice);
  EXPECT_EQ(d.record.reused_tokens, 192);  // call 0's 12 full prompt blocks
  EXPECT_EQ(d.first_output, Reference(ModelA(), 1, Printable(200, 1), 8));
  EXPECT_EQ(d.output, Reference(ModelA(), 1, d.prompt, 8));

  CpuInstance host;
  const Continuation h = RunSession(host, true);
  ASSERT_EQ(host.switches.size(), 2u);  // to b and back to a
  EXPECT_EQ(h.record.kv_source, KvSource::kHost);
  EXPECT_EQ(host.engine().stats().restored_blocks, 12);
  EXPECT_GT(host.engine().stats().checkpointed_blocks, 0);
  EXPECT_EQ(h.output, d.output);

  Ablation no_hkvr;
  no_hkvr.hkvr = false;
  CpuInstance recompute({}, no_hkvr);
  const Continuation r = RunSession(recompute, true);
  EXPECT_EQ(r.record.kv_source, KvSource::kRecompute);
  EXPECT_EQ(recompute.engine().stats().restored_blocks, 0);
  EXPECT_EQ(r.output, d.output);
}

TEST(CpuEngineTest, ACorruptShardStopsTheRestoreWhereRanksDisagree) {
  CpuEngineOptions two_ranks;
  two_ranks.tp_ranks = 2;
  CpuInstance inst(two_ranks);
  std::vector<PrefixHash> hashes;
  HashTokenBlocks(Printable(200, 1), kBlockTokens, hashes);
  const Continuation c = RunSession(inst, true, [&](CpuInstance& i) {
    // Rank 1's copy of block 5 flips a bit in host memory; rank 0's is intact.
    const auto shard = i.engine().HostShard("a", hashes[5], 1);
    ASSERT_FALSE(shard.empty());
    shard[100] ^= std::byte{0x10};
  });
  EXPECT_EQ(c.record.kv_source, KvSource::kHost);
  const CpuEngine::Stats& s = inst.engine().stats();
  EXPECT_EQ(s.rejected_blocks, 1);
  EXPECT_EQ(s.rank_disagreements, 1);  // rank 0 had 12 blocks, rank 1 five
  EXPECT_EQ(s.restored_blocks, 5);
  EXPECT_EQ(c.output, Reference(ModelA(), 1, c.prompt, 8));
}

TEST(CpuEngineTest, ACallSwappedOutAtASlotEndResumesExactly) {
  // A tight TTFT target makes short slots: a's long decode is swapped out
  // when b's slot comes, and restored in a's next slot. Swaps go through
  // the engine's pooled host buffers, so a later swap-out (of either model,
  // whose KV blocks differ in size) reuses a buffer an earlier one was in;
  // how many swaps a run has depends on its measured step times.
  CpuInstance inst({}, {}, [](InstanceConfig& c) {
    c.ttft_target_s = 0.002;
    c.min_prefill_budget_s = 0;
  });
  const auto pa = Printable(120, 4), pb = Printable(60, 5);
  const std::int64_t a = inst.Submit("sa", 0, "a", pa, 300);
  const std::int64_t b = inst.Submit("sb", 0, "b", pb, 300);
  inst.Run();
  EXPECT_GT(inst.instance().counters().preemptions, 0);
  EXPECT_GT(inst.engine().stats().swapped_out_calls, 0);
  EXPECT_EQ(inst.outputs.at(a), Reference(ModelA(), 1, pa, 300));
  EXPECT_EQ(inst.outputs.at(b), Reference(ModelB(), 2, pb, 300));
}

TEST(CpuEngineTest, APartlyStagedSwitchGeneratesTheModelsOwnTokens) {
  CpuInstance inst;
  inst.Wait(1);  // b is staged into the top of the KV region meanwhile
  // A long prompt on a grows its KV into some of the staged rows.
  inst.Submit("long", 0, "a", Printable(900, 6), 4);
  inst.Run();
  const auto pb = Printable(100, 7);
  const std::int64_t b = inst.Submit("sb", 0, "b", pb, 10);
  inst.Run();
  ASSERT_FALSE(inst.switches.empty());
  const SwitchRecord& sw = inst.switches.back();
  EXPECT_EQ(sw.path, SwitchPath::kPartial);
  EXPECT_GT(sw.dirty_bytes, 0);
  const CpuEngine::Stats& s = inst.engine().stats();
  EXPECT_EQ(s.d2d_weight_bytes, sw.staged_bytes);
  EXPECT_GT(s.h2d_weight_bytes, 0);
  EXPECT_EQ(inst.outputs.at(b), Reference(ModelB(), 2, pb, 10));
}

TEST(CpuEngineTest, ACappedLinkHoldsHostCopiesToItsRate) {
  CpuEngineOptions slow_link;
  slow_link.link_gbps = 0.01;  // 10 MB/s
  Ablation no_staging;
  no_staging.d2d_staging = false;  // b's weights all come over the link
  CpuInstance inst(slow_link, no_staging);
  inst.Submit("sb", 0, "b", Printable(20, 8), 2);
  inst.Run();
  ASSERT_EQ(inst.switches.size(), 1u);
  EXPECT_EQ(inst.switches[0].path, SwitchPath::kH2d);
  EXPECT_GE(inst.switches[0].timing.open_weights_s, static_cast<double>(ModelB().WeightBytes()) / 1e7);
}

TEST(CpuEngineTest, ProfileAndModelMustAgree) {
  ProfileSet profiles;
  ModelProfile p = testing::CpuModelProfile(ModelA(), 0.01);
  p.weight_bytes_per_rank += 4;
  profiles.Add(p);
  InstanceConfig c = testing::TinyInstance("cpu-0", {"a"});
  c.runtime_gib = c.graph_pool_gib = 0.0001;
  c.min_kv_gib = 0;
  c.block_tokens = kBlockTokens;
  Instance instance(c, profiles);
  instance.Warmup("a", TimePoint{});
  CpuEngineOptions small;
  small.host_kv_bytes = kMiB;
  CpuEngine engine({ModelA()}, small);
  try {
    engine.Attach(instance.substrate());
    FAIL() << "a profile with the wrong weight size was accepted";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("weight bytes"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace talaria
