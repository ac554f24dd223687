#include "sim/replay.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>

#include "core/error.h"
#include "instance/test_profiles.h"
#include "trace/generator.h"

namespace talaria {
namespace {

using ::testing::HasSubstr;

const std::string kRoot = TALARIA_SOURCE_DIR;

TraceCall Call(const std::string& session, int index, std::int64_t prompt, std::int64_t prefix,
               std::int64_t output, double gap) {
  TraceCall c;
  c.session_id = session;
  c.call_index = index;
  c.model = "m";
  c.prompt_tokens = prompt;
  c.prefix_tokens = prefix;
  c.output_tokens = output;
  c.gap_s = gap;
  c.token_seed = 5;
  return c;
}

ClusterConfig OneTinyInstance() {
  ClusterConfig c;
  c.source = "test";
  c.instances.push_back(testing::TinyInstance("i0", {"m"}));
  return c;
}

// Closed loop: call 1 is released gap seconds after call 0 finished, with
// the gap capped; TTFT counts from that intended release.
TEST(ReplayTest, ReleasesNextCallAfterCappedGap) {
  ProfileSet profiles;
  profiles.Add(testing::TinyProfile("m"));
  Trace t;
  t.calls = {Call("s", 0, 100, 0, 1, 0.0), Call("s", 1, 200, 101, 1, 0.5), Call("s", 2, 300, 201, 1, 30.0)};
  t.calls[2].gap_uncapped_s = 30.0;
  const std::string dir = (std::filesystem::temp_directory_path() / "talaria_replay_test").string();
  ReplayOptions o;
  o.gap_cap_s = 2.0;
  o.records_dir = dir;
  const ReplayResult r = RunReplay("talaria", OneTinyInstance(), profiles, t, o);
  EXPECT_EQ(r.calls_completed, 3);
  std::ifstream in(dir + "/calls.jsonl");
  std::vector<nlohmann::json> calls;
  for (std::string line; std::getline(in, line);) calls.push_back(nlohmann::json::parse(line));
  ASSERT_EQ(calls.size(), 3u);
  EXPECT_NEAR(calls[1]["intended_enqueue_s"].get<double>(), calls[0]["finished_s"].get<double>() + 0.5, 1e-9);
  EXPECT_NEAR(calls[2]["intended_enqueue_s"].get<double>(), calls[1]["finished_s"].get<double>() + 2.0, 1e-9);
  EXPECT_NEAR(calls[2]["ttft_s"].get<double>(),
              calls[2]["first_token_s"].get<double>() - calls[2]["intended_enqueue_s"].get<double>(), 1e-9);
  // SCT: first intended enqueue to last finish.
  EXPECT_NEAR(r.sct_s.Max(), calls[2]["finished_s"].get<double>(), 1e-9);
  std::filesystem::remove_all(dir);
}

// A decode step runs many iterations at once in the simulator; a call routed
// to the instance meanwhile still enters at the next iteration boundary
// (here by session-prefill, while the long call keeps decoding).
TEST(ReplayTest, AnArrivalCutsALongDecodeStepAtTheNextBoundary) {
  ProfileSet profiles;
  profiles.Add(testing::TinyProfile("m"));
  Trace t;
  TraceCall b1 = Call("b", 1, 200, 101, 1, 0.2);
  b1.token_seed = 6;
  t.calls = {Call("a", 0, 100, 0, 3000, 0.0), Call("b", 0, 100, 0, 1, 0.0), b1};
  t.calls[1].token_seed = 6;
  const std::string dir = (std::filesystem::temp_directory_path() / "talaria_replay_cut_test").string();
  ReplayOptions o;
  o.records_dir = dir;
  const ReplayResult r = RunReplay("talaria", OneTinyInstance(), profiles, t, o);
  ASSERT_EQ(r.calls_completed, 3);
  std::map<std::string, nlohmann::json> calls;
  std::ifstream in(dir + "/calls.jsonl");
  for (std::string line; std::getline(in, line);) {
    const auto j = nlohmann::json::parse(line);
    calls[j["session_id"].get<std::string>() + std::to_string(j["call_index"].get<int>())] = j;
  }
  ASSERT_EQ(calls.size(), 3u);
  EXPECT_EQ(calls["b1"]["admit_path"], "SP");
  EXPECT_LT(calls["b1"]["first_token_s"].get<double>(), calls["a0"]["finished_s"].get<double>());
  EXPECT_LT(calls["b1"]["ttft_s"].get<double>(), 1.0);
  std::filesystem::remove_all(dir);
}

// The paper's fixed replay on the shipped cluster: every call completes in
// every configuration, HBM stays under the cap, and two runs agree exactly.
TEST(ReplayTest, FixedReplayCompletesEveryCallInEveryAblation) {
  const ClusterConfig cluster = LoadClusterConfig(kRoot + "/configs/tp8-three-models.toml");
  const ProfileSet profiles = ProfileSet::LoadDirectory(cluster.profiles_dir);
  const Trace trace = ReadTraceFile(kRoot + "/traces/swe-fixed-30.jsonl");
  std::map<std::string, double> sct_p50;
  for (const auto& name : AblationNames()) {
    SCOPED_TRACE(name);
    ClusterConfig c = cluster;
    AblationByName(name, c.instances[0].ablation);
    const ReplayResult r = RunReplay(name, c, profiles, trace, {});
    EXPECT_EQ(r.calls_completed, 960);
    EXPECT_EQ(r.sct_s.count(), 30u);
    EXPECT_LE(r.hbm_peak_bytes, r.hbm_cap_bytes);
    sct_p50[name] = r.sct_s.Percentile(50);
    if (name == "talaria") {
      const ReplayResult again = RunReplay(name, c, profiles, trace, {});
      EXPECT_EQ(again.ToJson().dump(), r.ToJson().dump());
    }
  }
  // §5.2: each mechanism off costs SCT; all off costs most.
  EXPECT_GT(sct_p50["round-only"], sct_p50["no-sp"]);
  EXPECT_GT(sct_p50["no-sp"], sct_p50["talaria"]);
  EXPECT_GT(sct_p50["no-hkvr"], sct_p50["talaria"]);
  EXPECT_GE(sct_p50["h2d-only"], sct_p50["talaria"]);
}

// One routing run on a shipped testbed (docs/reproduction.md): the talaria
// configuration, `policy`, lease timeout `tau_s`, offered load as the
// replay's start scale (0.25: --load high, 2: --load low).
ReplayResult RoutingRun(const std::string& config, RouterPolicy policy, double tau_s, double start_scale,
                        std::optional<LeaseHonour> honour = std::nullopt) {
  ClusterConfig c = LoadClusterConfig(kRoot + "/configs/" + config);
  if (honour) c.router.lease_honour = *honour;
  const ProfileSet profiles = ProfileSet::LoadDirectory(c.profiles_dir);
  const Trace trace = ReadTraceFile(kRoot + "/traces/router-120.jsonl");
  c.router.policy = policy;
  c.router.lease_tau_s = tau_s;
  ReplayOptions options;
  options.start_scale = start_scale;
  return RunReplay(ToString(policy), c, profiles, trace, options);
}

// §5.3 at high load: the full router places no call where its worker must
// open a model the other worker has open, each baseline does, and the full
// router's TTFT p95 is the lowest.
TEST(ReplayTest, FullRouterAvoidsTheOpensBaselinesCause) {
  const ReplayResult full = RoutingRun("tp4-two-workers.toml", RouterPolicy::kFull, 1.0, 0.25);
  EXPECT_EQ(full.calls_completed, 120);
  EXPECT_EQ(full.avoidable_opens, 0);
  for (RouterPolicy p : {RouterPolicy::kLeastPressure, RouterPolicy::kSessionSticky, RouterPolicy::kRoundRobin,
                         RouterPolicy::kPrefixAware}) {
    SCOPED_TRACE(ToString(p));
    const ReplayResult base = RoutingRun("tp4-two-workers.toml", p, 1.0, 0.25);
    EXPECT_EQ(base.calls_completed, 120);
    EXPECT_GT(base.avoidable_opens, full.avoidable_opens);
    EXPECT_GT(base.ttft_s.Percentile(95), full.ttft_s.Percentile(95));
  }
}

// The session-end hint reaches the replay's router as it does the
// gateway's (both through ControlPlane::OnCompleted): a session's last call,
// marked as ending it, leaves no successor lease, so fixed leases go to the
// other calls only, and none is counted declined.
TEST(ReplayTest, ASessionsLastCallLeavesNoLease) {
  ClusterConfig c = LoadClusterConfig(kRoot + "/configs/tp4-two-workers.toml");
  const ProfileSet profiles = ProfileSet::LoadDirectory(c.profiles_dir);
  Trace trace = ReadTraceFile(kRoot + "/traces/router-120.jsonl");
  const ReplayResult plain = RunReplay("plain", c, profiles, trace, {});
  const std::vector<SessionCalls> sessions = GroupSessions(trace);
  for (const SessionCalls& s : sessions) trace.calls[s.calls.back()].session_end = true;
  const ReplayResult ended = RunReplay("ended", c, profiles, trace, {});
  EXPECT_EQ(plain.router_counters.leases_installed, 120);
  EXPECT_EQ(ended.router_counters.leases_installed, 120 - static_cast<std::int64_t>(sessions.size()));
  EXPECT_EQ(ended.router_counters.leases_declined, 0);
  EXPECT_EQ(ended.calls_completed, 120);
}

// §5.4 on workers that hold one model each: a longer lease sends more
// continuations back to their last worker, including workers that have
// switched to another model since and must open theirs again, so
// same-instance returns rise with the lease, and a long lease gives up
// residency hits against none (in between the trend need not be monotone:
// where a lease sends a return depends on the schedule it meets).
TEST(ReplayTest, LongerLeasesTradeResidencyForAffinity) {
  constexpr LeaseHonour kRoute = LeaseHonour::kRoute;  // the paper's Algorithm 1: a lease routes its return
  const ReplayResult none = RoutingRun("tp4-one-model-workers.toml", RouterPolicy::kFull, 0.0, 2.0, kRoute);
  const ReplayResult one = RoutingRun("tp4-one-model-workers.toml", RouterPolicy::kFull, 1.0, 2.0, kRoute);
  const ReplayResult five = RoutingRun("tp4-one-model-workers.toml", RouterPolicy::kFull, 5.0, 2.0, kRoute);
  for (const ReplayResult* r : {&none, &one, &five}) EXPECT_EQ(r->calls_completed, 120);
  EXPECT_EQ(none.router_counters.leases_installed, 0);
  EXPECT_GT(one.same_instance_return_rate(), none.same_instance_return_rate());
  EXPECT_GT(five.same_instance_return_rate(), one.same_instance_return_rate());
  EXPECT_LT(five.residency_hit_rate(), none.residency_hit_rate());
}

// A call in its prefill step is work on its instance: a 100K-token prompt
// keeps worker-0 busy for ~9.5 s, and a call for another model arriving at
// 6 s goes to the idle worker-1 under every router, instead of waiting
// behind the prefill because worker-0's snapshot looked idle (it did: b's
// TTFT was 13 s).
TEST(ReplayTest, APrefillingCallIsWorkEveryRouterSees) {
  ClusterConfig c = LoadClusterConfig(kRoot + "/configs/tp4-two-workers.toml");
  const ProfileSet profiles = ProfileSet::LoadDirectory(c.profiles_dir);
  Trace t;
  TraceCall a = Call("a", 0, 100000, 0, 500, 0.0);
  a.model = "qwen3-32b";
  TraceCall b = Call("b", 0, 8000, 0, 200, 6.0);
  b.model = "qwen2.5-32b-instruct";
  b.token_seed = 2;
  t.calls = {a, b};
  for (RouterPolicy p : {RouterPolicy::kFull, RouterPolicy::kLeastPressure, RouterPolicy::kSessionSticky}) {
    SCOPED_TRACE(ToString(p));
    c.router.policy = p;
    const std::string dir = (std::filesystem::temp_directory_path() / "talaria_prefill_visible").string();
    ReplayOptions o;
    o.records_dir = dir;
    const ReplayResult r = RunReplay("talaria", c, profiles, t, o);
    ASSERT_EQ(r.calls_completed, 2);
    std::ifstream in(dir + "/calls.jsonl");
    std::map<std::string, nlohmann::json> calls;
    for (std::string line; std::getline(in, line);) {
      const auto j = nlohmann::json::parse(line);
      calls[j["session_id"].get<std::string>()] = j;
    }
    EXPECT_NE(calls["b"]["instance"], calls["a"]["instance"]);
    EXPECT_LT(calls["b"]["ttft_s"].get<double>(), 3.0);
    std::filesystem::remove_all(dir);
  }
}

// Issue 17's starved model: at low load on the two-worker testbed, calls
// for a model neither worker has open failed round admission everywhere,
// waited out overload_max_wait_s and were rejected (12 of 1,095), though
// every baseline completes them all. A call whose wait runs out while fresh
// instances could take it is placed on the cheapest of them instead.
TEST(ReplayTest, TheFullRouterCompletesACallAFreshInstanceCouldTake) {
  ClusterConfig c = LoadClusterConfig(kRoot + "/configs/tp4-two-workers.toml");
  const ProfileSet profiles = ProfileSet::LoadDirectory(c.profiles_dir);
  GeneratorOptions o;
  ASSERT_TRUE(PresetOptions("characterization", o));
  o.sessions = 60;
  o.seed = 3;
  o.models = {"qwen3-32b", "qwen2.5-32b-instruct", "qwen3.5-35b-a3b"};
  o.session_rate_per_s = 0.5;
  o.gap_cap_s = 10;
  o.long_gap_probability = 0.021;
  o.max_context_tokens = 120000;
  const Trace t = GeneratePreset("characterization", o);
  ASSERT_EQ(t.calls.size(), 1095u);
  ReplayOptions low;
  low.start_scale = 2.0;
  const ReplayResult r = RunReplay("talaria", c, profiles, t, low);
  EXPECT_EQ(r.rejected, 0);
  EXPECT_EQ(r.calls_completed, 1095);
}

// A call no instance could ever hold (its KV exceeds every pool) is
// rejected once its wait runs out, even as a last resort, and its TTFT
// counts at that wait: dropping calls never improves the percentiles.
TEST(ReplayTest, ARejectedCallCountsAtItsWait) {
  ProfileSet profiles;
  profiles.Add(testing::TinyProfile("m"));
  ClusterConfig c = OneTinyInstance();
  c.overload_max_wait_s = 5;
  c.heartbeat_s = 1;
  Trace t;
  t.calls = {Call("big", 0, 500'000'000, 0, 1, 0.0), Call("ok", 0, 100, 0, 1, 0.0)};
  t.calls[1].token_seed = 6;
  const ReplayResult r = RunReplay("talaria", c, profiles, t, {});
  EXPECT_EQ(r.rejected, 1);
  EXPECT_EQ(r.rejected_by_reason.at("admission"), 1);
  EXPECT_EQ(r.calls_completed, 1);
  ASSERT_EQ(r.ttft_s.count(), 2u);
  EXPECT_NEAR(r.ttft_s.Max(), 5.0, 1e-9);  // waited 0 .. 5 s, retried each second
  EXPECT_NEAR(r.sct_s.Max(), 5.0, 1e-9);
}

TEST(ReplayTest, SummaryCarriesTheDocumentedKeys) {
  ReplayResult r;
  r.config = "talaria";
  const auto j = r.ToJson();
  for (const char* key : {"config", "calls_total", "calls_completed", "sct_p50_s", "sct_p95_s",
                          "ttft_p50_s", "ttft_p95_s", "switch_p50_ms", "switch_p95_ms",
                          "switch_share", "hbm_peak_gib", "hbm_cap_gib"}) {
    EXPECT_TRUE(j.contains(key)) << key;
  }
}

TEST(ReplayTest, ModelWithoutInstanceIsAnInputError) {
  ProfileSet profiles;
  profiles.Add(testing::TinyProfile("m"));
  Trace t;
  t.calls = {Call("s", 0, 100, 0, 1, 0.0)};
  t.calls[0].model = "other";
  try {
    RunReplay("talaria", OneTinyInstance(), profiles, t, {});
    FAIL();
  } catch (const InputError& e) {
    EXPECT_THAT(e.what(), HasSubstr("no instance hosts model 'other'"));
  }
}

}  // namespace
}  // namespace talaria
