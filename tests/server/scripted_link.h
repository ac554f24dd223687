// Test doubles for the gateway on a manual clock: a sink that records a
// call's one outcome, and an instance link the test scripts (its polls
// answer with a real instance's snapshot while `answers`; the calls placed
// on it wait in `placed` for the test to finish them).
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "config/cluster_config.h"
#include "instance/instance.h"
#include "instance/test_profiles.h"
#include "server/instance_link.h"
#include "server/openai_api.h"

namespace talaria::testing {

class RecordingSink final : public CompletionSink {
 public:
  void OnDelta(const std::string&) override {}
  void OnDone(const Usage&, const std::string&) override { Settle("done", std::nullopt); }
  void OnError(const ApiError& error) override { Settle("error", error); }
  const std::string& outcome() const { return outcome_; }
  ApiError error() const { return error_.value_or(ApiError{}); }

 private:
  void Settle(const char* outcome, std::optional<ApiError> error) {
    EXPECT_TRUE(outcome_.empty()) << "a second outcome: " << outcome;
    outcome_ = outcome;
    error_ = std::move(error);
  }
  std::string outcome_;
  std::optional<ApiError> error_;
};

class ScriptedLink final : public InstanceLink {
 public:
  ScriptedLink(const InstanceConfig& config, const ProfileSet& profiles) : instance_(config, profiles) {
    instance_.Warmup(config.models.front(), TimePoint{});
  }
  const std::string& name() const override { return instance_.name(); }
  void Submit(std::shared_ptr<const LinkCall> call, std::shared_ptr<CompletionSink> sink) override {
    placed.push_back({std::move(call), std::move(sink)});
  }
  bool Cancel(std::int64_t) override { return false; }
  void PollTelemetry(std::function<void(std::optional<InstanceTelemetry>)> done) override {
    if (!answers) return done(std::nullopt);
    InstanceTelemetry t;
    instance_.Snapshot(TimePoint{}, t);
    done(t);
  }
  nlohmann::json Timeline(std::uint64_t) override {
    return nlohmann::json{{"instance", name()}, {"now_s", 0.0}, {"segments", nlohmann::json::array()}, {"open", nullptr}};
  }

  bool answers = true;
  struct Placed {
    std::shared_ptr<const LinkCall> call;
    std::shared_ptr<CompletionSink> sink;
  };
  std::vector<Placed> placed;

 private:
  Instance instance_;
};

// Two instances "i0" and "i1" serving the tiny model "m", heartbeats every
// emulated second (the scripted-link tests' cluster; they set the rest).
inline ClusterConfig TwoTinyInstances() {
  ClusterConfig c;
  c.source = "test";
  c.instances.push_back(TinyInstance("i0", {"m"}));
  c.instances.push_back(TinyInstance("i1", {"m"}));
  c.heartbeat_s = 1;
  return c;
}

// A scripted link per instance of `c`, index-aligned; `out` gets a pointer
// to each (they live as long as the gateway that takes them).
inline std::vector<std::unique_ptr<InstanceLink>> ScriptedLinks(const ClusterConfig& c, const ProfileSet& profiles,
                                                                 ScriptedLink** out) {
  std::vector<std::unique_ptr<InstanceLink>> links;
  for (std::size_t i = 0; i < c.instances.size(); ++i) {
    auto link = std::make_unique<ScriptedLink>(c.instances[i], profiles);
    out[i] = link.get();
    links.push_back(std::move(link));
  }
  return links;
}

}  // namespace talaria::testing
