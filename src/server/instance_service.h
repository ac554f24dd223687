// One instance behind a server: the real-time driver of its scheduler on
// its engine, plus what a server adds around it: prompt tokenization and
// the context check, session contexts for prefix matching, output text,
// metrics, telemetry and operator residency control. Served over HTTP by
// `talaria instance` (HttpServer), or called in-process by the gateway of
// `talaria serve` (LocalInstanceLink).
//
// The engine is the instance config's `engine`: "sim" emulates the GPUs at
// `time_scale` (not a GPU), and its output text is deterministic filler
// ("sim engine filler text ..."), saying so; "cpu" runs the CPU reference
// models (engine/cpu_engine.h) in real time and streams the bytes they
// generate.
//
// Thread safety: every method may be called from any thread; sinks run on
// the driver thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "driver/session_client.h"
#include "server/call_prep.h"
#include "server/instance_metrics.h"
#include "server/realtime_instance.h"
#include "server/service.h"
#include "config/cluster_config.h"

namespace talaria {

// A call's agent hints as the scheduler takes them (CallRequest).
struct AgentHints {
  double expected_tool_s = -1;  // -1: none
  bool session_end = false;
};

class InstanceService final : public CompletionService {
 public:
  // `profiles` must outlive the service. Throws InputError for a bad config.
  InstanceService(InstanceConfig config, const ProfileSet& profiles, const ServeOptions& serve,
                  std::shared_ptr<const SteadyClock> clock = nullptr);
  ~InstanceService() override;

  // Also told of every model switch (after this service's own metrics).
  // REQUIRES: before Start().
  void SetSwitchObserver(std::function<void(const SwitchRecord&)> observer);
  void Start();
  void Stop();

  // The call path below the HTTP layer: the prompt is already tokenized and
  // checked, `session` already scoped. Returns the call's id.
  std::int64_t SubmitTokens(const std::string& model, std::vector<std::int32_t> prompt, std::int64_t max_tokens,
                            const std::string& session, std::shared_ptr<CompletionSink> sink, AgentHints hints = {});
  InstanceTelemetry Snapshot() { return driver_.Snapshot(); }
  const std::string& name() const { return driver_.name(); }

  // CompletionService.
  std::int64_t Submit(const CompletionRequest& request, const std::string& api_key,
                      std::shared_ptr<CompletionSink> sink) override;
  bool Cancel(std::int64_t id) override;
  std::vector<std::string> Models() const override { return catalog_.Models(); }
  nlohmann::json Telemetry() override;
  nlohmann::json Timeline(const std::vector<std::uint64_t>& after) override;
  // This instance's entry of Timeline (server/timeline_json.h).
  nlohmann::json TimelineEntry(std::uint64_t after);
  std::size_t TimelineInstances() const override { return 1; }
  std::variant<nlohmann::json, ApiError> Admin(const std::string& model, const std::string& action) override;
  bool RequiresApiKey() const override { return !api_keys_.empty(); }
  bool ApiKeyAccepted(const std::string& key) const override { return KeyAccepted(api_keys_, key); }
  bool IsOperator(const std::string& key) const override { return api_keys_.empty() || key == operator_key_; }
  ServerMetrics& metrics() override { return metrics_; }
  std::string RenderMetrics() override;

  // What the instance's metric families read (server/instance_metrics.h).
  InstanceCounters Counters() { return driver_.Counters(); }
  StepFidelity Fidelity() { return driver_.Fidelity(); }
  const InstanceHistograms& histograms() const { return histograms_; }

  // The deterministic filler text of output token `index` (sim engine).
  static std::string FillerToken(std::int64_t index);

 private:
  ModelCatalog catalog_;
  std::int32_t block_tokens_;
  std::vector<std::string> api_keys_;
  std::string operator_key_;
  RealtimeInstance driver_;
  std::function<void(const SwitchRecord&)> switch_observer_;

  std::mutex mu_;  // guards sessions_
  SessionContexts sessions_;
  std::atomic<std::int64_t> next_id_{0};
  ServerMetrics metrics_;
  InstanceHistograms histograms_;
};

}  // namespace talaria
