// Slot holds: a slot with nothing to run held for a returning session, for
// a fixed time or as long as the return model says a return is worth it,
// and as the agent's hints say.
#include "instance/instance.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "instance/instance_harness.h"

namespace talaria {
namespace {

using testing::Cold;
using testing::Harness;

// Session b on model m, back every 0.5 s (calls at 0 to 2 s), and `other`
// in between.
std::vector<Harness::Call> BackEveryHalfSecondAnd(const Harness::Call& other) {
  return {{0, "b", 0, "m", 100, 0, 1},
          {0.5, "b", 1, "m", 150, 101, 1},
          {1.0, "b", 2, "m", 200, 151, 1},
          {1.5, "b", 3, "m", 250, 201, 1},
          other,
          {2.0, "b", 4, "m", 300, 251, 1}};
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
  h.Run(BackEveryHalfSecondAnd({1.5, "x", 0, "n", 100, 0, 1}));
  EXPECT_EQ(h.Finished("b4").path, AdmitPath::kSessionPrefill);
  EXPECT_GE(h.instance().counters().hold_hits, 1);
}

// An adaptive hold counts the active model's own queued calls among those
// it keeps waiting: a first call is admitted only at a slot's start, so a
// hold for a return that nothing else competes with would keep it queued to
// the slot's end. Here y's first call comes while b returns every ~0.5 s;
// it gets a fresh slot at once instead.
TEST(ColdInstanceTest, AnAdaptiveHoldCountsTheActiveModelsQueuedFirstCalls) {
  InstanceConfig c = Cold({"m", "n"});
  c.hold = HoldPolicy::kAdaptive;
  Harness h(c, {testing::TinyProfile("m"), testing::TinyProfile("n")});
  h.Warmup("m");
  h.Run(BackEveryHalfSecondAnd({1.55, "y", 0, "m", 100, 0, 1}));
  EXPECT_LT(ToSeconds(h.Finished("y0").first_token), 1.8);  // not held behind b's returns
}

// The arrivals scene: n's calls `before` (from 0 s), then, `after_s` later,
// b back every 0.5 s on m and x, one call of model n with an `x_prompt`
// token prompt, waiting when b3 finishes. Whether the slot was held for
// b4 (it entered by SP), when x got its first token after b3 finished, and
// when the last of `before` finished.
struct ArrivalsScene {
  bool held = false;
  double x_after_b3_s = 0;
  double before_done_s = 0;
};
ArrivalsScene RunArrivalsScene(std::vector<Harness::Call> before, double after_s, std::int64_t x_prompt = 100) {
  InstanceConfig c = Cold({"m", "n"});
  c.hold = HoldPolicy::kAdaptive;
  Harness h(c, {testing::TinyProfile("m"), testing::TinyProfile("n")});
  h.Warmup("n");
  const std::string last = before.empty() ? "" : before.back().session + std::to_string(before.back().index);
  for (const Harness::Call& b : BackEveryHalfSecondAnd({1.5, "x", 0, "n", x_prompt, 0, 1})) {
    before.push_back(b);
    before.back().at_s += after_s;
  }
  h.Run(before);
  ArrivalsScene scene;
  scene.held = h.Finished("b4").path == AdmitPath::kSessionPrefill;
  scene.x_after_b3_s = ToSeconds(h.Finished("x0").first_token - h.Finished("b3").finished);
  if (!last.empty()) scene.before_done_s = ToSeconds(h.Finished(last).finished);
  return scene;
}

// Held: x waits for the held slot, which caught b4; not held: x's slot at once.
void ExpectHeld(const ArrivalsScene& scene, bool held) {
  EXPECT_EQ(scene.held, held);
  if (held) {
    EXPECT_GT(scene.x_after_b3_s, 0.4);
  } else {
    EXPECT_LT(scene.x_after_b3_s, 0.3);
  }
}

// A hold delays more than the N calls waiting now: the calls that arrive
// while a missed return waits its W queue behind them. In the arrivals
// scene, when n's calls have lately been arriving 20 a second (a burst
// served before b came), the hold is not worth it and x goes at once.
TEST(ColdInstanceTest, AnAdaptiveHoldCountsTheCallsArrivingWhileAMissedReturnWaits) {
  ExpectHeld(RunArrivalsScene({}, 5), true);
  std::vector<Harness::Call> burst;
  for (int i = 0; i < 20; ++i) burst.push_back({0.05 * i, "y" + std::to_string(i), 0, "n", 100, 0, 1});
  ExpectHeld(RunArrivalsScene(burst, 5), false);
}

// Of the calls arriving while a missed return waits, the hold delays the
// first calls (they enter only at a slot's start) and the returns that come
// before their model's slot starts; a return that comes during its model's
// slot enters by SP, held or not. The arrivals scene with n's recent calls
// one session's returns, 5 a second (z: 20 calls 0.2 s apart, each one
// token on top of the last), and x's prompt 2,000 tokens (a return that
// misses waits ~4 s for m's next slot): holding delays the one call of n
// waiting (x) and the returns expected before n's slot opens (a switch
// away), which costs less than b's likely return saves, so the slot is
// held. Counting every arrival over all of W (the rule before 2026-12-07)
// charges those returns as if they were first calls and does not hold.
TEST(ColdInstanceTest, AnAdaptiveHoldDoesNotChargeReturnsThatEnterDuringTheirSlot) {
  std::vector<Harness::Call> z;
  for (int i = 0; i < 20; ++i) z.push_back({0.2 * i, "z", i, "n", 100 + i, i == 0 ? 0 : 99 + i, 1});
  const ArrivalsScene scene = RunArrivalsScene(z, 5, 2000);
  ASSERT_LT(scene.before_done_s, 4.0);  // z's calls came as returns, 5 a second
  ExpectHeld(scene, true);
}

// A delay inserted now shifts every slot after it until the instance next
// idles, and new sessions' first calls keep coming over all of that: an
// instance busy lately charges a hold for the first calls expected over the
// rest of its busy period, W / (1 - rho), where it counted them over W. The
// arrivals scene after n's first calls have come one every 2 s for 40 s:
// when each decoded 200 tokens (they overlap: the instance busy throughout)
// the hold is not worth it and x goes at once; when each took one token
// (the instance mostly idle), the held slot catches b4. Without the busy
// period both hold.
TEST(ColdInstanceTest, AnAdaptiveHoldChargesFirstCallsOverTheBusyPeriod) {
  for (bool busy : {false, true}) {
    SCOPED_TRACE(busy ? "busy lately" : "mostly idle lately");
    std::vector<Harness::Call> y;
    for (int i = 0; i < 20; ++i) y.push_back({2.0 * i, "y" + std::to_string(i), 0, "n", 100, 0, busy ? 200 : 1});
    ExpectHeld(RunArrivalsScene(y, 42), !busy);
  }
}

// The way back is measured: two models whose calls decode for many slots
// each run their slots to the budget, so a model that switches out with
// work waits a whole slot of the other's, not the other's queued prefill
// and protected decode that W's estimate counts. After enough ways back the
// hold's W is scaled up by the ratio, which the instance's telemetry
// reports.
TEST(ColdInstanceTest, AnAdaptiveHoldMeasuresTheWayBack) {
  for (HoldPolicy policy : {HoldPolicy::kAdaptive, HoldPolicy::kFixed}) {
    SCOPED_TRACE(ToString(policy));
    InstanceConfig c = Cold({"m", "n"});
    c.hold = policy;
    Harness h(c, {testing::TinyProfile("m"), testing::TinyProfile("n")});
    h.Warmup("m");
    h.Run({{0, "a", 0, "m", 100, 0, 4000}, {0, "x", 0, "n", 100, 0, 4000}});
    ASSERT_GE(h.switches().size(), static_cast<std::size_t>(WaitCalibration::kMinSamples));
    InstanceTelemetry t;
    h.instance().Snapshot(h.switches().back().start, t);
    if (policy == HoldPolicy::kAdaptive) {
      EXPECT_GE(h.instance().wait_calibration().samples(), WaitCalibration::kMinSamples);
      EXPECT_GT(h.instance().wait_calibration().Scale(), 1.5);
      // ... and reported (the gauge talaria_hold_wait_scale).
      EXPECT_DOUBLE_EQ(t.hold_wait_scale, h.instance().wait_calibration().Scale());
    } else {
      EXPECT_EQ(t.hold_wait_scale, 1.0);  // fixed holds read no W: nothing measured, 1 reported
    }
  }
}

// A return caught within its decode's length of the slot's end would be
// swapped out at the end and wait for the model's next slot all the same:
// the adaptive hold does not wait for it while another model's call waits.
// b0 says its tool takes 0.3 s; with a 1-token output the hold catches b1,
// with a 400-token one (4 s of decode, ending ~0.4 s before m's 4.5 s slot
// does) it does not.
TEST(ColdInstanceTest, AnAdaptiveHoldDoesNotWaitForAReturnTheSlotCannotFinish) {
  for (std::int64_t output : {1, 400}) {
    SCOPED_TRACE(output);
    InstanceConfig c = Cold({"m", "n"});
    c.hold = HoldPolicy::kAdaptive;
    Harness h(c, {testing::TinyProfile("m"), testing::TinyProfile("n")});
    h.Warmup("m");
    Harness::Call b0{0, "b", 0, "m", 100, 0, output};
    b0.hint_tool_s = 0.3;
    const double b1_at = output == 1 ? 0.4 : 4.4;
    h.Run({b0, {0, "x", 0, "n", 100, 0, 1}, {b1_at, "b", 1, "m", 150, 100 + output, output}});
    ASSERT_FALSE(h.switches().empty());
    const double b0_done = ToSeconds(h.Finished("b0").finished);
    ASSERT_LT(b0_done + 0.2, b1_at);
    const double switched = ToSeconds(h.switches().front().start);
    if (output == 1) {
      EXPECT_GT(switched, b1_at);
      EXPECT_EQ(h.Finished("b1").path, AdmitPath::kSessionPrefill);
    } else {
      EXPECT_LT(switched, b0_done + 0.05);  // x goes at once
      EXPECT_NE(h.Finished("b1").path, AdmitPath::kSessionPrefill);
    }
  }
}

// hold_charges_decode: a caught return decodes alone in the held slot, and
// the call waiting now waits for that too (the calls that would arrive
// while a missed return waits are charged it only when the model's next
// slot would have batched the return with the model's other calls, its
// company: calls arriving within W); one that misses is readmitted there
// (restored from host KV, or recomputed without HKVR), which a catch
// spares. A session that says it is back in 0.3 s keeps the slot while
// another model's call waits when its calls decode 1 token; when they
// decode 150 (1.5 s each, longer than that call would wait for the GPU)
// only the rule that leaves the decode out holds, or a context of 3,000
// tokens without HKVR (its recompute, 3 s, outweighs the decode; HKVR's
// restore of it does not). Company here is session c's calls
// on m, every 0.2 s, ending 2.4 s before b's (first calls on m stay rare:
// A W stays small). The staging of n is done before b's first call.
TEST(ColdInstanceTest, AnAdaptiveHoldChargingDecodeWeighsTheCaughtCallsDecode) {
  struct Case {
    bool company;
    bool charges;
    std::int64_t output;
    std::int64_t prompt;
    bool hkvr;
    bool held;
  };
  const std::vector<Case> cases = {
      {false, false, 1, 100, true, true},      {false, false, 150, 100, true, true},
      {false, true, 1, 100, true, true},       {false, true, 150, 100, true, false},
      {true, false, 1, 100, true, true},       {true, false, 150, 100, true, true},
      {true, true, 1, 100, true, true},        {true, true, 150, 100, true, false},
      {true, true, 150, 3000, true, false},    {true, true, 150, 3000, false, true},
  };
  for (const Case& k : cases) {
    SCOPED_TRACE(::testing::Message() << "company " << k.company << ", charges_decode " << k.charges << ", output "
                                      << k.output << ", prompt " << k.prompt << ", hkvr " << k.hkvr);
    Ablation ablation;
    ablation.hkvr = k.hkvr;
    InstanceConfig c = Cold({"m", "n"}, ablation);
    c.hold = HoldPolicy::kAdaptive;
    c.hold_charges_decode = k.charges;
    c.hold_within_share = false;  // the accounting alone: b0 finishes past m's share (4.5 s)
    Harness h(c, {testing::TinyProfile("m"), testing::TinyProfile("n")});
    h.Warmup("m");
    std::vector<Harness::Call> calls;
    const double start = 3.0;
    if (k.company) {
      for (int i = 0; i < 4; ++i) {
        calls.push_back({0.2 * i, "c", i, "m", 100 + 2 * i, i == 0 ? 0 : 99 + 2 * i, 1});
        calls.back().hint_tool_s = 0.1;  // as they come: hints stay trusted
      }
      calls.back().session_end = true;
    }
    Harness::Call b0{start, "b", 0, "m", k.prompt, 0, k.output};
    b0.hint_tool_s = 0.3;
    calls.push_back(b0);
    calls.push_back({start + 0.01, "x", 0, "n", 100, 0, 1});
    // The prompt's prefill (1 s per 1,000 tokens), then the decode.
    const double b0_done = start + 0.001 * static_cast<double>(k.prompt) + 0.01 * static_cast<double>(k.output);
    calls.push_back({b0_done + 0.3, "b", 1, "m", k.prompt + 50, k.prompt + k.output, k.output});
    h.Run(calls);
    ASSERT_FALSE(h.switches().empty());
    ASSERT_NEAR(ToSeconds(h.Finished("b0").finished), b0_done, 0.05);
    const double switched = ToSeconds(h.switches().front().start);
    if (k.held) {
      EXPECT_GT(switched, b0_done + 0.3);  // held for b1
      EXPECT_EQ(h.Finished("b1").path, AdmitPath::kSessionPrefill);
    } else {
      EXPECT_LT(switched, b0_done + 0.05);  // x goes at once
      EXPECT_NE(h.Finished("b1").path, AdmitPath::kSessionPrefill);
    }
  }
}

// A hold while the next slot's model is still being staged delays nobody
// for as long as staging has left: a switch at once would reload the rest of
// n's weights from host at the rate staging copies them. Staging n (8 GiB at
// 8 GiB/s) runs from 0 to 1 s; a session that says it is back in 2 s keeps
// the slot until then (and x's switch is then all device-to-device), but not
// once staging is done (a0 at 3 s), under either accounting.
TEST(ColdInstanceTest, AnAdaptiveHoldIsFreeWhileTheNextModelStages) {
  for (bool charges : {false, true}) {
    for (double start : {0.0, 3.0}) {
      SCOPED_TRACE(::testing::Message() << "charges_decode " << charges << ", start " << start);
      InstanceConfig c = Cold({"m", "n"});
      c.hold = HoldPolicy::kAdaptive;
      c.hold_charges_decode = charges;
      Harness h(c, {testing::TinyProfile("m"), testing::TinyProfile("n")});
      h.Warmup("m");
      Harness::Call a0{start, "a", 0, "m", 100, 0, 1};
      a0.hint_tool_s = 2;
      h.Run({a0, {start + 0.01, "x", 0, "n", 100, 0, 1}, {start + 2.11, "a", 1, "m", 150, 101, 1}});
      ASSERT_FALSE(h.switches().empty());
      const double a0_done = ToSeconds(h.Finished("a0").finished);
      const SwitchRecord& to_n = h.switches().front();
      if (start == 0) {
        EXPECT_GT(ToSeconds(to_n.start), 0.95);  // held while staging ran
        EXPECT_EQ(to_n.path, SwitchPath::kD2d);
      } else {
        EXPECT_LT(ToSeconds(to_n.start), a0_done + 0.05);  // x goes at once
      }
      EXPECT_NE(h.Finished("a1").path, AdmitPath::kSessionPrefill);  // back after either hold
    }
  }
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
    // From 3 s: n's staging (0 to 1 s) is done, so a hold costs x its time.
    Harness::Call a0{3, "a", 0, "m", 100, 0, 1};
    a0.hint_tool_s = k.hint_s;
    a0.session_end = k.end;
    h.Run({a0, {3.01, "x", 0, "n", 100, 0, 1}, {3.35, "a", 1, "m", 150, 101, 1}});
    ASSERT_FALSE(h.switches().empty());
    const double a0_done = ToSeconds(h.Finished("a0").finished);
    const double switched = ToSeconds(h.switches().front().start);
    if (k.held) {
      EXPECT_GT(switched, 3.35);
      EXPECT_EQ(h.Finished("a1").path, AdmitPath::kSessionPrefill);
    } else {
      EXPECT_LT(switched, a0_done + 0.05);
      EXPECT_NE(h.Finished("a1").path, AdmitPath::kSessionPrefill);
    }
  }
}

// A catch counts by the chance that its decode fits in what is left of the
// slot. Model m's calls lately decoded 1 token but for one of 10,000, so the
// mean decode (about 20 s) outlasts any slot (the round bound is 9 s) while
// most calls take 0.01 s. With nothing else waiting, b's slot is held for
// its return, which is likely and likely to finish: b1 enters by SP. (A
// rule that let a catch count only up to the mean decode's length before
// the slot's end held nothing here.)
TEST(ColdInstanceTest, AnAdaptiveHoldWeighsACatchByTheChanceItsDecodeFits) {
  InstanceConfig c = Cold({"m", "n"});
  c.hold = HoldPolicy::kAdaptive;
  Harness h(c, {testing::TinyProfile("m"), testing::TinyProfile("n")});
  h.Warmup("m");
  std::vector<Harness::Call> calls = {{0, "d0", 0, "m", 100, 0, 10000}};
  for (int i = 1; i <= 3; ++i) calls.push_back({100.0 + i, "d" + std::to_string(i), 0, "m", 100, 0, 1});
  Harness::Call b0{120, "b", 0, "m", 100, 0, 1};
  b0.hint_tool_s = 0.3;
  calls.push_back(b0);
  calls.push_back({120.5, "b", 1, "m", 150, 101, 1});
  h.Run(calls);
  ASSERT_GT(ToSeconds(h.Finished("d00").finished), 100);  // the long decode is in the window
  ASSERT_LT(ToSeconds(h.Finished("b0").finished), 120.3);
  EXPECT_EQ(h.Finished("b1").path, AdmitPath::kSessionPrefill);
  EXPECT_GE(h.instance().counters().hold_hits, 1);
}

// A session that comes back after each call (the within-share tests'):
// calls 0..last on `model`, call i at at_s(i), its prompt 100 + 50 i
// tokens continuing the one before (51 + 50 i of them reused), one token
// out.
void AddReturningSession(std::vector<Harness::Call>& calls, const std::string& session, const std::string& model,
                         int last, const std::function<double(int)>& at_s) {
  for (int i = 0; i <= last; ++i) {
    calls.push_back({at_s(i), session, i, model, 100 + 50 * i, i == 0 ? 0 : 51 + 50 * i, 1});
  }
}

// Harness::Run delivers calls in the order given: by arrival, and among
// calls that arrive together in the order they were added.
void ByArrival(std::vector<Harness::Call>& calls) {
  std::stable_sort(calls.begin(), calls.end(),
                   [](const Harness::Call& a, const Harness::Call& b) { return a.at_s < b.at_s; });
}

// hold_within_share: a slot that opened with nothing else to do got the
// whole round (9 s here; b1 opens it at 0.5 s); once x waits on model n,
// it keeps holding for b's returns (every 0.5 s until 8 s) only to the end
// of its share of the round counted with n (4.5 s: by 5 s), not to the
// slot's end.
TEST(ColdInstanceTest, AnAdaptiveHoldWithinShareEndsByTheSlotsShare) {
  for (bool within : {false, true}) {
    SCOPED_TRACE(within);
    InstanceConfig c = Cold({"m", "n"});
    c.hold = HoldPolicy::kAdaptive;
    c.hold_within_share = within;
    Harness h(c, {testing::TinyProfile("m"), testing::TinyProfile("n")});
    h.Warmup("m");
    std::vector<Harness::Call> calls;
    AddReturningSession(calls, "b", "m", 16, [](int i) { return 0.5 * i; });
    calls.push_back({1.5, "x", 0, "n", 100, 0, 1});
    ByArrival(calls);
    h.Run(calls);
    const double x_first_s = ToSeconds(h.Finished("x0").first_token);
    EXPECT_EQ(h.Finished("b3").path, AdmitPath::kSessionPrefill);  // held for, within the share too
    if (within) {
      EXPECT_LT(x_first_s, 5.0);                               // the hold ended by the share's end
      EXPECT_EQ(h.Finished("b10").path, AdmitPath::kPrefill);  // back after the switch: m's next slot
    } else {
      EXPECT_GT(x_first_s, 5.0);  // held past the share
    }
  }
}

// hold_within_share counts the round, not the slot alone: m's slot (a0)
// opens the round at 0 and is short; n's comes second (opened at about
// 1.1 s) and c0's long decode keeps it busy until about 8.4 s. Once y
// waits on k, n's share is 4.5 s, so its own share ended at about 5.6 s,
// but the round's first two shares end at 9 s: n may still hold for b's
// return at 8.5 s, and no longer than 9 s.
TEST(ColdInstanceTest, AnAdaptiveHoldWithinShareMayUseWhatTheRoundsEarlierSlotsLeft) {
  InstanceConfig c = Cold({"m", "n", "k"});
  c.hold = HoldPolicy::kAdaptive;
  c.hold_within_share = true;
  Harness h(c, {testing::TinyProfile("m"), testing::TinyProfile("n"), testing::TinyProfile("k")});
  h.Warmup("m");
  std::vector<Harness::Call> calls;
  calls.push_back({0.0, "a", 0, "m", 100, 0, 1});
  calls.push_back({0.0, "c", 0, "n", 100, 0, 600});
  AddReturningSession(calls, "b", "n", 15, [](int i) { return i == 0 ? 0.0 : 1.0 + 0.5 * i; });
  calls.push_back({3.0, "y", 0, "k", 100, 0, 1});
  ByArrival(calls);
  h.Run(calls);
  const double n_open_s = ToSeconds(h.Finished("b0").admitted);
  ASSERT_EQ(h.Finished("a0").path, AdmitPath::kPrefill);
  ASSERT_LT(ToSeconds(h.Finished("a0").first_token), n_open_s);   // m's slot came first,
  ASSERT_GE(h.rounds().front().slots, 2);                         // in the same round as n's
  ASSERT_LT(n_open_s + 4.5, 8.5);                                 // b15 comes after n's own share
  EXPECT_EQ(h.Finished("b15").path, AdmitPath::kSessionPrefill);  // held for past it
  // The hold ended by 9 s: y's first token follows after k's switch in
  // and its prefill (0.1 s each at most here); by the slot's end (10.1 s)
  // it would come later.
  const double y_first_s = ToSeconds(h.Finished("y0").first_token);
  EXPECT_GT(y_first_s, 8.5);
  EXPECT_LT(y_first_s, 9.2);
}

// ... but never past the round's bound: k's slot comes third in a round
// (m's a0, n's c0, then k's, opened at about 2.2 s, where e0's long decode
// keeps it busy to about 8.3 s). Once y waits on p, two models have work
// and the share is 4.5 s: k's own share ends at about 6.7 s, and three
// shares would reach 13.5 s, past the round's 9 s. So k holds for z's
// returns until 9 s, not to its slot's end (about 11.2 s): z15 at 9.5 s
// misses, and y's first token comes by 9.3 s (uncapped, z15 is caught and
// y waits past 10 s).
TEST(ColdInstanceTest, AnAdaptiveHoldWithinShareEndsByTheRoundsBound) {
  InstanceConfig c = Cold({"m", "n", "k", "p"});
  c.hold = HoldPolicy::kAdaptive;
  c.hold_within_share = true;
  Harness h(
      c, {testing::TinyProfile("m"), testing::TinyProfile("n"), testing::TinyProfile("k"), testing::TinyProfile("p")});
  h.Warmup("m");
  std::vector<Harness::Call> calls;
  calls.push_back({0.0, "a", 0, "m", 100, 0, 1});
  calls.push_back({0.0, "c", 0, "n", 100, 0, 1});
  calls.push_back({0.0, "e", 0, "k", 100, 0, 500});
  AddReturningSession(calls, "z", "k", 15, [](int i) { return i == 0 ? 0.0 : 2.0 + 0.5 * i; });
  calls.push_back({3.0, "y", 0, "p", 100, 0, 1});
  ByArrival(calls);
  h.Run(calls);
  const double k_open_s = ToSeconds(h.Finished("z0").admitted);
  ASSERT_LT(ToSeconds(h.Finished("c0").first_token), k_open_s);   // n's slot came before k's,
  ASSERT_GE(h.rounds().front().slots, 3);                         // in the same round
  ASSERT_LT(k_open_s + 4.5, 9.0);                                 // k's own share ends before the bound
  ASSERT_LT(ToSeconds(h.Finished("e0").finished), 9.0);           // and the slot is idle before it
  EXPECT_EQ(h.Finished("z13").path, AdmitPath::kSessionPrefill);  // held for within it
  EXPECT_NE(h.Finished("z15").path, AdmitPath::kSessionPrefill);  // not past it
  EXPECT_LT(ToSeconds(h.Finished("y0").first_token), 9.3);
}

// hold_charges_decode: the returns expected while a caught one decodes (its
// joiners) enter by SP and keep the slot busy for their own decodes, which
// the waiting call waits for too. Session a says it is back in 0.3 s and
// three others say they are back during a's next decode (L tokens, 0.01 s
// each); x waits on n. At L = 100 the hold pays and a1 enters by SP; at
// L = 150 the joiners' decodes (1.5 s each) outweigh what they save, so x
// goes at once. (Charging only the caught return's decode held at 150 too.)
TEST(ColdInstanceTest, AnAdaptiveHoldChargesTheJoinersDecodes) {
  constexpr int kJoiners = 3;
  for (std::int64_t output : {100, 150}) {
    SCOPED_TRACE(output);
    InstanceConfig c = Cold({"m", "n"});
    c.hold = HoldPolicy::kAdaptive;
    const double decode_s = 0.01 * static_cast<double>(output);
    auto back_s = [&](int i) { return 0.3 + 0.5 * decode_s * (i + 1) / kJoiners; };
    // Every first call at 3 s (n's staging is done): a's, the joiners', x's.
    std::vector<Harness::Call> calls;
    Harness::Call a0{3, "a", 0, "m", 100, 0, output};
    a0.hint_tool_s = 0.3;
    calls.push_back(a0);
    for (int i = 0; i < kJoiners; ++i) {
      Harness::Call j0{3, "j" + std::to_string(i), 0, "m", 100, 0, output};
      j0.hint_tool_s = back_s(i);
      calls.push_back(j0);
    }
    calls.push_back({3.01, "x", 0, "n", 100, 0, 1});
    // (The harness holds references into itself: it stays where it is built.)
    auto run = [&] {
      auto h = std::make_unique<Harness>(c, std::vector{testing::TinyProfile("m"), testing::TinyProfile("n")});
      h->Warmup("m");
      h->Run(calls);
      return h;
    };
    // The first calls decode together and finish together: when is read from
    // a run without the returns.
    const double done = ToSeconds(run()->Finished("a0").finished);
    calls.push_back({done + 0.3, "a", 1, "m", 150, 100 + output, output});
    for (int i = 0; i < kJoiners; ++i) {
      calls.push_back({done + back_s(i), "j" + std::to_string(i), 1, "m", 150, 100 + output, output});
    }
    ByArrival(calls);
    const auto h = run();
    ASSERT_NEAR(ToSeconds(h->Finished("a0").finished), done, 1e-6);
    ASSERT_FALSE(h->switches().empty());
    const double switched = ToSeconds(h->switches().front().start);
    if (output == 100) {
      EXPECT_GT(switched, done + 0.3);  // held for a1
      EXPECT_EQ(h->Finished("a1").path, AdmitPath::kSessionPrefill);
    } else {
      EXPECT_LT(switched, done + 0.05);  // x goes at once
      EXPECT_NE(h->Finished("a1").path, AdmitPath::kSessionPrefill);
    }
  }
}

}  // namespace
}  // namespace talaria
