// The gateway: the router in front of the instances (paper §3.1, §4.1). It
// never touches tokens beyond naming them: it renders and byte-tokenizes the
// prompt to find the reusable prefix and its block hashes, asks the router
// for an instance, submits the call to that instance's real-time driver, and
// relays token progress and completion to a sink. Telemetry reaches the
// router on a heartbeat thread; the completion hook installs leases.
//
// This build runs every instance in-process on the sim engine, an emulation
// of the GPUs at `time_scale` (not a GPU): generated text is deterministic
// filler, and says so.
//
// Thread safety: Submit and the accessors may be called from any thread;
// sink methods run on instance driver threads.
#pragma once

#include <atomic>
#include <list>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "profile/profile.h"
#include "router/router.h"
#include "server/metrics.h"
#include "server/openai_api.h"
#include "server/realtime_instance.h"
#include "sim/cluster_config.h"

namespace talaria {

struct Usage {
  std::int64_t prompt_tokens = 0;
  std::int64_t completion_tokens = 0;
  std::int64_t cached_tokens = 0;
};

// Names a call placed on an instance, for cancellation.
struct CallHandle {
  std::int32_t instance = -1;  // -1: the call was not placed (its sink got an error)
  std::int64_t id = -1;
};

// Receives one call's output. Exactly one of OnDone / OnError ends a call.
class CompletionSink {
 public:
  virtual ~CompletionSink() = default;
  virtual void OnDelta(const std::string& text) = 0;
  virtual void OnDone(const Usage& usage, const std::string& finish_reason) = 0;
  virtual void OnError(const ApiError& error) = 0;
};

class Gateway {
 public:
  Gateway(const ClusterConfig& cluster, const ProfileSet& profiles);
  ~Gateway();
  Gateway(const Gateway&) = delete;
  Gateway& operator=(const Gateway&) = delete;

  void Start();
  void Stop();

  // Places and runs one call; the sink hears the outcome. `api_key` scopes
  // the session id.
  CallHandle Submit(const CompletionRequest& request, const std::string& api_key,
                    std::shared_ptr<CompletionSink> sink);
  // The client went away: drop the call, freeing its slot and KV. Counts it
  // failed unless it had already finished. Returns whether it was dropped.
  bool Cancel(const CallHandle& handle);

  // Every instance's current telemetry snapshot (what the router reads).
  std::vector<InstanceTelemetry> Telemetry();

  // Models any instance serves, sorted.
  std::vector<std::string> Models() const;
  bool ApiKeyAccepted(const std::string& key) const;
  bool RequiresApiKey() const { return !serve_.api_keys.empty(); }
  ServerMetrics& metrics() { return metrics_; }


  // The deterministic filler text of output token `index` (sim engine).
  static std::string FillerToken(std::int64_t index);

 private:
  struct SessionState {
    std::vector<std::int32_t> context;  // previous prompt + output token ids
    std::list<std::string>::iterator lru;
  };
  // Sessions kept for prefix matching; the least recently used go first.
  static constexpr std::size_t kMaxSessions = 100'000;

  void HeartbeatLoop();

  TimePoint Now() const;

  ServeOptions serve_;
  const ProfileSet& profiles_;
  std::shared_ptr<const SteadyClock> clock_;
  std::vector<std::unique_ptr<RealtimeInstance>> instances_;
  std::unordered_map<std::string, std::int64_t> model_context_;  // model -> max context tokens
  double heartbeat_s_;
  std::int32_t block_tokens_;

  std::mutex mu_;  // guards router_, sessions_, next_id_
  Router router_;
  std::unordered_map<std::string, SessionState> sessions_;
  std::list<std::string> session_lru_;  // front = least recently used
  std::int64_t next_id_ = 0;

  ServerMetrics metrics_;
  std::atomic<bool> stop_{false};
  std::thread heartbeat_;
};

}  // namespace talaria
