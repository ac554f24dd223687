// The session-aware router (DESIGN.md §3, paper §3.3, §4.1, Algorithm 1),
// and the baselines it is compared with, behind one interface.
//
// The full router keeps a session table. When a call completes it installs a
// soft reservation, a lease (session, model, instance, prefix tokens,
// t_exp = t_done + tau), which until it expires charges one admission unit
// to its model's next slot on that instance in the router's overlay (new
// calls for the model there count it ahead of them; every candidate there
// counts it in the round Eq.5 checks). A returning call with a live
// lease goes back to that instance if the instance is healthy and still holds
// the prefix on device or in host KV; otherwise the lease is discarded and the
// call is placed by cost: over instances with fresh telemetry, minimise
//   Cost = dR (own queue [+ wait for the model's next P phase on a cold
//             instance, unless session-prefill admits it] + prefill + decode)
//        + C_kv (0 / restore / recompute)
//        + C_act (0 / advertised switch / full open)          (Eq.1)
// keeping only candidates whose predicted round fits gamma * T_TTFT (Eq.5)
// and whose KV fits, and, where the model would need a new replica, only if
//   gain > T_swap + mu_j * dW_m + nu_m                        (Eq.2).
// No candidate: the overload policy (the caller waits, bounded, then rejects).
//
// Baselines share the session table, telemetry and overlay:
// least-pressure, session-sticky, round-robin and prefix-aware.
//
// Policy code: every call takes `now`; nothing reads a clock or does I/O.
// Not synchronized.
#pragma once

#include <cstdint>
#include <list>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/choices.h"
#include "core/return_model.h"
#include "core/time.h"
#include "telemetry/telemetry.h"
#include "profile/profile.h"

namespace talaria {

enum class RouterPolicy { kFull, kLeastPressure, kSessionSticky, kRoundRobin, kPrefixAware };
const char* ToString(RouterPolicy p);
bool ParseRouterPolicy(std::string_view name, RouterPolicy& out);

// How long a successor lease lasts (issue 18).
enum class LeasePolicy {
  kFixed,     // tau (the paper's), or sized from a tool-time hint
  kAdaptive,  // as long as the session's learned gaps say, charged by its chance of use
};
inline constexpr Choices<LeasePolicy, 2> kLeasePolicies{
    {{{"fixed", LeasePolicy::kFixed}, {"adaptive", LeasePolicy::kAdaptive}}}};
inline const char* ToString(LeasePolicy p) { return kLeasePolicies.Name(p); }

// What a live lease does for its session's return (issue 18).
enum class LeaseHonour {
  kRoute,  // the paper's Algorithm 1: the return goes to the lease's instance
  kRank,   // the lease reserved admission there: cost placement decides, Eq.5 waived at that instance
};
inline constexpr Choices<LeaseHonour, 2> kLeaseHonours{
    {{{"route", LeaseHonour::kRoute}, {"rank", LeaseHonour::kRank}}}};
inline const char* ToString(LeaseHonour h) { return kLeaseHonours.Name(h); }

struct RouterOptions {
  RouterPolicy policy = RouterPolicy::kFull;
  double lease_tau_s = 1.0;            // §3.3: tau = 1 s, near the p90 tool gap
  // kAdaptive: the router learns each session's gaps (completion to next
  // call, core/return_model.h, shrunk to its model's) and after a
  // completion leases the slot until the time by which 95% of the returns
  // that come have come (tau at most: the paper sizes tau near a high
  // quantile of the tool gaps, §3.3), charging Eq.5 admission only what
  // the lease is likely to use: P(return within it) units, not one,
  // lowered as it ages unused (LeaseBook). A lease less likely than 1 in 4
  // to be used is not installed. A tool-time hint goes through the same
  // model (ForHint).
  LeasePolicy lease = LeasePolicy::kFixed;
  // Off (the paper's Algorithm 1): a live lease with its prefix held is
  // honoured. On: not where honouring it would open the lease's model for
  // this call alone (closed there, no work of its own there) and close a
  // model with work (ModelTelemetry::forced_reopen_s): that is a new
  // replica, so cost placement decides it under Eq.2 (full_router_policy.h).
  bool lease_replica_check = false;
  // kRoute (the paper's Algorithm 1): a live lease whose instance still
  // holds the prefix takes the return there. kRank (the default since
  // 2026-12-06, docs/policy-matrix.md "Ninth stop"): the lease is an
  // admission reservation, not a route: the return is placed by cost
  // (Eq.1), with Eq.5 waived at the lease's instance (the unit the lease
  // held there was this return's), so it stays where its prefix is unless
  // Eq.1 finds a cheaper place, such as an instance whose slot of the
  // model is open while the lease's has rotated away.
  LeaseHonour lease_honour = LeaseHonour::kRank;
  // Eq.5 round admission and the KV check filter candidates; off, the router
  // ranks every fresh candidate and never invokes the overload policy.
  bool admission_control = true;
  double lease_unit_s = 0.5;           // assumption: one admission unit, in seconds of slot budget
  // Count a cold instance's wait for the model's next prefill phase
  // (ModelTelemetry::admit_wait_s) in dR, except for a continuation that
  // session-prefill admits mid-slot; off, dR holds only queued work.
  bool slot_wait = true;
  double stale_after_s = 1.0;          // assumption: a snapshot older than this is stale
  double replica_penalty_s = 2.0;      // nu_m of Eq.2 (assumption)
  double hbm_price_s_per_gib = 0.05;   // base of mu_j of Eq.2 (assumption)
  double prefix_imbalance = 1.5;       // prefix-aware: give up the prefix above this load ratio
  double prefix_imbalance_floor_s = 2.0;  // ... and this much absolute extra load
  double output_tokens_estimate = 100;    // assumption: before any completion was seen
  // The session table's bounds (not config keys): entries idle this long
  // are dropped, and the least recently used beyond the size.
  std::size_t session_table_size = 1'000'000;
  double session_table_idle_s = 600;
};

struct RouteRequest {
  std::string_view session_id;
  std::string_view model;
  std::int64_t prompt_tokens = 0;
  std::int64_t prefix_tokens = 0;
  bool continuation = false;
  // A call that waited at the gateway as long as it may: rank every fresh
  // candidate without round admission (Eq.5) rather than reject it (the KV
  // check stays: a call its KV cannot fit is never placed there).
  bool last_resort = false;
};

struct RouteDecision {
  enum class Reason : std::uint8_t { kLease, kCost, kBaseline, kOverload };
  // Why no instance could take the call (only with kOverload).
  enum class Overload : std::uint8_t {
    kNone,
    kNoInstance,  // no instance serves the model
    kStale,       // instances serve it, but none has fresh telemetry and health
    kAdmission,   // fresh candidates all failed round admission, KV or Eq.2
  };
  std::int32_t instance = -1;  // -1: no feasible instance (overload)
  Reason reason = Reason::kOverload;
  Overload overload = Overload::kNone;
  bool lease_hit = false;
  double cost_s = 0;
  // kCost: the instance does not hold the model open; placing there opens
  // a new replica, which Eq.2 admitted.
  bool opens_replica = false;
};
const char* ToString(RouteDecision::Overload o);

// What another gateway replica recorded for a session, as the shared
// session store (server/session_store.h) returned it: the session's last
// completion and, when one was live, the successor lease this replica has
// just taken from the store (it is now this router's to consume).
struct SharedSession {
  std::int32_t instance = -1;  // where the last call completed
  std::string_view model;
  std::int64_t kv_tokens = 0;
  TimePoint done;  // that completion, on this router's timeline
  bool lease = false;
  TimePoint lease_expires;
};

struct RouterCounters {
  std::int64_t decisions = 0;
  std::int64_t leases_installed = 0;
  std::int64_t leases_consumed = 0;
  std::int64_t leases_expired = 0;    // found expired on the return
  std::int64_t leases_discarded = 0;  // live, but unhealthy instance, lost prefix, or (kRank) placed elsewhere
  std::int64_t leases_declined = 0;   // not installed: a hint, or (adaptive) the return model, put the return past tau
  std::int64_t overloads = 0;
  std::int64_t stale_exclusions = 0;
};

class Router {
 public:
  // `instances` and `tps` name the instances in index order. `profiles`
  // must outlive the router.
  Router(RouterOptions options, std::vector<std::string> instances, std::vector<std::int32_t> tps,
         const ProfileSet& profiles);
  ~Router();
  Router(const Router&) = delete;
  Router& operator=(const Router&) = delete;

  // A heartbeat's snapshot. Replaces the previous one; the overlay keeps
  // only what happened after it was taken. Nothing of `snapshot` is kept by
  // reference: a caller may reuse one buffer for every heartbeat.
  void OnTelemetry(std::int32_t instance, const InstanceTelemetry& snapshot, TimePoint now);
  // Whether the instance's next snapshot must list all its sessions (none
  // received yet, or a delta arrived that did not follow the last one);
  // otherwise a delta snapshot (InstanceTelemetry::sessions_delta) will do.
  bool WantsFullSnapshot(std::int32_t instance) const;
  // The result of a health check.
  void SetHealthy(std::int32_t instance, bool healthy);

  RouteDecision Route(const RouteRequest& request, TimePoint now);

  // The completion hook: updates the session table from the response's
  // usage and (full router, tau > 0) installs the successor lease.
  // The successor lease's length after a completion whose call hinted
  // `expected_tool_s` (< 0: no hint): tau without a hint; with one, no
  // lease when the hinted return falls past tau (it could not use it:
  // the admission unit it holds goes to others), else twice the hint,
  // within [kMinHintedLease x tau, tau]. Never longer than tau, so a
  // hostile hint costs nobody more than a plain lease (issue 18).
  static constexpr double kMinHintedLease = 0.1;
  double LeaseSeconds(double expected_tool_s) const;
  // LeasePolicy::kAdaptive's lease for a session whose next gap follows
  // `gaps`: long enough to catch kAdaptiveLeaseQuantile of the returns that
  // come (never past tau), holding as many admission units as it is likely
  // to use (the chance the return comes within it), and none at all when
  // that chance is under kAdaptiveLeaseMinUse.
  static constexpr double kAdaptiveLeaseQuantile = 0.95;
  static constexpr double kAdaptiveLeaseMinUse = 0.25;
  struct AdaptiveLease {
    double seconds = 0;  // 0: declined
    double use = 0;      // P(the return comes within it): the units it holds
  };
  AdaptiveLease AdaptiveLeaseFor(const GapDistribution& gaps) const;
  // Returns the successor lease's length, seconds (0: none installed).
  // `session_end`: the call said it was its session's last (an agent hint):
  // the session's entry goes as by EndSession, and no lease is installed.
  double OnCompleted(std::string_view session_id, std::string_view model, std::int32_t instance,
                   std::int64_t kv_tokens, std::int64_t output_tokens, TimePoint now,
                   double expected_tool_s = -1, bool session_end = false);

  // The client said the session has ended (an agent hint): its entry and
  // its lease go now, so the lease charges no slot for a return that will
  // not come. False when the session is unknown.
  bool EndSession(std::string_view session_id);

  // --- Shared state (gateway replicas; docs/serving.md "Gateway replicas").
  // Before a session's call is routed, what the shared store holds for it:
  // a record newer than this router's entry replaces the entry's last
  // instance, model and KV length. The store is authoritative for the lease:
  // its lease replaces a local one, and without one a local lease is dropped
  // (another replica consumed it, or it expired), so no lease is honoured
  // twice. Unknown instances are ignored.
  void AdoptSession(std::string_view session_id, const SharedSession& shared, TimePoint now);
  // The live leases all replicas hold on (instance, model), as the shared
  // store counts them: those beyond this router's own are charged to the
  // model's next slot there too (Eq.5), until the next count.
  void SetSharedLeases(std::int32_t instance, std::string_view model, std::int32_t total);

  const RouterCounters& counters() const { return counters_; }
  const RouterOptions& options() const { return options_; }
  std::size_t sessions() const;
  std::size_t instances() const;
  // Leases not yet consumed, discarded or swept as expired (LeaseBook::live).
  std::size_t live_leases() const;
  // The last health check's result (healthy until told otherwise).
  bool Healthy(std::int32_t instance) const;
  // A live lease as an operator sees it (the dashboard, GET /v1/telemetry).
  struct LeaseView {
    std::string_view session_id;
    std::int32_t instance;
    std::string_view model;
    double remaining_s;
    double units;  // the admission units it holds (Lease::units)
  };
  // Every lease live at `now` (not yet swept ones that expired are left
  // out), in no order. Cost: one table lookup per live lease.
  std::vector<LeaseView> LiveLeases(TimePoint now) const;
  // The instance a session's live lease points at, or -1 (for tests).
  std::int32_t LeaseOf(std::string_view session_id, TimePoint now) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  RouterOptions options_;
  RouterCounters counters_;
};

}  // namespace talaria
