// The gateway: the router in front of the instances (paper §3.1, §4.1). It
// never touches tokens beyond naming them: it renders and byte-tokenizes the
// prompt to find the session's reusable prefix, asks the router for an
// instance, hands the call to that instance's link, and relays its output.
// Telemetry is polled on a heartbeat period (an instance that does not
// answer is marked unhealthy and gets no new placements until it answers
// again); the completion hook installs leases. A call whose instance turns
// out unreachable before anything was streamed is placed again elsewhere.
// A call no instance can take now (the router's overload: stale snapshots
// or failed admission) waits at the gateway and is routed again, the
// waiting calls in arrival order, on every wake of the heartbeat thread (at
// most 50 ms of wall time apart) and every heartbeat, up to
// overload_max_wait_s of emulated time; then it is rejected with 429 and
// the router's reason. A new call is routed at once, so it may be placed
// ahead of waiting ones (as in the simulator). A model no instance serves
// is rejected at once, as is every overload when overload_max_wait_s is 0.
//
// Links are in-process instances (`talaria serve`: each [[instance]] runs
// here on the sim engine, an emulation of the GPUs at `time_scale`) or
// instance servers over HTTP (`talaria gateway`, server/remote_instance.h).
//
// Thread safety: every method may be called from any thread; sinks run on
// link threads.
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "profile/profile.h"
#include "router/router.h"
#include "driver/session_client.h"
#include "server/call_prep.h"
#include "server/instance_link.h"
#include "server/service.h"
#include "config/cluster_config.h"

namespace talaria {

class Gateway final : public CompletionService {
 public:
  // Every [[instance]] of `cluster` runs in this process.
  Gateway(const ClusterConfig& cluster, const ProfileSet& profiles);
  // The instances run behind `links`, index-aligned with cluster.instances.
  Gateway(const ClusterConfig& cluster, const ProfileSet& profiles, std::vector<std::unique_ptr<InstanceLink>> links);
  ~Gateway() override;
  Gateway(const Gateway&) = delete;
  Gateway& operator=(const Gateway&) = delete;

  void Start();
  void Stop();

  // CompletionService.
  std::int64_t Submit(const CompletionRequest& request, const std::string& api_key,
                      std::shared_ptr<CompletionSink> sink) override;
  bool Cancel(std::int64_t id) override;
  std::vector<std::string> Models() const override { return catalog_.Models(); }
  // {"instances": [...]}: each instance's latest snapshot as the router
  // read it, plus "healthy" (whether its last heartbeat was answered).
  nlohmann::json Telemetry() override;
  bool RequiresApiKey() const override { return !serve_.api_keys.empty(); }
  bool ApiKeyAccepted(const std::string& key) const override { return KeyAccepted(serve_.api_keys, key); }
  ServerMetrics& metrics() override { return metrics_; }

  // One heartbeat now: polls every instance, then routes the waiting calls
  // again (also run by the heartbeat thread; tests call it to step the
  // control plane).
  void Heartbeat();
  // Routes the calls waiting at the gateway again, in arrival order: each
  // is placed, rejected (429) past its deadline, or left waiting.
  void RetryWaiting();
  // Calls waiting at the gateway now.
  std::size_t waiting() const { return metrics_.waiting.load(); }

 private:
  struct Call;
  class Relay;
  friend class Relay;

  struct Waiting {
    std::shared_ptr<Call> call;
    TimePoint deadline;
  };

  void HeartbeatLoop();
  // Routes and hands the call to a link; false when no instance took it
  // (its sink got the error). `retry`: a re-placement after an unreachable
  // instance. A new call the router cannot place now waits (true).
  bool Place(const std::shared_ptr<Call>& call, bool retry);
  // Asks the router for the call's instance; on success records the
  // placement (mu_ held).
  RouteDecision RouteLocked(const std::shared_ptr<Call>& call, TimePoint now);
  // Hands a placed call to its instance's link.
  void Dispatch(const std::shared_ptr<Call>& call, const RouteDecision& d, bool retry);
  // The 429 for a call no instance could take (`waited_s` > 0: after waiting).
  void Reject(Call& call, RouteDecision::Overload reason, double waited_s);
  void OnCallDone(const std::shared_ptr<Call>& call, const Usage& usage, const std::string& finish_reason);
  void OnCallError(const std::shared_ptr<Call>& call, const ApiError& error);
  TimePoint Now() const;

  ServeOptions serve_;
  std::shared_ptr<const SteadyClock> clock_;
  ModelCatalog catalog_;
  std::vector<std::unique_ptr<InstanceLink>> links_;
  double heartbeat_s_;
  double overload_max_wait_s_;

  std::mutex mu_;  // guards everything below up to metrics_
  Router router_;
  SessionContexts sessions_;
  std::unordered_map<std::int64_t, std::shared_ptr<Call>> live_;
  std::vector<std::optional<InstanceTelemetry>> last_;  // latest snapshot per instance
  std::vector<bool> healthy_;
  std::vector<bool> polling_;  // a poll is outstanding
  std::deque<Waiting> waiting_;  // overloaded calls, in arrival order
  std::int64_t next_id_ = 0;

  ServerMetrics metrics_;
  std::atomic<bool> stop_{false};
  std::thread heartbeat_;
};

}  // namespace talaria
