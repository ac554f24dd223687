// One instance's scheduler, step by step: cold-pool rounds (slots, budgets,
// switches, residency), session-prefill admission, decode order, hot-pool
// continuous batching, and configuration checks.
#include "instance/instance.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "core/error.h"
#include "instance/instance_harness.h"
#include "memory/block_hashes.h"

namespace talaria {
namespace {

using ::testing::ElementsAre;
using testing::Cold;
using testing::Harness;

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
    c.defer_forced_opens = false;  // the paper's round: n's slot comes at once
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

// Three models m, n, o on room for two (m and n open), with short slots.
InstanceConfig ThreeModelsInRoomForTwo() {
  InstanceConfig c = Cold({"m", "n", "o"});
  c.ttft_target_s = 1.0;
  c.tpot_target_s = 0.1;
  c.min_prefill_budget_s = 0;
  c.resident = {"m", "n"};
  c.max_resident = 2;
  return c;
}
std::vector<ModelProfile> ThreeTinyProfiles() {
  return {testing::TinyProfile("m"), testing::TinyProfile("n"), testing::TinyProfile("o")};
}

// Three models with work take turns on room for two: each switch into a
// closed model closes the open one whose next slot comes last in round
// order (the outgoing model), so the model after it is still open and
// opens alternate with free switches. Closing the least recently active
// one instead would close exactly the model the next slot needs, and every
// switch would open a model.
TEST(ColdInstanceTest, ThreeModelsInRoomForTwoOpenAtEveryOtherSwitch) {
  InstanceConfig c = ThreeModelsInRoomForTwo();
  c.defer_forced_opens = false;  // the paper's round: every model with work gets a slot each round
  Harness h(c, ThreeTinyProfiles());
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

// The same three models with deferred forced opens: o's slot is passed
// over (its open would close n, which has work) until x0 has waited as long
// as the two opens would delay a0 and b0, so the instance opens fewer
// models than the paper's round and x0 still finishes.
TEST(ColdInstanceTest, AForcedOpenWaitsUntilItsCallsHaveWaitedForIt) {
  const auto run = [](bool defer) {
    InstanceConfig c = ThreeModelsInRoomForTwo();
    c.defer_forced_opens = defer;
    auto h = std::make_unique<Harness>(c, ThreeTinyProfiles());
    h->Warmup("m");
    h->Run({{0, "a", 0, "m", 100, 0, 400}, {0, "b", 0, "n", 100, 0, 400}, {0, "x", 0, "o", 100, 0, 50}});
    return h;
  };
  const auto paper = run(false);
  const auto deferred = run(true);
  const auto first_into_o = [](const Harness& h) {
    for (const auto& s : h.switches()) {
      if (s.to == "o") return s;
    }
    ADD_FAILURE() << "o never got a slot";
    return SwitchRecord{};
  };
  const SwitchRecord o_paper = first_into_o(*paper);
  const SwitchRecord o_deferred = first_into_o(*deferred);
  EXPECT_TRUE(o_deferred.opened);
  // Passed over at least once: n, then m again, before o.
  EXPECT_GT(o_deferred.start, o_paper.start);
  ASSERT_GE(deferred->switches().size(), 2u);
  EXPECT_EQ(deferred->switches()[0].to, "n");
  EXPECT_EQ(deferred->switches()[1].to, "m");
  // By then x0's wait (the rent, since t = 0) covers the two opens times
  // the calls of m and n they delay, at least one of which is still there.
  const double open_s = o_deferred.timing.open_weights_s;
  EXPECT_GE(ToSeconds(o_deferred.start - TimePoint{}), 2 * open_s);
  EXPECT_LT(deferred->instance().counters().model_opens, paper->instance().counters().model_opens);
  for (const char* call : {"a0", "b0", "x0"}) {
    EXPECT_TRUE(deferred->Done(call)) << call;
    EXPECT_TRUE(paper->Done(call)) << call;
  }
}

// Deferral only weighs an open that closes a model with work: with n idle,
// o's open closes n and o gets its slot right after m's, as in the paper's
// round.
TEST(ColdInstanceTest, AnOpenThatClosesAnIdleModelIsNotDeferred) {
  InstanceConfig c = ThreeModelsInRoomForTwo();
  ASSERT_TRUE(c.defer_forced_opens);  // the default
  Harness h(c, ThreeTinyProfiles());
  h.Warmup("m");
  h.Run({{0, "a", 0, "m", 100, 0, 400}, {0, "x", 0, "o", 100, 0, 50}});
  ASSERT_FALSE(h.switches().empty());
  EXPECT_EQ(h.switches()[0].to, "o");
  EXPECT_TRUE(h.switches()[0].opened);
  EXPECT_LE(h.switches()[0].start, AtSeconds(0.5));  // m's first slot, about 0.45 s
  EXPECT_TRUE(h.Done("x0"));
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
