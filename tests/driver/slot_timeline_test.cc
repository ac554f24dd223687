#include "driver/slot_timeline.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "driver/instance_runner.h"
#include "driver/session_client.h"
#include "engine/sim_engine.h"
#include "instance/test_profiles.h"

namespace talaria {
namespace {

// Runs calls (arrival second, session, model) on a cold instance of models
// m and n with a timeline attached, to the end; returns the segments as
// "phase:model" ("switch:model:path" for switches) with their times.
class TimelineRun : public InstanceEvents {
 public:
  struct Arrival {
    double at_s;
    std::string session;
    std::string model;
  };

  explicit TimelineRun(double slot_hold_s) {
    profiles_.Add(testing::TinyProfile("m"));
    profiles_.Add(testing::TinyProfile("n"));
    InstanceConfig c = testing::TinyInstance("i0", {"m", "n"});
    c.slot_hold_s = slot_hold_s;
    instance_ = std::make_unique<Instance>(c, profiles_);
    runner_ = std::make_unique<InstanceRunner>(*instance_, engine_);
    runner_->SetTimeline(&timeline_);
    instance_->Warmup("m", TimePoint{});
  }

  void Run(std::vector<Arrival> arrivals) {
    TimePoint now{};
    std::size_t next = 0;
    for (int guard = 0; guard < 100000; ++guard) {
      while (next < arrivals.size() && AtSeconds(arrivals[next].at_s) <= now) Enqueue(arrivals[next++], now);
      const TimePoint horizon = next < arrivals.size() ? AtSeconds(arrivals[next].at_s) : now;
      const Instance::Step& step = runner_->Plan(now, horizon);
      if (step.kind == Instance::Step::Kind::kIdle) {
        TimePoint wake = step.wake_at;
        if (next < arrivals.size()) wake = std::min(wake, AtSeconds(arrivals[next].at_s));
        if (wake == TimePoint::max()) break;
        now = std::max(now, wake);
        continue;
      }
      now += runner_->Execute();
      runner_->Commit(now);
      runner_->Deliver(*this);
    }
    timeline_.Flush();
  }

  std::vector<std::string> Names() const {
    std::vector<std::string> out;
    for (const auto& s : segments) {
      std::string name = std::string(ToString(s.phase)) + ":" + std::string(s.model);
      if (s.phase == TimelinePhase::kSwitch) name += std::string(":") + ToString(s.path);
      out.push_back(name);
    }
    return out;
  }

  void OnFirstToken(std::int64_t, TimePoint) override {}
  void OnFinished(const CallRecord&) override {}
  void OnSwitch(const SwitchRecord&) override {}
  void OnRound(const RoundRecord&) override {}

  std::vector<TimelineSegment> segments;

 private:
  void Enqueue(const Arrival& a, TimePoint now) {
    TraceCall c;
    c.session_id = a.session;
    c.call_index = static_cast<std::int32_t>(sessions_[a.session].size());
    c.model = a.model;
    c.prompt_tokens = 100 + 60 * c.call_index;
    c.prefix_tokens = c.call_index == 0 ? 0 : 100 + 60 * (c.call_index - 1) + 1;
    c.output_tokens = 20;
    c.token_seed = 1;
    TraceSessionContext& ctx = contexts_[a.session];
    ctx.Advance(c, instance_->config().block_tokens);
    instance_->Enqueue(ctx.Request(c, next_id_++), now);
    sessions_[a.session].push_back(c);
  }

  ProfileSet profiles_;
  SimEngine engine_;
  std::unique_ptr<Instance> instance_;
  std::unique_ptr<InstanceRunner> runner_;
  SlotTimeline timeline_{[this](const TimelineSegment& s) { segments.push_back(s); }};
  std::map<std::string, TraceSessionContext> contexts_;
  std::map<std::string, std::vector<TraceCall>> sessions_;
  std::int64_t next_id_ = 1;
};

// A decode's many steps make one segment; a hold keeps the slot for the
// session that just finished, and its return enters by SP; then the
// switch to the other model's queued call, with its path.
TEST(SlotTimelineTest, MergesStepsAndShowsHoldsSessionPrefillAndSwitches) {
  TimelineRun run(/*slot_hold_s=*/1.0);
  run.Run({{0, "a", "m"}, {0, "x", "n"}, {0.4, "a", "m"}});
  EXPECT_EQ(run.Names(), (std::vector<std::string>{"prefill:m", "decode:m", "hold:m", "session_prefill:m", "decode:m",
                                                   "hold:m", "switch:n:d2d", "prefill:n", "decode:n",
                                                   "hold:n"}));
  // In order, numbered, never overlapping, each with its memory.
  for (std::size_t k = 0; k < run.segments.size(); ++k) {
    const TimelineSegment& s = run.segments[k];
    EXPECT_EQ(s.seq, k + 1);
    EXPECT_LE(s.start, s.end);
    if (k > 0) {
      EXPECT_GE(s.start, run.segments[k - 1].end);
    }
    EXPECT_GT(s.memory.kv_total_bytes, 0);
  }
  // The decode of a0 holds its KV; the segment says so.
  EXPECT_GT(run.segments[1].memory.kv_used_bytes, 0);
}

// Without a hold the slot is not kept: no hold segment, and the return
// waits for m's next slot after n's.
TEST(SlotTimelineTest, NoHoldSegmentWithoutAHold) {
  TimelineRun run(/*slot_hold_s=*/0.0);
  run.Run({{0, "a", "m"}, {0, "x", "n"}, {0.4, "a", "m"}});
  const auto names = run.Names();
  for (const auto& name : names) {
    EXPECT_EQ(name.rfind("hold", 0), std::string::npos) << name;
    EXPECT_NE(name, "session_prefill:m");
  }
  ASSERT_GE(names.size(), 3u);
  EXPECT_EQ(names[0], "prefill:m");
  EXPECT_EQ(names[2].rfind("switch:n:", 0), 0u) << names[2];
  EXPECT_EQ(std::count(names.begin(), names.end(), "prefill:m"), 2);
}

TEST(SlotTimelineTest, JsonNamesEveryField) {
  TimelineSegment s;
  s.seq = 4;
  s.model = "m";
  s.phase = TimelinePhase::kSwitch;
  s.path = SwitchPath::kH2d;
  s.start = AtSeconds(1.5);
  s.end = AtSeconds(2.0);
  s.memory = MemoryOccupancy{10, 100, 20, 200};
  const auto j = ToJson(s);
  EXPECT_EQ(j.dump(),
            R"({"seq":4,"model":"m","phase":"switch","path":"h2d","start_s":1.5,"end_s":2.0,"kv_used_bytes":10,)"
            R"("kv_total_bytes":100,"host_kv_used_bytes":20,"host_kv_capacity_bytes":200})");
  s.phase = TimelinePhase::kDecode;
  EXPECT_FALSE(ToJson(s).contains("path"));
}

}  // namespace
}  // namespace talaria
