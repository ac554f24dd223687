// A harness for one instance's tests: scripted arrivals, stepped one
// decode iteration at a time on the sim engine, each step logged as a short
// string; and the cold-pool configuration the tests share.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "driver/instance_runner.h"
#include "driver/session_client.h"
#include "engine/sim_engine.h"
#include "instance/instance.h"
#include "instance/test_profiles.h"

namespace talaria::testing {

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

inline InstanceConfig Cold(std::vector<std::string> models, Ablation ablation = {}) {
  InstanceConfig c = TinyInstance("test", std::move(models));
  c.staging_chunk_mib = 1024;
  c.host_kv_gib_per_rank = 8;
  c.ttft_target_s = 10;   // round bound 9 s
  c.tpot_target_s = 0.5;  // protected decode: 18 iterations per slot
  c.ablation = ablation;
  return c;
}

}  // namespace talaria::testing
