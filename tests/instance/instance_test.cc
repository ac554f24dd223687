#include "instance/instance.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <functional>
#include <map>
#include <set>
#include <tuple>
#include <string>
#include <vector>

#include "core/error.h"
#include "driver/instance_runner.h"
#include "driver/session_client.h"
#include "engine/sim_engine.h"
#include "instance/test_profiles.h"
#include "memory/block_hashes.h"

namespace talaria {
namespace {

using ::testing::ElementsAre;
using ::testing::ElementsAreArray;

// Drives one instance with scripted arrivals, stepping one decode iteration
// at a time (horizon = now), and records each step as a short string:
//   "switch:m"      a switch to model m
//   "P:a0,b0"       a P-phase prefill of calls a0 and b0 (session + index)
//   "SP:a1"         a session-prefill batch
//   "D"             one decode iteration
class Harness : public InstanceEvents {
 public:
  struct Call {
    double at_s;
    std::string session;
    int index;
    std::string model;
    std::int64_t prompt;
    std::int64_t prefix;
    std::int64_t output;
    double hint_tool_s = -1;  // agent hints (CallRequest)
    bool session_end = false;
  };

  Harness(InstanceConfig config, std::vector<ModelProfile> profiles) {
    for (auto& p : profiles) set_.Add(p);
    instance_ = std::make_unique<Instance>(std::move(config), set_);
    runner_ = std::make_unique<InstanceRunner>(*instance_, engine_);
  }

  void Warmup(const std::string& model) { instance_->Warmup(model, TimePoint{}); }

  // Runs until every call finished or `until_s`; returns the step log.
  std::vector<std::string> Run(std::vector<Call> calls, double until_s = 1000) {
    calls_ = std::move(calls);
    std::size_t next = 0;
    TimePoint now{};
    for (int guard = 0; guard < 100000; ++guard) {
      // Deliver arrivals due by now.
      while (next < calls_.size() && AtSeconds(calls_[next].at_s) <= now) Deliver(next++, now);
      const TimePoint horizon = next < calls_.size() ? AtSeconds(calls_[next].at_s) : now;
      const Instance::Step& step = runner_->Plan(now, horizon);
      if (step.kind == Instance::Step::Kind::kIdle) {
        TimePoint wake = step.wake_at;
        if (next < calls_.size()) wake = std::min(wake, AtSeconds(calls_[next].at_s));
        if (wake == TimePoint::max() || ToSeconds(wake) > until_s) break;
        now = std::max(now, wake);
        continue;
      }
      switch (step.kind) {
        case Instance::Step::Kind::kPrefill:
        case Instance::Step::Kind::kSessionPrefill:
          pending_label_ = step.kind == Instance::Step::Kind::kPrefill ? "P:" : "SP:";
          break;
        case Instance::Step::Kind::kDecode:
          log_.push_back(step.decode.iterations == 1 ? "D" : "D" + std::to_string(step.decode.iterations));
          break;
        case Instance::Step::Kind::kSwitch:
          log_.push_back("switch:" + step.switch_step.to->name);
          switch_plans_.push_back(step.switch_step.plan);
          break;
        default:
          break;
      }
      now += runner_->Execute();
      first_tokens_this_step_.clear();
      runner_->Commit(now);
      runner_->Deliver(*this);
      if (after_step) after_step(*instance_, now);
      if (!pending_label_.empty()) {
        std::string s = pending_label_;
        for (std::size_t i = 0; i < first_tokens_this_step_.size(); ++i) {
          s += (i ? "," : "") + first_tokens_this_step_[i];
        }
        log_.push_back(s);
        pending_label_.clear();
      }
      if (finished_.size() == calls_.size()) break;
    }
    runner_->Flush();
    runner_->Deliver(*this);
    return log_;
  }

  void OnFirstToken(std::int64_t id, TimePoint) override {
    first_tokens_this_step_.push_back(Name(static_cast<std::size_t>(id)));
  }
  void OnTokens(std::int64_t id, std::int64_t generated, TimePoint) override {
    tokens_[Name(static_cast<std::size_t>(id))].push_back(generated);
  }
  void OnFinished(const CallRecord& r) override {
    finished_[Name(static_cast<std::size_t>(r.id))] = r;
    finish_order_.push_back(Name(static_cast<std::size_t>(r.id)));
  }
  void OnSwitch(const SwitchRecord& r) override { switches_.push_back(r); }
  void OnRound(const RoundRecord& r) override { rounds_.push_back(r); }

  const CallRecord& Finished(const std::string& name) const { return finished_.at(name); }
  const std::vector<std::string>& finish_order() const { return finish_order_; }
  // Each call's OnTokens reports, in order (none when sizes only).
  const std::map<std::string, std::vector<std::int64_t>>& tokens() const { return tokens_; }
  bool Done(const std::string& name) const { return finished_.contains(name); }
  const std::vector<SwitchRecord>& switches() const { return switches_; }
  const std::vector<GatherPlan>& plans() const { return switch_plans_; }
  const std::vector<RoundRecord>& rounds() const { return rounds_; }
  const Instance& instance() const { return *instance_; }
  Instance& instance() { return *instance_; }

  // Called after every committed step (e.g. to take a snapshot).
  std::function<void(Instance&, TimePoint)> after_step;

 private:
  std::string Name(std::size_t i) const { return calls_[i].session + std::to_string(calls_[i].index); }

  void Deliver(std::size_t i, TimePoint now) {
    const Call& c = calls_[i];
    TraceCall t;
    t.session_id = c.session;
    t.call_index = c.index;
    t.model = c.model;
    t.prompt_tokens = c.prompt;
    t.prefix_tokens = c.prefix;
    t.output_tokens = c.output;
    t.token_seed = std::hash<std::string>{}(c.session);
    TraceSessionContext& session = sessions_[c.session];
    session.Advance(t, 64);
    // The request shares the session's chain: a next call that arrives
    // while this one still runs extends a copy.
    CallRequest r = session.Request(t, static_cast<std::int64_t>(i));
    r.expected_tool_s = c.hint_tool_s;
    r.session_end = c.session_end;
    instance_->Enqueue(r, now);
  }

  ProfileSet set_;
  std::unique_ptr<Instance> instance_;
  SimEngine engine_;
  std::unique_ptr<InstanceRunner> runner_;
  std::vector<Call> calls_;
  std::map<std::string, TraceSessionContext> sessions_;
  std::vector<std::string> log_;
  std::string pending_label_;
  std::vector<std::string> first_tokens_this_step_;
  std::map<std::string, CallRecord> finished_;
  std::vector<std::string> finish_order_;
  std::map<std::string, std::vector<std::int64_t>> tokens_;
  std::vector<SwitchRecord> switches_;
  std::vector<GatherPlan> switch_plans_;
  std::vector<RoundRecord> rounds_;
};

InstanceConfig Cold(std::vector<std::string> models, Ablation ablation = {}) {
  InstanceConfig c = testing::TinyInstance("test", std::move(models));
  c.staging_chunk_mib = 1024;
  c.host_kv_gib_per_rank = 8;
  c.ttft_target_s = 10;   // round bound 9 s
  c.tpot_target_s = 0.5;  // protected decode: 18 iterations per slot
  c.ablation = ablation;
  return c;
}

// One model, two sessions: a's short call finishes, its continuation returns
// while b still decodes, and enters at the next decode boundary by SP with a
// device hit.
TEST(ColdInstanceTest, ContinuationEntersMidSlotBySessionPrefill) {
  Harness h(Cold({"m"}), {testing::TinyProfile("m")});
  h.Warmup("m");
  const auto log = h.Run({{0, "a", 0, "m", 100, 0, 2},
                          {0, "b", 0, "m", 100, 0, 8},
                          {0.215, "a", 1, "m", 150, 102, 1}});
  EXPECT_THAT(log, ElementsAre("P:a0,b0", "D", "D", "SP:a1", "D", "D", "D", "D", "D"));
  EXPECT_EQ(h.Finished("a1").path, AdmitPath::kSessionPrefill);
  EXPECT_EQ(h.Finished("a1").kv_source, KvSource::kDevice);
  EXPECT_EQ(h.Finished("a1").reused_tokens, 64);  // one full 64-token block of the 102
  EXPECT_EQ(h.instance().counters().sp_admitted, 1);
}

// The same script without SP: the continuation waits for the next slot's P,
// which opens only when the current slot has nothing left to run.
TEST(ColdInstanceTest, WithoutSessionPrefillTheReturnWaitsForTheNextSlot) {
  Harness h(Cold({"m"}, {.sp = false, .hkvr = true, .d2d_staging = true}), {testing::TinyProfile("m")});
  h.Warmup("m");
  const auto log = h.Run({{0, "a", 0, "m", 100, 0, 2},
                          {0, "b", 0, "m", 100, 0, 8},
                          {0.215, "a", 1, "m", 150, 102, 1}});
  // With no admission possible at boundaries, decode runs to the next finish.
  EXPECT_THAT(log, ElementsAre("P:a0,b0", "D", "D6", "P:a1"));
  EXPECT_EQ(h.Finished("a1").path, AdmitPath::kPrefill);
  EXPECT_GT(h.Finished("a1").admitted, h.Finished("b0").finished - FromSeconds(1e-9));
}

// New sessions never bypass P: a first call arriving mid-slot waits.
TEST(ColdInstanceTest, NewSessionsNeverEnterBySessionPrefill) {
  Harness h(Cold({"m"}), {testing::TinyProfile("m")});
  h.Warmup("m");
  const auto log = h.Run({{0, "b", 0, "m", 100, 0, 5}, {0.105, "c", 0, "m", 100, 0, 1}});
  EXPECT_THAT(log, ElementsAre("P:b0", "D", "D", "D", "D", "P:c0"));
  EXPECT_EQ(h.Finished("c0").path, AdmitPath::kPrefill);
  EXPECT_EQ(h.instance().counters().sp_admitted, 0);
}

// Two models: a slot runs until its budget is spent while the other model
// waits, then the instance switches; the waiting call's P opens the slot.
TEST(ColdInstanceTest, SlotBudgetEndsTheSlotAndRoundRobinSwitches) {
  InstanceConfig c = Cold({"m", "n"});
  c.ttft_target_s = 1.0;        // round 0.9 s: 0.45 s per slot with two models
  c.tpot_target_s = 0.1;        // protected decode 9 iterations = 0.09 s
  c.min_prefill_budget_s = 0;
  Harness h(c, {testing::TinyProfile("m"), testing::TinyProfile("n")});
  h.Warmup("m");
  h.Run({{0, "a", 0, "m", 100, 0, 100}, {0, "x", 0, "n", 100, 0, 1}});
  ASSERT_GE(h.switches().size(), 2u);
  EXPECT_EQ(h.switches()[0].to, "n");
  EXPECT_EQ(h.switches()[1].to, "m");
  // a0 was preempted at the end of m's slot, swapped out and resumed.
  EXPECT_GE(h.Finished("a0").preemptions, 1);
  EXPECT_GE(h.instance().counters().preemptions, 1);
  EXPECT_TRUE(h.Done("x0"));
}

// Eq.3/Eq.5 read literally (switches_in_round_budget): the round includes
// its switches, so the predicted switch time comes off gamma * T_TTFT before
// the slots share it: 3.6 s less two 1 s H2D switches leaves 0.8 s per
// slot. Otherwise each slot gets 1.8 s and the round overruns by its
// switches (deadline risk).
TEST(ColdInstanceTest, PredictedSwitchesComeOffTheRoundBudgetWhenConfigured) {
  for (bool in_budget : {true, false}) {
    SCOPED_TRACE(in_budget);
    InstanceConfig c = Cold({"m", "n"}, {.sp = true, .hkvr = true, .d2d_staging = false});
    c.ttft_target_s = 4.0;  // round 3.6 s
    c.tpot_target_s = 0.5;  // protected decode 8 iterations = 0.08 s
    c.min_prefill_budget_s = 0;
    c.switches_in_round_budget = in_budget;
    Harness h(c, {testing::TinyProfile("m"), testing::TinyProfile("n")});
    h.Warmup("m");
    h.Run({{0, "a", 0, "m", 100, 0, 1000}, {0, "x", 0, "n", 100, 0, 1}});
    ASSERT_FALSE(h.switches().empty());
    EXPECT_EQ(h.switches()[0].to, "n");
    const double slot = in_budget ? 0.8 : 1.8;
    EXPECT_GE(h.switches()[0].start, AtSeconds(slot));
    EXPECT_LE(h.switches()[0].start, AtSeconds(slot + 0.011));  // the decode step that crosses it
    EXPECT_EQ(h.instance().counters().deadline_risk > 0, !in_budget);
  }
}

// Over max_resident, a switch closes the outgoing model even while it still
// has work (a0, swapped out at the end of m's slot): its weights do not fit
// beside n's, so the switch back to m opens it again (and closes n, idle by
// then). Within the limit both stay open and only the first switch opens.
TEST(ColdInstanceTest, OverTheResidentLimitASwitchClosesTheOutgoingModel) {
  for (int max_resident : {1, 2}) {
    SCOPED_TRACE(max_resident);
    InstanceConfig c = Cold({"m", "n"});
    c.ttft_target_s = 1.0;  // 0.45 s slots: a0 is swapped out before it ends
    c.tpot_target_s = 0.1;
    c.min_prefill_budget_s = 0;
    c.resident = {"m"};
    c.max_resident = max_resident;
    Harness h(c, {testing::TinyProfile("m"), testing::TinyProfile("n")});
    h.Warmup("m");
    h.Run({{0, "a", 0, "m", 100, 0, 100}, {0, "x", 0, "n", 100, 0, 1}});
    ASSERT_GE(h.switches().size(), 2u);
    EXPECT_EQ(h.switches()[0].to, "n");
    EXPECT_TRUE(h.switches()[0].opened);
    EXPECT_EQ(h.switches()[1].to, "m");
    EXPECT_EQ(h.switches()[1].opened, max_resident == 1);
    EXPECT_EQ(h.instance().counters().model_opens, max_resident == 1 ? 2 : 1);
    EXPECT_EQ(h.instance().counters().model_closes, max_resident == 1 ? 2 : 0);  // m, then n
    EXPECT_TRUE(h.Done("a0"));
    EXPECT_TRUE(h.Done("x0"));
  }
}

// Three models with work take turns on room for two: each switch into a
// closed model closes the open one whose next slot comes last in round
// order (the outgoing model), so the model after it is still open and
// opens alternate with free switches. Closing the least recently active
// one instead would close exactly the model the next slot needs, and every
// switch would open a model.
TEST(ColdInstanceTest, ThreeModelsInRoomForTwoOpenAtEveryOtherSwitch) {
  InstanceConfig c = Cold({"m", "n", "o"});
  c.ttft_target_s = 1.0;
  c.tpot_target_s = 0.1;
  c.min_prefill_budget_s = 0;
  c.resident = {"m", "n"};
  c.max_resident = 2;
  Harness h(c, {testing::TinyProfile("m"), testing::TinyProfile("n"), testing::TinyProfile("o")});
  h.Warmup("m");
  h.Run({{0, "a", 0, "m", 100, 0, 200}, {0, "b", 0, "n", 100, 0, 200}, {0, "x", 0, "o", 100, 0, 200}});
  const auto& sw = h.switches();
  ASSERT_GE(sw.size(), 6u);
  const std::vector<std::string> order = {"n", "o", "m"};
  for (std::size_t i = 0; i < 6; ++i) {
    SCOPED_TRACE(i);
    EXPECT_EQ(sw[i].to, order[i % 3]);
    EXPECT_EQ(sw[i].opened, i % 2 == 1);  // o, then n, then m: each time the model just left is closed
  }
  EXPECT_TRUE(h.Done("a0"));
  EXPECT_TRUE(h.Done("b0"));
  EXPECT_TRUE(h.Done("x0"));
}

// What opening a closed model would force, as telemetry reports it for
// Eq.2: on an instance with room for two (m and n open, o closed), o's open
// closes the open model whose next slot comes last (n: after o comes m), so
// while n has work o's forced reopen is n's full open (16 GiB at 8 GiB/s:
// 2 s), not the cheaper m's. An idle open model closes instead, for free.
TEST(InstanceTelemetryTest, ReportsTheReopenAnOpenWouldForce) {
  for (const bool n_busy : {true, false}) {
    SCOPED_TRACE(n_busy);
    ProfileSet set;
    set.Add(testing::TinyProfile("m"));
    ModelProfile big = testing::TinyProfile("n");
    big.weight_bytes_per_rank = 16 * kGiB;
    set.Add(big);
    set.Add(testing::TinyProfile("o"));
    InstanceConfig c = Cold({"m", "n", "o"});
    c.resident = {"m", "n"};
    c.max_resident = 2;
    Instance inst(c, set);
    inst.Warmup("m", TimePoint{});
    std::int64_t id = 0;
    for (const char* model : {"m", "n"}) {
      if (std::string(model) == "n" && !n_busy) continue;
      CallRequest call;
      call.id = id++;
      call.session_id = std::string("s-") + model;
      call.model = model;
      call.prompt_tokens = 100;
      call.output_tokens = 10;
      inst.Enqueue(call, TimePoint{});
    }
    InstanceTelemetry t;
    inst.Snapshot(AtSeconds(0), t);
    ASSERT_EQ(t.models.size(), 3u);
    EXPECT_EQ(t.models[0].forced_reopen_s, 0.0);  // open
    EXPECT_EQ(t.models[1].forced_reopen_s, 0.0);
    EXPECT_DOUBLE_EQ(t.models[2].forced_reopen_s, n_busy ? t.models[1].full_open_s : 0.0);
    EXPECT_GT(t.models[1].full_open_s, t.models[0].full_open_s);
  }
}

// A decode step advances every decoding call; calls that end in the same
// step finish in admission order (b before d, although a's finish moved d
// ahead of b in the batch's dense array), each call's token reports rise by
// the steps' iterations to its output, and a call swapped out at a slot end
// resumes from where it stopped. Sizes only, the steps and records are the
// same and no token reports are made.
TEST(ColdInstanceTest, DecodeStepsAdvanceEveryCallAndFinishInAdmissionOrder) {
  InstanceConfig c = Cold({"m", "n"});
  c.ttft_target_s = 1.0;  // short slots: c0 is swapped out when n gets its slot
  c.tpot_target_s = 0.1;
  c.min_prefill_budget_s = 0;
  const std::vector<Harness::Call> calls = {{0, "a", 0, "m", 100, 0, 5},    {0, "b", 0, "m", 100, 0, 20},
                                            {0, "c", 0, "m", 100, 0, 60},   {0, "d", 0, "m", 100, 0, 20},
                                            {0.05, "x", 0, "n", 100, 0, 3}};
  Harness full(c, {testing::TinyProfile("m"), testing::TinyProfile("n")});
  full.Warmup("m");
  const std::vector<std::string> log = full.Run(calls);
  ASSERT_EQ(full.finish_order().size(), calls.size());
  const auto& order = full.finish_order();
  const auto at = [&](const std::string& name) { return std::find(order.begin(), order.end(), name) - order.begin(); };
  EXPECT_LT(at("a0"), at("b0"));
  EXPECT_EQ(at("d0"), at("b0") + 1);  // same step, admission order
  EXPECT_EQ(full.Finished("b0").finished, full.Finished("d0").finished);
  EXPECT_GE(full.Finished("c0").preemptions, 1);
  for (const auto& [name, reports] : full.tokens()) {
    ASSERT_FALSE(reports.empty()) << name;
    EXPECT_TRUE(std::is_sorted(reports.begin(), reports.end())) << name;
    EXPECT_EQ(std::adjacent_find(reports.begin(), reports.end()), reports.end()) << name;  // each step adds
    const auto it = std::find_if(calls.begin(), calls.end(), [&](const Harness::Call& k) { return k.session + "0" == name; });
    EXPECT_EQ(reports.back(), it->output) << name;
  }
  EXPECT_EQ(full.tokens().at("c0").size(), 59u);  // one per iteration (the harness steps one at a time)

  Harness lean(c, {testing::TinyProfile("m"), testing::TinyProfile("n")});
  lean.instance().SetSizesOnly(true);
  lean.Warmup("m");
  EXPECT_EQ(lean.Run(calls), log);
  EXPECT_EQ(lean.finish_order(), full.finish_order());
  EXPECT_TRUE(lean.tokens().empty());
  for (const auto& name : order) EXPECT_EQ(lean.Finished(name).finished, full.Finished(name).finished) << name;
}

// Regression: with the active model idle and its slot closed, a call for
// another model must trigger a switch, not leave the instance idle.
TEST(ColdInstanceTest, SwitchesWhenOnlyAnotherModelHasWork) {
  Harness h(Cold({"m", "n"}), {testing::TinyProfile("m"), testing::TinyProfile("n")});
  h.Warmup("m");
  const auto log = h.Run({{0, "x", 0, "n", 100, 0, 1}});
  EXPECT_THAT(log, ElementsAre("switch:n", "P:x0"));
  EXPECT_TRUE(h.Done("x0"));
}

// A call that hands its chain over shared must view that chain: an instance
// would otherwise keep hashes that are not the call's.
TEST(InstanceDeathTest, ASharedChainMustBeTheCallsOwn) {
  ProfileSet set;
  set.Add(testing::TinyProfile("m"));
  Instance instance(Cold({"m"}), set);
  instance.Warmup("m", TimePoint{});
  CallRequest r;
  r.session_id = "x";
  r.model = "m";
  r.prompt_tokens = 64;
  r.output_tokens = 1;
  const std::vector<PrefixHash> mine{1, 2};
  r.chain = mine;
  r.chain_owner = std::make_shared<const std::vector<PrefixHash>>(mine);  // equal, but another chain
  EXPECT_DEATH(instance.Enqueue(r, TimePoint{}), "not the shared chain");
}

// Staging: while m serves, n's weights are staged; the switch to n gathers
// them device-to-device. With staging off it reloads everything from host.
TEST(ColdInstanceTest, StagedSwitchIsD2dAndUnstagedIsH2d) {
  for (bool staging : {true, false}) {
    SCOPED_TRACE(staging ? "staging" : "no staging");
    Harness h(Cold({"m", "n"}, {.sp = true, .hkvr = true, .d2d_staging = staging}),
              {testing::TinyProfile("m"), testing::TinyProfile("n")});
    h.Warmup("m");
    // m decodes 2 s, long enough to stage 8 GiB at 8 GiB/s; then n has work.
    h.Run({{0, "a", 0, "m", 100, 0, 200}, {1.5, "x", 0, "n", 100, 0, 1}});
    ASSERT_FALSE(h.switches().empty());
    const SwitchRecord& s = h.switches().front();
    EXPECT_EQ(s.to, "n");
    EXPECT_EQ(s.path, staging ? SwitchPath::kD2d : SwitchPath::kH2d);
    EXPECT_EQ(s.staged_bytes, staging ? 8 * kGiB : 0);
    // Phase 2 follows the gather plan: 8 GiB at 640 GiB/s or at 8 GiB/s.
    EXPECT_NEAR(s.timing.open_weights_s, staging ? 8.0 / 640 : 1.0, 1e-9);
  }
}

// HKVR: a session's KV survives a switch away and back as host-restorable;
// without HKVR the continuation recomputes its prefix.
TEST(ColdInstanceTest, HostRegistryKeepsKvAcrossSwitches) {
  for (bool hkvr : {true, false}) {
    SCOPED_TRACE(hkvr ? "hkvr" : "no hkvr");
    Harness h(Cold({"m", "n"}, {.sp = true, .hkvr = hkvr, .d2d_staging = true}),
              {testing::TinyProfile("m"), testing::TinyProfile("n")});
    h.Warmup("m");
    h.Run({{0, "a", 0, "m", 640, 0, 1},      // a0 finishes at 0.64 s on m
           {0.7, "x", 0, "n", 100, 0, 1},    // n waits out m's 1 s hold, then m switches away
           {2.0, "a", 1, "m", 700, 641, 1}}); // a returns after m's KV was released
    const CallRecord& a1 = h.Finished("a1");
    EXPECT_EQ(a1.kv_source, hkvr ? KvSource::kHost : KvSource::kRecompute);
    EXPECT_EQ(a1.reused_tokens, hkvr ? 640 : 0);
  }
}

// With nothing left to run, the slot stays open up to slot_hold_s after a
// session finished, so its return enters by SP instead of waiting a round.
TEST(ColdInstanceTest, HeldSlotCatchesALoneSessionsReturn) {
  for (double hold : {1.0, 0.0}) {
    SCOPED_TRACE(hold);
    InstanceConfig c = Cold({"m", "n"});
    c.slot_hold_s = hold;
    Harness h(c, {testing::TinyProfile("m"), testing::TinyProfile("n")});
    h.Warmup("m");
    h.Run({{0, "a", 0, "m", 100, 0, 1}, {0, "x", 0, "n", 100, 0, 1}, {0.4, "a", 1, "m", 150, 101, 1}});
    const CallRecord& a1 = h.Finished("a1");
    if (hold > 0) {
      EXPECT_EQ(a1.path, AdmitPath::kSessionPrefill);
      EXPECT_EQ(a1.kv_source, KvSource::kDevice);
      EXPECT_GE(h.switches().front().start, a1.finished);  // the slot outlived a1
      EXPECT_EQ(h.instance().counters().hold_hits, 1);
    } else {
      EXPECT_EQ(a1.path, AdmitPath::kPrefill);  // next slot of m
      EXPECT_LT(h.switches().front().start, a1.admitted);
    }
  }
}

// Adaptive holds (issue 18): a session that has come back only after ~10 s
// does not keep the slot while another model's call waits (the fixed hold
// keeps it 1 s); one that comes back within ~0.4 s does, and its return
// enters by SP.
TEST(ColdInstanceTest, AnAdaptiveHoldWaitsOnlyForSessionsLikelyToReturnSoon) {
  for (HoldPolicy policy : {HoldPolicy::kFixed, HoldPolicy::kAdaptive}) {
    SCOPED_TRACE(ToString(policy));
    InstanceConfig c = Cold({"m", "n"});
    c.hold = policy;
    Harness h(c, {testing::TinyProfile("m"), testing::TinyProfile("n")});
    h.Warmup("m");
    h.Run({{0, "a", 0, "m", 100, 0, 1},
           {10, "a", 1, "m", 150, 101, 1},
           {20, "a", 2, "m", 200, 151, 1},
           {30, "a", 3, "m", 250, 201, 1},
           {30, "x", 0, "n", 100, 0, 1}});  // waits for the GPU when a3 finishes
    ASSERT_FALSE(h.switches().empty());
    const double a3_done = ToSeconds(h.Finished("a3").finished);
    const double switched = ToSeconds(h.switches().front().start);
    if (policy == HoldPolicy::kFixed) {
      EXPECT_GE(switched, a3_done + 0.99);  // held 1 s for a return that comes 10 s later
    } else {
      EXPECT_LT(switched, a3_done + 0.05);  // no hold: x goes at once
    }
  }
  InstanceConfig c = Cold({"m", "n"});
  c.hold = HoldPolicy::kAdaptive;
  Harness h(c, {testing::TinyProfile("m"), testing::TinyProfile("n")});
  h.Warmup("m");
  h.Run({{0, "b", 0, "m", 100, 0, 1},
         {0.5, "b", 1, "m", 150, 101, 1},
         {1.0, "b", 2, "m", 200, 151, 1},
         {1.5, "b", 3, "m", 250, 201, 1},
         {1.5, "x", 0, "n", 100, 0, 1},
         {2.0, "b", 4, "m", 300, 251, 1}});
  EXPECT_EQ(h.Finished("b4").path, AdmitPath::kSessionPrefill);
  EXPECT_GE(h.instance().counters().hold_hits, 1);
}

// Agent hints (issue 18): a session that says its tool takes 0.3 s keeps
// the slot for its return while another model's call waits (it enters by
// SP); one that says 30 s, or that it is done, does not, and the waiting
// call goes at once. The fixed hold ignores tool times but not the end.
TEST(ColdInstanceTest, AnAdaptiveHoldFollowsTheAgentsHints) {
  struct Case {
    const char* name;
    HoldPolicy policy;
    double hint_s;
    bool end;
    bool held;
  };
  for (const Case& k : {Case{"0.3 s", HoldPolicy::kAdaptive, 0.3, false, true},
                        Case{"30 s", HoldPolicy::kAdaptive, 30, false, false},
                        Case{"session end", HoldPolicy::kAdaptive, -1, true, false},
                        Case{"fixed, session end", HoldPolicy::kFixed, -1, true, false},
                        Case{"fixed, 30 s", HoldPolicy::kFixed, 30, false, true}}) {
    SCOPED_TRACE(k.name);
    InstanceConfig c = Cold({"m", "n"});
    c.hold = k.policy;
    Harness h(c, {testing::TinyProfile("m"), testing::TinyProfile("n")});
    h.Warmup("m");
    Harness::Call a0{0, "a", 0, "m", 100, 0, 1};
    a0.hint_tool_s = k.hint_s;
    a0.session_end = k.end;
    h.Run({a0, {0.01, "x", 0, "n", 100, 0, 1}, {0.35, "a", 1, "m", 150, 101, 1}});
    ASSERT_FALSE(h.switches().empty());
    const double a0_done = ToSeconds(h.Finished("a0").finished);
    const double switched = ToSeconds(h.switches().front().start);
    if (k.held) {
      EXPECT_GT(switched, 0.35);
      EXPECT_EQ(h.Finished("a1").path, AdmitPath::kSessionPrefill);
    } else {
      EXPECT_LT(switched, a0_done + 0.05);
      EXPECT_NE(h.Finished("a1").path, AdmitPath::kSessionPrefill);
    }
  }
}

// A hybrid model cannot roll its recurrent state back: with states kept
// only at context ends, a continuation that does not reuse the whole
// previous context recomputes (a restore skip).
TEST(ColdInstanceTest, HybridPartialReuseIsARestoreSkip) {
  InstanceConfig c = Cold({"h"});
  c.state_checkpoints = StateCheckpoints::kContextEnd;
  Harness h(c, {testing::TinyProfile("h", AttentionFamily::kHybrid)});
  h.Warmup("h");
  std::vector<Harness::Call> calls = {{0, "a", 0, "h", 640, 0, 1}, {0.7, "a", 1, "h", 700, 320, 1}};
  h.Run(calls);
  EXPECT_EQ(h.Finished("a1").kv_source, KvSource::kRecompute);
  EXPECT_GE(h.instance().counters().restore_skips, 1);
}

// A hybrid model's host checkpoint holds the state at the context's end,
// with the partial block it ends in: a continuation that reuses the whole
// context (not a multiple of a block) restores it after a switch away, and
// one that cuts history back restores to the latest earlier context end.
TEST(ColdInstanceTest, HybridStateRestoresFromHostAtTheContextEnd) {
  Harness h(Cold({"h", "n"}), {testing::TinyProfile("h", AttentionFamily::kHybrid), testing::TinyProfile("n")});
  h.Warmup("h");
  h.Run({{0, "a", 0, "h", 600, 0, 10},       // context 610: 9 blocks of 64 and 34 tokens
         {0.7, "x", 0, "n", 100, 0, 1},      // h switches away: a's KV leaves the device
         {2.5, "a", 1, "h", 700, 610, 10},   // the whole context: restored to its end
         {5.0, "y", 0, "n", 100, 0, 1},
         {7.0, "a", 2, "h", 800, 650, 1}});  // history cut back to 650: a1's end is 720
  const CallRecord& a1 = h.Finished("a1");
  EXPECT_EQ(a1.kv_source, KvSource::kHost);
  EXPECT_EQ(a1.reused_tokens, 610);
  const CallRecord& a2 = h.Finished("a2");
  EXPECT_EQ(a2.kv_source, KvSource::kHost);
  EXPECT_EQ(a2.reused_tokens, 610);  // a0's end, the latest state point inside 650
  EXPECT_EQ(h.instance().counters().restore_skips, 0);
}

// An agent that cuts its history back inside its first context, before any
// context end: with doubling state checkpoints the state at 8 blocks (the
// latest power of two before the cut) is on host with the chain to it, so
// the call restores there and recomputes only the rest; with states at
// context ends only, it recomputes the whole prefix (a restore skip).
TEST(ColdInstanceTest, ARewindInsideAContextRestoresAtTheLatestInteriorState) {
  for (const StateCheckpoints mode : {StateCheckpoints::kDoubling, StateCheckpoints::kContextEnd}) {
    SCOPED_TRACE(ToString(mode));
    InstanceConfig c = Cold({"h", "n"});
    c.state_checkpoints = mode;
    Harness h(c, {testing::TinyProfile("h", AttentionFamily::kHybrid), testing::TinyProfile("n")});
    h.Warmup("h");
    h.Run({{0, "a", 0, "h", 1200, 0, 10},     // context 1210: states at 1, 2, 4, 8, 16 blocks
           {0.7, "x", 0, "n", 100, 0, 1},     // h switches away
           {3.0, "a", 1, "h", 1300, 700, 1}});  // history cut back to 700 tokens
    const CallRecord& a1 = h.Finished("a1");
    if (mode == StateCheckpoints::kDoubling) {
      EXPECT_EQ(a1.kv_source, KvSource::kHost);
      EXPECT_EQ(a1.reused_tokens, 8 * 64);
      EXPECT_EQ(h.instance().counters().restore_skips, 0);
    } else {
      EXPECT_EQ(a1.kv_source, KvSource::kRecompute);
      EXPECT_EQ(h.instance().counters().restore_skips, 1);
    }
  }
}

// Eq.4: when T_TPOT <= t_D the decode target is infeasible and reported.
TEST(ColdInstanceTest, InfeasibleTpotIsReportedNotHidden) {
  InstanceConfig c = Cold({"m"});
  c.tpot_target_s = 0.005;  // below the 10 ms decode step
  Harness h(c, {testing::TinyProfile("m")});
  h.Warmup("m");
  h.Run({{0, "a", 0, "m", 100, 0, 3}});
  EXPECT_GE(h.instance().counters().tpot_infeasible, 1);
  EXPECT_GE(h.instance().counters().deadline_risk, 1);
  EXPECT_TRUE(h.Done("a0"));
}

// A hot instance pins its model and admits new sessions at every decode
// boundary (continuous batching), never switching.
TEST(HotInstanceTest, ContinuousBatchingAdmitsAtBoundaries) {
  InstanceConfig c = Cold({"m"});
  c.pool = Pool::kHot;
  Harness h(c, {testing::TinyProfile("m")});
  h.Warmup("m");
  const auto log = h.Run({{0, "b", 0, "m", 100, 0, 5}, {0.105, "c", 0, "m", 100, 0, 1}});
  EXPECT_THAT(log, ElementsAre("P:b0", "D", "P:c0", "D", "D", "D"));
  EXPECT_EQ(h.Finished("c0").path, AdmitPath::kContinuous);
  EXPECT_TRUE(h.switches().empty());
}

// Two calls of one session in flight at once (a client may send parallel
// calls under one session id): each finish leaves the session the KV of
// its own context, and the first finisher's, replaced, goes back to the
// pool. The device then holds one call's blocks, as after a lone call (it
// used to keep both: at 128 connections over 64 sessions a server leaked
// its whole KV pool in seconds).
TEST(HotInstanceTest, ParallelCallsOfOneSessionLeaveOneContextsKv) {
  const auto used_after = [](std::vector<Harness::Call> calls) {
    InstanceConfig c = Cold({"m"});
    c.pool = Pool::kHot;
    Harness h(c, {testing::TinyProfile("m")});
    h.Warmup("m");
    const std::size_t n = calls.size();
    h.Run(std::move(calls));
    EXPECT_EQ(h.finish_order().size(), n);
    return h.instance().Occupancy().kv_used_bytes;
  };
  const std::int64_t one = used_after({{0, "a", 0, "m", 640, 0, 40}});
  ASSERT_GT(one, 0);
  // a1 enters while a0 decodes and finishes first.
  EXPECT_EQ(used_after({{0, "a", 0, "m", 640, 0, 40}, {0.01, "a", 1, "m", 640, 0, 4}}), one);
  // a0 finishes first.
  EXPECT_EQ(used_after({{0, "a", 0, "m", 640, 0, 4}, {0.01, "a", 1, "m", 640, 0, 40}}), one);
}

// An engine slower than its profile (a wrapped engine, as fault injection
// would be) shows up in telemetry as a measured/profiled scale above 1.
TEST(InstanceTelemetryTest, ReportsMeasuredOverProfiledStepTime) {
  ProfileSet set;
  set.Add(testing::TinyProfile("m"));
  Instance inst(Cold({"m"}), set);
  inst.Warmup("m", TimePoint{});
  std::vector<PrefixHash> chain;
  ExtendSessionChain(chain, 0, 1001, 64, 1, 0);
  CallRequest c;
  c.id = 0;
  c.session_id = "s";
  c.model = "m";
  c.prompt_tokens = 1000;
  c.output_tokens = 1;
  c.chain = chain;
  inst.Enqueue(c, TimePoint{});
  const Instance::Step& step = inst.Plan(TimePoint{}, TimePoint::max());
  ASSERT_EQ(step.kind, Instance::Step::Kind::kPrefill);
  const Duration predicted = SimEngine().Prefill(step.prefill);  // 1 s for 1000 tokens
  struct : InstanceEvents {
    void OnFirstToken(std::int64_t, TimePoint) override {}
    void OnFinished(const CallRecord&) override {}
    void OnSwitch(const SwitchRecord&) override {}
    void OnRound(const RoundRecord&) override {}
  } events;
  inst.Commit(TimePoint{} + 2 * predicted, SwitchTiming{}, events);  // took twice as long
  InstanceTelemetry t;
  inst.Snapshot(AtSeconds(3), t);
  ASSERT_EQ(t.models.size(), 1u);
  EXPECT_NEAR(t.models[0].prefill_scale, 0.8 + 0.2 * 2.0, 1e-6);
  EXPECT_DOUBLE_EQ(t.models[0].decode_scale, 1.0);
  EXPECT_EQ(t.sessions.at("s").state, KvState::kDevice);
}

// Delta snapshots, applied one after another, describe the same sessions
// as full snapshots taken at the same moments: through device hits, host
// checkpoints, switches that release a model's KV, and host evictions.
TEST(InstanceTelemetryTest, DeltaSnapshotsAddUpToFullOnes) {
  using Held = std::map<std::string, std::tuple<std::string, KvState, std::int64_t>>;
  auto run = [](bool delta) {
    InstanceConfig c = Cold({"m", "n"}, {.sp = true, .hkvr = true, .d2d_staging = true});
    c.host_kv_gib_per_rank = 0.0005;  // a few blocks: checkpoints evict one another
    Harness h(c, {testing::TinyProfile("m"), testing::TinyProfile("n")});
    h.Warmup("m");
    std::vector<Held> seen;
    Held held;
    h.after_step = [&](Instance& inst, TimePoint now) {
      InstanceTelemetry t;
      inst.Snapshot(now, t, delta && !seen.empty());
      EXPECT_EQ(inst.StaleHostPrefixes(now), 0) << "at " << ToSeconds(now) << " s";
      if (!t.sessions_delta) held.clear();
      for (const auto& [id, p] : t.sessions) {
        if (p.state == KvState::kMissing) held.erase(id);
        else held[id] = {p.model, p.state, p.tokens};
      }
      seen.push_back(held);
    };
    std::vector<Harness::Call> calls;
    for (int k = 0; k < 4; ++k) {
      const std::string model = k % 2 == 0 ? "m" : "n";
      for (const char* session : {"a", "b", "c"}) {
        const std::string sid = std::string(session) + model;
        calls.push_back({k * 3.0, sid, k / 2, model, 640 + 320 * (k / 2), k >= 2 ? 640 : 0, 4});
      }
    }
    h.Run(calls);
    return seen;
  };
  const std::vector<Held> full = run(false);
  const std::vector<Held> deltas = run(true);
  ASSERT_EQ(full.size(), deltas.size());
  std::set<KvState> states;
  for (std::size_t i = 0; i < full.size(); ++i) {
    EXPECT_EQ(full[i], deltas[i]) << "after step " << i;
    for (const auto& [id, p] : full[i]) states.insert(std::get<1>(p));
  }
  EXPECT_TRUE(states.contains(KvState::kDevice));
  EXPECT_TRUE(states.contains(KvState::kHost));
}

// The session table is bounded: a session idle for ten minutes with
// nothing on device is forgotten, and a delta says so; one whose KV is still
// on device stays.
TEST(InstanceTelemetryTest, IdleSessionsWithNothingOnDeviceAreForgotten) {
  Harness h(Cold({"m", "n"}, {.sp = true, .hkvr = true, .d2d_staging = true}),
            {testing::TinyProfile("m"), testing::TinyProfile("n")});
  h.Warmup("m");
  // "a" runs on m; "x" on n then makes the instance switch, releasing a's KV.
  h.Run({{0, "a", 0, "m", 640, 0, 4}, {1, "x", 0, "n", 640, 0, 4}});
  Instance& inst = h.instance();
  std::map<std::string, KvState> held;
  auto snapshot = [&](double at_s, bool delta) {
    InstanceTelemetry t;
    inst.Snapshot(TimePoint{} + FromSeconds(at_s), t, delta);
    if (!delta) held.clear();
    for (const auto& [id, p] : t.sessions) {
      if (p.state == KvState::kMissing) held.erase(id);
      else held[id] = p.state;
    }
  };
  snapshot(10, false);
  ASSERT_EQ(held.size(), 2u);
  EXPECT_EQ(held["a"], KvState::kHost);
  EXPECT_EQ(held["x"], KvState::kDevice);
  snapshot(590, true);  // idle for under ten minutes: kept
  EXPECT_TRUE(held.contains("a"));
  snapshot(700, true);
  EXPECT_FALSE(held.contains("a"));
  EXPECT_TRUE(held.contains("x"));
  snapshot(701, false);
  EXPECT_EQ(held.size(), 1u);
  EXPECT_TRUE(held.contains("x"));
}

// An entry holding nothing of its session's context (its device KV
// released by a switch, none on host) lets go of its chain once a snapshot
// sees that; its next call brings the chain again. With host KV the entry
// keeps it: drops and probes read it.
TEST(InstanceTelemetryTest, AnEntryHoldingNothingLetsGoOfItsChain) {
  for (const bool hkvr : {false, true}) {
    Harness h(Cold({"m", "n"}, {.sp = true, .hkvr = hkvr, .d2d_staging = true}),
              {testing::TinyProfile("m"), testing::TinyProfile("n")});
    h.Warmup("m");
    std::vector<std::int64_t> held;  // a's chain blocks after each step, once its first call finished
    h.after_step = [&](Instance& inst, TimePoint now) {
      InstanceTelemetry t;
      inst.Snapshot(now, t, true);
      if (std::ranges::count(h.finish_order(), "a0") > 0) held.push_back(inst.HeldChainBlocks("a"));
    };
    // "a" runs on m; "x" on n makes the instance switch, releasing a's KV;
    // a's second call comes back to m.
    h.Run({{0, "a", 0, "m", 640, 0, 4}, {1, "x", 0, "n", 640, 0, 4}, {30, "a", 1, "m", 960, 644, 4}});
    ASSERT_FALSE(held.empty()) << "hkvr " << hkvr;
    EXPECT_EQ(held.front(), 10) << "hkvr " << hkvr;  // 644 tokens of 64: its context's full blocks
    EXPECT_EQ(std::ranges::count(held, 0) > 0, !hkvr) << "hkvr " << hkvr;
    EXPECT_EQ(held.back(), 15) << "hkvr " << hkvr;  // its second context: 964 tokens
    EXPECT_EQ(h.Finished("a1").kv_source, hkvr ? KvSource::kHost : KvSource::kRecompute) << "hkvr " << hkvr;
  }
}

// A session's first call, enqueued directly (no chain: nothing to reuse).
CallRequest NewCall(std::int64_t id, const char* session, const char* model, std::int64_t prompt,
                    std::int64_t output) {
  CallRequest r;
  r.id = id;
  r.session_id = session;
  r.model = model;
  r.prompt_tokens = prompt;
  r.output_tokens = output;
  return r;
}

// A snapshot's queued work is the queue's predicted prefill plus the tokens
// left to generate at the batch's share of a decode step; it returns to zero
// when calls finish or are cancelled.
TEST(InstanceTelemetryTest, QueuedWorkFollowsTheQueueAndTheTokensLeft) {
  const ModelProfile p = testing::TinyProfile("m");
  Harness h(Cold({"m"}), {p});
  h.Warmup("m");
  Instance& inst = h.instance();
  auto queued_work = [&](double at_s) {
    InstanceTelemetry t;
    inst.Snapshot(TimePoint{} + FromSeconds(at_s), t, false);
    return t.models.at(0).queued_work_s;
  };
  EXPECT_EQ(queued_work(0), 0.0);
  inst.Enqueue(NewCall(1, "a", "m", 640, 8), TimePoint{});
  inst.Enqueue(NewCall(2, "b", "m", 320, 4), TimePoint{});
  const double t_d = p.DecodeStepSeconds(1, 32768);  // nothing running yet: a batch of one
  EXPECT_NEAR(queued_work(0), p.PrefillSeconds(640, 0) + p.PrefillSeconds(320, 0) + 12 * t_d, 1e-6);
  ASSERT_TRUE(inst.Cancel(2));
  EXPECT_NEAR(queued_work(0), p.PrefillSeconds(640, 0) + 8 * t_d, 1e-6);
  ASSERT_TRUE(inst.Cancel(1));
  EXPECT_EQ(queued_work(0), 0.0);

  // Through admission, decode and completion.
  Harness run(Cold({"m"}), {p});
  run.Warmup("m");
  std::vector<double> seen;
  run.after_step = [&](Instance& i, TimePoint now) {
    InstanceTelemetry t;
    i.Snapshot(now, t, false);
    seen.push_back(t.models.at(0).queued_work_s);
  };
  run.Run({{0, "a", 0, "m", 640, 0, 8}, {0, "b", 0, "m", 320, 0, 4}, {0.5, "c", 0, "m", 640, 0, 6}});
  ASSERT_GT(seen.size(), 3u);
  EXPECT_GT(*std::max_element(seen.begin(), seen.end()), 0.0);
  for (double w : seen) EXPECT_GE(w, 0.0);
  EXPECT_EQ(seen.back(), 0.0);  // all finished
}

// While its prefill step runs, a call is neither queued nor running, but it
// is work here: the snapshot counts it running, with the rest of the step's
// predicted time and its decode in the queued work and the round estimate.
TEST(InstanceTelemetryTest, ACallInItsPrefillStepIsWorkHere) {
  const ModelProfile p = testing::TinyProfile("m");
  Harness h(Cold({"m"}), {p});
  h.Warmup("m");
  Instance& inst = h.instance();
  inst.Enqueue(NewCall(1, "a", "m", 6400, 8), TimePoint{});
  const Instance::Step& step = inst.Plan(TimePoint{}, TimePoint::max());
  ASSERT_EQ(step.kind, Instance::Step::Kind::kPrefill);
  const double prefill_s = p.PrefillSeconds(6400, 0);
  InstanceTelemetry t;
  inst.Snapshot(AtSeconds(prefill_s / 4), t, false);
  const ModelTelemetry& m = t.models.at(0);
  EXPECT_EQ(m.queued, 0);
  EXPECT_EQ(m.running, 1);
  const double t_d = p.DecodeStepSeconds(1, 32768);
  EXPECT_NEAR(m.queued_work_s, 0.75 * prefill_s + 7 * t_d, 1e-6);  // the first token comes with the prefill
  EXPECT_GE(t.round_estimate_s, 0.75 * prefill_s);
  // Past its predicted end, only the decode remains.
  inst.Snapshot(AtSeconds(2 * prefill_s), t, false);
  EXPECT_NEAR(t.models.at(0).queued_work_s, 7 * t_d, 1e-6);
}

// Eq.3's round estimate holds what a slot must run (its queued prefill and
// the protected decode), not the whole remaining decode, which fills
// whatever budget is left.
TEST(InstanceTelemetryTest, RoundEstimateCountsPrefillAndProtectedDecode) {
  const ModelProfile m = testing::TinyProfile("m");
  const ModelProfile n = testing::TinyProfile("n");
  Harness h(Cold({"m", "n"}), {m, n});  // bound 9 s, 18 protected iterations
  h.Warmup("m");
  Instance& inst = h.instance();
  inst.Enqueue(NewCall(1, "a", "m", 640, 10000), TimePoint{});
  inst.Enqueue(NewCall(2, "b", "n", 640, 2), TimePoint{});
  InstanceTelemetry t;
  inst.Snapshot(TimePoint{}, t, false);
  const double t_d = m.DecodeStepSeconds(1, 32768);
  const double expected = m.PrefillSeconds(640, 0) + 18 * t_d +                     // m: active
                          n.PrefillSeconds(640, 0) + 2 * t_d + t.models[1].switch_in_s;  // n
  EXPECT_NEAR(t.round_estimate_s, expected, 1e-6);
  EXPECT_GT(t.models[0].queued_work_s, 10000 * t_d);  // the queued work keeps all of it
  EXPECT_GT(t.models[1].switch_in_s, 0.0);
}

// admit_wait_s: 0 for the active model while its P phase is open; past it,
// the rest of the slot, the other model's slot and the switches; the model
// whose slot comes next waits less than the one whose slot just passed.
TEST(InstanceTelemetryTest, AdmitWaitFollowsTheRound) {
  Harness h(Cold({"m", "n"}), {testing::TinyProfile("m"), testing::TinyProfile("n")});
  h.Warmup("m");
  struct Seen {
    bool m_active;
    double m_wait;
    double n_wait;
  };
  std::vector<Seen> seen;
  h.after_step = [&](Instance& i, TimePoint now) {
    InstanceTelemetry t;
    i.Snapshot(now, t, false);
    seen.push_back({t.models[0].active, t.models[0].admit_wait_s, t.models[1].admit_wait_s});
  };
  h.Run({{0, "a", 0, "m", 640, 0, 200}, {0, "x", 0, "n", 640, 0, 200}, {0, "y", 0, "n", 640, 0, 200}});
  int m_open = 0, m_past = 0, n_past = 0;
  for (const Seen& s : seen) {
    const double own = s.m_active ? s.m_wait : s.n_wait;  // the active model's
    const double other = s.m_active ? s.n_wait : s.m_wait;
    if (own == 0) {
      ++(s.m_active ? m_open : n_past);  // P phase open (or the instance idle)
      continue;
    }
    ++(s.m_active ? m_past : n_past);
    // Past its P phase, the active model waits for the other's slot first.
    EXPECT_GT(own, other);
    EXPECT_GE(other, 0.0);
  }
  EXPECT_GT(m_open, 0);
  EXPECT_GT(m_past, 0);
  EXPECT_GT(n_past, 0);

  // A hot instance admits at every decode boundary: no wait.
  InstanceConfig hot = testing::TinyInstance("hot", {"m"});
  hot.pool = Pool::kHot;
  Harness hh(hot, {testing::TinyProfile("m")});
  hh.Warmup("m");
  double most = 0;
  hh.after_step = [&](Instance& i, TimePoint now) {
    InstanceTelemetry t;
    i.Snapshot(now, t, false);
    most = std::max(most, t.models[0].admit_wait_s);
    EXPECT_FALSE(t.session_prefill);
  };
  hh.Run({{0, "a", 0, "m", 640, 0, 50}, {0.01, "b", 0, "m", 640, 0, 50}});
  EXPECT_EQ(most, 0.0);
}

TEST(InstanceConfigTest, InconsistentConfigurationsAreInputErrors) {
  ProfileSet set;
  set.Add(testing::TinyProfile("m"));
  InstanceConfig missing = Cold({"nope"});
  EXPECT_THROW(Instance(missing, set), InputError);
  InstanceConfig hot = Cold({"m", "m2"});
  hot.pool = Pool::kHot;
  set.Add(testing::TinyProfile("m2"));
  EXPECT_THROW(Instance(hot, set), InputError);
  InstanceConfig small = Cold({"m"});
  small.runtime_gib = 70;
  small.graph_pool_gib = 10;  // more than the profile's 80 GiB arena
  try {
    Instance instance(small, set);
    FAIL() << "accepted an arena smaller than its fixed regions";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("does not exceed runtime_gib 70.0 + graph_pool_gib 10.0"), std::string::npos)
        << e.what();
  }
}

TEST(ColdInstanceTest, RoundsDecomposeIntoActiveAndSwitchTime) {
  Harness h(Cold({"m", "n"}), {testing::TinyProfile("m"), testing::TinyProfile("n")});
  h.Warmup("m");
  h.Run({{0, "a", 0, "m", 100, 0, 3}, {0, "x", 0, "n", 100, 0, 3}});
  double active = 0, switching = 0;
  for (const auto& r : h.rounds()) {
    active += r.active_s;
    switching += r.switch_s;
  }
  double switches = 0;
  for (const auto& s : h.switches()) switches += s.timing.total_s();
  EXPECT_NEAR(switching, switches, 1e-9);
  EXPECT_GT(active, 0);
  EXPECT_EQ(h.instance().counters().rounds, static_cast<std::int64_t>(h.rounds().size()));
}

}  // namespace
}  // namespace talaria
