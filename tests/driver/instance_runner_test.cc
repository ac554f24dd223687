#include "driver/instance_runner.h"

#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <vector>

#include "engine/sim_engine.h"
#include "instance/test_profiles.h"
#include "driver/session_client.h"

namespace talaria {
namespace {

// Records what it hears, and what the instance looked like then.
class Recorder final : public InstanceEvents {
 public:
  explicit Recorder(Instance* instance = nullptr) : instance_(instance) {}
  void OnFirstToken(std::int64_t id, TimePoint) override { log.push_back("first:" + std::to_string(id)); }
  void OnTokens(std::int64_t id, std::int64_t n, TimePoint) override {
    log.push_back("tokens:" + std::to_string(id) + "=" + std::to_string(n));
  }
  void OnFinished(const CallRecord& r) override {
    log.push_back("finished:" + std::to_string(r.id));
    if (instance_ != nullptr) busy_at_finish.push_back(instance_->busy());
  }
  void OnSwitch(const SwitchRecord& r) override { log.push_back("switch:" + r.to); }
  void OnRound(const RoundRecord& r) override { log.push_back("round:" + std::to_string(r.index)); }
  std::vector<std::string> log;
  std::vector<bool> busy_at_finish;

 private:
  Instance* instance_;
};

TEST(InstanceEventBufferTest, DeliversEveryEventInTheOrderItHappenedThenEmpties) {
  InstanceEventBuffer buffer;
  CallRecord call;
  call.id = 7;
  SwitchRecord sw;
  sw.to = "m";
  RoundRecord round;
  round.index = 3;
  buffer.OnSwitch(sw);
  buffer.OnFirstToken(7, TimePoint{});
  buffer.OnTokens(7, 2, TimePoint{});
  buffer.OnRound(round);
  buffer.OnFinished(call);
  Recorder r;
  buffer.DeliverTo(r);
  EXPECT_EQ(r.log, (std::vector<std::string>{"switch:m", "first:7", "tokens:7=2", "round:3", "finished:7"}));
  EXPECT_TRUE(buffer.empty());
  Recorder again;
  buffer.DeliverTo(again);
  EXPECT_TRUE(again.log.empty());
}

// The one re-entrancy rule: nothing reaches the driver while the scheduler
// commits; a handler that hears a finished call sees an instance with no
// step in flight, so it may enqueue the session's next call.
// One tiny instance of model "m", warmed up, with call 1 of session "s"
// (64 prompt tokens) queued.
struct OneQueuedCall {
  explicit OneQueuedCall(std::int64_t output_tokens) {
    profiles.Add(testing::TinyProfile("m"));
    instance.emplace(testing::TinyInstance("i0", {"m"}), profiles);
    instance->Warmup("m", TimePoint{});
    TraceCall c;
    c.session_id = "s";
    c.model = "m";
    c.prompt_tokens = 64;
    c.output_tokens = output_tokens;
    c.token_seed = 1;
    TraceSessionContext session;
    session.Advance(c, instance->config().block_tokens);
    instance->Enqueue(session.Request(c, 1), TimePoint{});
  }
  ProfileSet profiles;
  std::optional<Instance> instance;
};

TEST(InstanceRunnerTest, EventsReachTheDriverOnlyOnDeliverAfterTheCommit) {
  OneQueuedCall call(32);
  Instance& instance = *call.instance;
  SimEngine engine;
  InstanceRunner runner(instance, engine);

  Recorder heard(&instance);
  TimePoint now{};
  for (int guard = 0; guard < 1000 && heard.busy_at_finish.empty(); ++guard) {
    const Instance::Step& step = runner.Plan(now, now);
    ASSERT_NE(step.kind, Instance::Step::Kind::kIdle);
    const Duration took = runner.Execute();
    EXPECT_GT(took, Duration::zero());
    now += took;
    const std::size_t before = heard.log.size();
    runner.Commit(now);
    EXPECT_EQ(heard.log.size(), before) << "an event reached the driver during the commit";
    runner.Deliver(heard);
  }
  ASSERT_EQ(heard.busy_at_finish, std::vector<bool>{false});
  EXPECT_EQ(heard.log.front(), "first:1");
  EXPECT_EQ(heard.log.back(), "finished:1");
}

// Stands in for an engine that computes: each step "measures" the sim
// engine's duration times a factor per phase.
class ScaledEngine final : public Engine {
 public:
  ScaledEngine(double prefill, double decode) : prefill_(prefill), decode_(decode) {}
  bool emulated() const override { return false; }
  Duration Prefill(const PrefillStep& step) override { return Scale(model_.Prefill(step), prefill_); }
  Duration Decode(const DecodeStep& step) override { return Scale(model_.Decode(step), decode_); }
  SwitchTiming Switch(const SwitchStep& step) override { return model_.Switch(step); }

 private:
  static Duration Scale(Duration d, double f) { return FromSeconds(ToSeconds(d) * f); }
  SimEngine model_;
  double prefill_, decode_;
};

// Runs one call to its end on `engine`; returns the runner's fidelity.
StepFidelity RunOneCall(Engine& engine) {
  OneQueuedCall call(8);
  InstanceRunner runner(*call.instance, engine);
  Recorder heard;
  TimePoint now{};
  for (int guard = 0; guard < 1000 && (heard.log.empty() || heard.log.back() != "finished:1"); ++guard) {
    if (runner.Plan(now, now).kind == Instance::Step::Kind::kIdle) break;
    now += runner.Execute();
    runner.Commit(now);
    runner.Deliver(heard);
  }
  EXPECT_EQ(heard.log.back(), "finished:1");
  return runner.fidelity();
}

// A computing engine's steps are counted against the profile model's time
// for the same steps, phase by phase; an emulated engine adds nothing.
TEST(InstanceRunnerTest, CountsAComputingEnginesStepsAgainstTheProfileModel) {
  ScaledEngine slow(2.0, 3.0);
  const StepFidelity f = RunOneCall(slow);
  const StepFidelity::Totals& p = f.phases[StepFidelity::kPrefill];
  const StepFidelity::Totals& d = f.phases[StepFidelity::kDecode];
  EXPECT_EQ(p.steps, 1);
  EXPECT_GT(p.model_s, 0);
  EXPECT_NEAR(p.measured_s, 2.0 * p.model_s, 1e-9);
  EXPECT_GE(d.steps, 1);
  EXPECT_GT(d.model_s, 0);
  EXPECT_NEAR(d.measured_s, 3.0 * d.model_s, 1e-9);
  EXPECT_EQ(f.phases[StepFidelity::kSessionPrefill].steps, 0);

  SimEngine emulated;
  const StepFidelity none = RunOneCall(emulated);
  for (const StepFidelity::Totals& t : none.phases) {
    EXPECT_EQ(t.steps, 0);
    EXPECT_EQ(t.measured_s, 0);
  }
}

}  // namespace
}  // namespace talaria
