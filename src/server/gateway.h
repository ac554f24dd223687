// The gateway: the router in front of the instances (paper §3.1, §4.1). It
// never touches tokens beyond naming them: it renders and byte-tokenizes the
// prompt to find the session's reusable prefix, asks the router for an
// instance, hands the call to that instance's link, and relays its output.
// The control plane (driver/control_plane.h, the same rules the simulator
// runs) polls telemetry on a heartbeat period (an instance that does not
// answer is marked unhealthy and gets no new placements until it answers
// again), keeps the bounded overload wait (a call no instance can take now
// waits at the gateway, routed again one heartbeat period after each
// failed try, up to overload_max_wait_s of emulated time, then 429 with the
// router's reason), and installs leases from the completion hook. A call
// whose instance turns out unreachable (or hung) before anything was
// streamed is placed again elsewhere; one whose instance died after taking
// it fails with 502 instance_failed and is never placed again, so a request
// that kills instances kills at most one. Heartbeats and retries run on a Timer: in
// production an Asio timer thread in emulated time (time_scale), in tests
// a manual clock the test advances.
//
// Replicas: with `[serve] state` (a Redis URL) the session table, leases
// and live-lease counts are shared with the other gateways on the same store
// (server/shared_sessions.h): before a session's call is routed its record
// is taken from the store (its lease with it), after a completion the record
// and lease are written, and each heartbeat reads the live-lease counts.
//
// Links are in-process instances (`talaria serve`: each [[instance]] runs
// here on the sim engine, an emulation of the GPUs at `time_scale`) or
// instance servers over HTTP (`talaria gateway`, server/remote_instance.h).
//
// Thread safety: every method may be called from any thread; sinks run on
// link threads.
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "config/cluster_config.h"
#include "core/clock.h"
#include "driver/control_plane.h"
#include "driver/session_client.h"
#include "driver/timer.h"
#include "profile/profile.h"
#include "server/call_prep.h"
#include "server/instance_link.h"
#include "server/service.h"
#include "server/shared_sessions.h"

namespace talaria {

class Gateway final : public CompletionService {
 public:
  // Every [[instance]] of `cluster` runs in this process.
  Gateway(const ClusterConfig& cluster, const ProfileSet& profiles);
  // The instances run behind `links`, index-aligned with cluster.instances;
  // the gateway's time is emulated seconds (the steady clock times
  // serve.time_scale) and its timer an Asio thread.
  Gateway(const ClusterConfig& cluster, const ProfileSet& profiles, std::vector<std::unique_ptr<InstanceLink>> links);
  // The same on the given clock and timer (tests: a ManualClock and its
  // ManualTimer, so heartbeats and retries happen when the test advances
  // time). Both must outlive the gateway.
  Gateway(const ClusterConfig& cluster, const ProfileSet& profiles, std::vector<std::unique_ptr<InstanceLink>> links,
          const Clock& clock, Timer& timer);
  ~Gateway() override;
  Gateway(const Gateway&) = delete;
  Gateway& operator=(const Gateway&) = delete;

  // Shares session state through `store` instead of the one `[serve]
  // state` names (tests: an in-process store), its operations on `threads`
  // worker threads (0: on the calling thread). Before Start().
  void UseSessionStore(std::unique_ptr<SessionStore> store, std::size_t threads = 0);

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
  nlohmann::json Timeline(const std::vector<std::uint64_t>& after) override;
  std::size_t TimelineInstances() const override { return links_.size(); }
  bool RequiresApiKey() const override { return !serve_.api_keys.empty(); }
  bool ApiKeyAccepted(const std::string& key) const override { return KeyAccepted(accepted_keys_, key); }
  bool IsOperator(const std::string& key) const override {
    return serve_.api_keys.empty() || key == OperatorKey(serve_);
  }
  ServerMetrics& metrics() override { return metrics_; }
  // The call metrics, the routing families (decision latency and outcome,
  // leases, telemetry age and health per instance) and every instance's
  // families from its latest snapshot (and, in-process, its counters).
  std::string RenderMetrics() override;

  // One heartbeat now: polls every instance (the timer also runs them,
  // every heartbeat_s; tests call it to step the control plane), and reads
  // the shared live-lease counts when state is shared.
  void Heartbeat();
  // Waits, at most `timeout` of wall time, until every telemetry poll sent
  // has been answered or has failed; false on the timeout.
  bool AwaitPolls(std::chrono::milliseconds timeout);
  // Calls waiting at the gateway now.
  std::size_t waiting() const { return metrics_.waiting.load(); }

  // The labels of talaria_route_decisions_total{outcome}.
  static constexpr const char* kRouteOutcomes[] = {"lease", "cost", "open", "baseline", "last_resort", "wait",
                                                   "overload"};

 private:
  struct Call;
  class Relay;
  friend class Relay;
  struct Owned;  // the production clock and timer

  Gateway(const ClusterConfig& cluster, const ProfileSet& profiles, std::vector<std::unique_ptr<InstanceLink>> links,
          std::unique_ptr<Owned> owned);
  void Poll(std::int32_t instance);
  // The shared store's live-lease counts into the router (and, while the
  // store is down, its probe and resync); `at` then again every heartbeat.
  void RefreshShared();
  void ScheduleRefresh(TimePoint at);
  // A session's shared record, read before its call is first routed: the
  // reusable prefix it proves (`proves_context`: the prompt starts with the
  // record's previous context) and the router's entry and lease (the lock held).
  void AdoptLocked(Call& call, const SessionRecord& record, bool proves_context, TimePoint now);
  // Routes the call and hands it to a link, or makes it wait (the timer
  // routes it again), or answers it with the error; false when no instance
  // took it and it does not wait. `retry`: a re-placement after an
  // unreachable instance (it never waits).
  bool Place(const std::shared_ptr<Call>& call, bool retry);
  // A waiting call's retry is due.
  void Retry(const std::shared_ptr<Call>& call);
  // Hands a placed call to its instance's link.
  void Dispatch(const std::shared_ptr<Call>& call, const RouteDecision& d, bool retry);
  // The 429 for a call no instance could take (`waited_s` > 0: after waiting).
  void Reject(Call& call, RouteDecision::Overload reason, double waited_s);
  void OnCallDone(const std::shared_ptr<Call>& call, const Usage& usage, const std::string& finish_reason);
  void OnCallError(const std::shared_ptr<Call>& call, const ApiError& error);
  TimePoint Now() const { return clock_.Now(); }

  ServeOptions serve_;
  std::vector<std::string> accepted_keys_;  // AcceptedKeys(serve_)
  std::unique_ptr<Owned> owned_;  // null when the clock and timer were given
  const Clock& clock_;
  Timer& timer_;
  ModelCatalog catalog_;
  std::vector<std::unique_ptr<InstanceLink>> links_;
  double heartbeat_s_;
  std::unordered_map<std::string, std::int32_t> instance_index_;  // instance name -> index
  std::unique_ptr<SharedSessions> shared_;  // never null; without a store it does nothing
  std::vector<LeaseCount> lease_pairs_;     // every (instance, model) served, for the counts
  std::vector<std::int32_t> lease_pair_instance_;  // index-aligned: the instance of each pair

  std::mutex mu_;  // guards everything below up to metrics_
  ControlPlane control_;
  SessionContexts sessions_;
  std::unordered_map<std::int64_t, std::shared_ptr<Call>> live_;
  std::unordered_map<std::int64_t, std::shared_ptr<Call>> waiting_;  // overloaded calls, by id
  std::unordered_map<std::int64_t, std::shared_ptr<Call>> taking_;   // reading their shared record, by id
  std::vector<std::optional<InstanceTelemetry>> last_;  // latest snapshot per instance
  std::vector<bool> polling_;  // a poll is outstanding
  std::condition_variable polled_;  // a poll answered
  std::int64_t next_id_ = 0;

  ServerMetrics metrics_;
  Histogram route_s_;           // wall seconds of one routing decision
  // Routing decisions by outcome (kRouteOutcomes): a fixed set, so counting
  // one on the routing path takes no lock and no lookup.
  std::array<std::atomic<std::uint64_t>, std::size(kRouteOutcomes)> decisions_{};
  std::atomic<bool> stop_{false};
};

}  // namespace talaria
