// What an instance tells the router (paper §4.1): measured scales, delta
// and full session lists, forgotten idle sessions, queued work, the round
// estimate and admission waits, and the reopen an open would force.
#include "instance/instance.h"

#include <gtest/gtest.h>

#include <map>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "instance/instance_harness.h"
#include "memory/block_hashes.h"

namespace talaria {
namespace {

using testing::Cold;
using testing::Harness;

// Enqueues one 100-token call of `model` at t = 0, session "s-<model>".
void EnqueueOne(Instance& inst, const std::string& model, std::int64_t id) {
  CallRequest call;
  call.id = id;
  call.session_id = "s-" + model;
  call.model = model;
  call.prompt_tokens = 100;
  call.output_tokens = 10;
  inst.Enqueue(call, TimePoint{});
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
    EnqueueOne(inst, "m", 0);
    if (n_busy) EnqueueOne(inst, "n", 1);
    InstanceTelemetry t;
    inst.Snapshot(AtSeconds(0), t);
    ASSERT_EQ(t.models.size(), 3u);
    EXPECT_EQ(t.models[0].forced_reopen_s, 0.0);  // open
    EXPECT_EQ(t.models[1].forced_reopen_s, 0.0);
    EXPECT_DOUBLE_EQ(t.models[2].forced_reopen_s, n_busy ? t.models[1].full_open_s : 0.0);
    EXPECT_GT(t.models[1].full_open_s, t.models[0].full_open_s);
  }
}

// A closed model whose open is deferred (defer_forced_opens: it would close
// n, which has work) advertises its next P phase no sooner than its calls,
// the routed one among them, have paid the two opens times the other
// models' calls: with m and n holding one call each and o none yet,
// (open(o) + open(n)) x 2 over 1 payer. Without deferral the wait is the
// round's.
TEST(InstanceTelemetryTest, ADeferredOpenAdvertisesTheRentStillOwed) {
  for (const bool defer : {true, false}) {
    SCOPED_TRACE(defer);
    ProfileSet set;
    for (const char* model : {"m", "n", "o"}) set.Add(testing::TinyProfile(model));
    InstanceConfig c = Cold({"m", "n", "o"});
    c.resident = {"m", "n"};
    c.max_resident = 2;
    c.defer_forced_opens = defer;
    Instance inst(c, set);
    inst.Warmup("m", TimePoint{});
    EnqueueOne(inst, "m", 0);
    EnqueueOne(inst, "n", 1);
    InstanceTelemetry t;
    inst.Snapshot(AtSeconds(0), t);
    ASSERT_EQ(t.models.size(), 3u);
    const double owed_s = (t.models[2].full_open_s + t.models[2].forced_reopen_s) * 2;
    ASSERT_GT(t.models[2].forced_reopen_s, 0.0);
    if (defer) {
      EXPECT_NEAR(t.models[2].admit_wait_s, owed_s, 1e-9);
    } else {
      EXPECT_LT(t.models[2].admit_wait_s, owed_s);
    }
  }
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

// A slot in a fixed hold advertises the hold: the instance switches to
// another model no sooner than the hold's end, so that model's calls wait
// at least the rest of it (with no hold, the slot closes when its work
// ends and they wait for nothing).
TEST(InstanceTelemetryTest, AdmitWaitCountsTheRestOfAHold) {
  for (const double hold : {1.0, 0.0}) {
    SCOPED_TRACE(hold);
    InstanceConfig c = Cold({"m", "n"});
    c.slot_hold_s = hold;
    Harness h(c, {testing::TinyProfile("m"), testing::TinyProfile("n")});
    h.Warmup("m");
    // Stops in the hold, if any: z's call is still to come.
    h.Run({{0, "a", 0, "m", 100, 0, 1}, {5, "z", 0, "n", 100, 0, 1}}, /*until_s=*/0.5);
    const TimePoint done = h.Finished("a0").finished;
    ASSERT_LT(ToSeconds(done), 0.2);
    InstanceTelemetry t;
    h.instance().Snapshot(done + FromSeconds(0.3), t, false);
    if (hold > 0) {
      EXPECT_NEAR(t.models[1].admit_wait_s, 0.7, 1e-6);  // the hold's last 0.7 s
    } else {
      EXPECT_EQ(t.models[1].admit_wait_s, 0.0);
    }
  }
}

}  // namespace
}  // namespace talaria
