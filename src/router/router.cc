#include "router/router.h"

#include <algorithm>

#include "core/error.h"
#include "router/cluster_view.h"
#include "router/lease_book.h"
#include "router/placement_policy.h"
#include "router/session_table.h"

namespace talaria {

const char* ToString(RouterPolicy p) {
  switch (p) {
    case RouterPolicy::kFull: return "full";
    case RouterPolicy::kLeastPressure: return "least-pressure";
    case RouterPolicy::kSessionSticky: return "session-sticky";
    case RouterPolicy::kRoundRobin: return "round-robin";
    case RouterPolicy::kPrefixAware: return "prefix-aware";
  }
  return "?";
}

const char* ToString(RouteDecision::Overload o) {
  switch (o) {
    case RouteDecision::Overload::kNone: return "none";
    case RouteDecision::Overload::kNoInstance: return "no-instance";
    case RouteDecision::Overload::kStale: return "stale";
    case RouteDecision::Overload::kAdmission: return "admission";
  }
  return "?";
}

bool ParseRouterPolicy(std::string_view name, RouterPolicy& out) {
  for (RouterPolicy p : {RouterPolicy::kFull, RouterPolicy::kLeastPressure, RouterPolicy::kSessionSticky,
                         RouterPolicy::kRoundRobin, RouterPolicy::kPrefixAware}) {
    if (name == ToString(p)) {
      out = p;
      return true;
    }
  }
  return false;
}

struct Router::Impl {
  explicit Impl(RouterOptions options, const ProfileSet& profiles, const std::vector<std::string>& names,
                const std::vector<std::int32_t>& tps)
      : view(profiles, names, tps, options.lease_unit_s),
        leases(view),
        policy(MakePlacementPolicy(options.policy, leases)) {}

  ClusterView view;
  SessionTable sessions;
  LeaseBook leases;
  std::unique_ptr<PlacementPolicy> policy;
  // Other replicas' live leases charged to the view, [model][instance].
  std::vector<std::vector<std::int32_t>> shared_leases;
  // Adaptive leases: each model's sessions' return model, by model id.
  std::vector<ReturnModel> returns;

  ReturnModel& Returns(std::int32_t model) {
    if (static_cast<std::size_t>(model) >= returns.size()) returns.resize(static_cast<std::size_t>(model) + 1);
    return returns[static_cast<std::size_t>(model)];
  }

  // The session's entry, made most recently used (a new one may push out
  // idle or least recently used entries, their leases with them).
  SessionEntry& Entry(std::string_view session_id, TimePoint now, const RouterOptions& o) {
    return sessions.Route(session_id, now, o.session_table_size, o.session_table_idle_s,
                          [&](SessionEntry& dropped) { leases.Drop(dropped); });
  }
};

Router::Router(RouterOptions options, std::vector<std::string> instances, std::vector<std::int32_t> tps,
               const ProfileSet& profiles)
    : impl_(std::make_unique<Impl>(options, profiles, instances, tps)), options_(options) {}

Router::~Router() = default;

std::size_t Router::sessions() const { return impl_->sessions.size(); }

bool Router::EndSession(std::string_view session_id) {
  Impl& im = *impl_;
  return im.sessions.Erase(session_id, [&](SessionEntry& ended) { im.leases.Drop(ended); });
}

std::size_t Router::live_leases() const { return impl_->leases.live(); }

std::size_t Router::instances() const { return static_cast<std::size_t>(impl_->view.size()); }

bool Router::Healthy(std::int32_t instance) const { return impl_->view.status(instance).healthy; }

void Router::SetHealthy(std::int32_t instance, bool healthy) { impl_->view.SetHealthy(instance, healthy); }

bool Router::WantsFullSnapshot(std::int32_t instance) const { return impl_->view.WantsFullSnapshot(instance); }

void Router::OnTelemetry(std::int32_t instance, const InstanceTelemetry& snapshot, TimePoint now) {
  (void)now;
  switch (impl_->view.ApplySnapshot(instance, snapshot, options_)) {
    case ClusterView::SessionUpdate::kReplace:
      impl_->sessions.Reindex(instance, impl_->view, snapshot);
      break;
    case ClusterView::SessionUpdate::kApplyDelta:
      impl_->sessions.ApplyDelta(instance, impl_->view, snapshot);
      break;
    case ClusterView::SessionUpdate::kNone:
      break;
  }
}

double Router::LeaseSeconds(double expected_tool_s) const {
  const double tau = options_.lease_tau_s;
  if (expected_tool_s < 0 || tau <= 0) return tau;
  if (expected_tool_s > tau) return 0;
  return std::clamp(2 * expected_tool_s, kMinHintedLease * tau, tau);
}

Router::AdaptiveLease Router::AdaptiveLeaseFor(const GapDistribution& gaps) const {
  const double tau = options_.lease_tau_s;
  if (tau <= 0) return {};
  const double lease_s = std::min(tau, gaps.QuantileGivenReturn(kAdaptiveLeaseQuantile));
  const double use = gaps.Within(lease_s);
  if (use < kAdaptiveLeaseMinUse) return {};
  return {lease_s, use};
}

double Router::OnCompleted(std::string_view session_id, std::string_view model, std::int32_t instance,
                           std::int64_t kv_tokens, std::int64_t output_tokens, TimePoint now,
                           double expected_tool_s, bool session_end) {
  Impl& im = *impl_;
  const std::int32_t model_id = im.view.ModelId(model);
  im.view.ObserveOutput(model_id, output_tokens);
  SessionEntry* e = im.sessions.Find(session_id);
  if (e == nullptr) return 0;  // evicted from the table meanwhile
  if (session_end) {
    // Not a completion the return model counts: it answers for calls that
    // did not say they were the last.
    EndSession(session_id);
    return 0;
  }
  e->last_instance = instance;
  e->model = model_id;
  e->kv_tokens = kv_tokens;
  e->last_use = now;  // most recently used (the table reads last_use)
  e->last_done = now;
  if (!im.policy->InstallsLeases()) return 0;
  double lease_s = 0;
  double units = 1;
  GapDistribution lease_gaps;
  if (options_.lease == LeasePolicy::kAdaptive) {
    ReturnModel& returns = im.Returns(model_id);
    returns.ObserveCompletion();
    if (expected_tool_s >= 0) returns.ObserveHintedCompletion();
    e->return_pending = true;
    e->pending_hint_s = static_cast<float>(expected_tool_s);
    lease_gaps = expected_tool_s >= 0 ? returns.ForHint(expected_tool_s) : returns.For(e->gaps);
    const AdaptiveLease lease = AdaptiveLeaseFor(lease_gaps);
    lease_s = lease.seconds;
    units = lease.use;
  } else {
    lease_s = LeaseSeconds(expected_tool_s);
  }
  if (lease_s <= 0) {
    if (options_.lease_tau_s > 0) ++counters_.leases_declined;
    return 0;
  }
  // The successor lease: installed only here, never by routing.
  im.leases.Install(session_id, *e, instance, model_id, kv_tokens, now, now + FromSeconds(lease_s), units,
                    options_.lease == LeasePolicy::kAdaptive ? &lease_gaps : nullptr);
  ++counters_.leases_installed;
  return lease_s;
}

void Router::AdoptSession(std::string_view session_id, const SharedSession& shared, TimePoint now) {
  Impl& im = *impl_;
  if (shared.instance < 0 || shared.instance >= im.view.size()) return;
  SessionEntry& e = im.Entry(session_id, now, options_);
  const std::int32_t model = im.view.ModelId(shared.model);
  if (options_.lease == LeasePolicy::kAdaptive && shared.done > e.last_done && !e.return_pending) {
    // A completion another replica saw, with none of this router's own
    // awaiting its return: the next call's gap closes here. (One that
    // does await it stands for both: the gap is then measured from this
    // newer completion, and the completion counted once.)
    im.Returns(model).ObserveCompletion();
    e.return_pending = true;
    e.pending_hint_s = -1;
  }
  if (e.last_instance < 0 || shared.done >= e.last_done) {
    e.last_instance = shared.instance;
    if (e.first_instance < 0) e.first_instance = shared.instance;
    e.model = model;
    e.kv_tokens = shared.kv_tokens;
    e.last_done = shared.done;
    e.last_use = std::max(e.last_use, shared.done);
  }
  if (shared.lease && shared.lease_expires > now && im.policy->InstallsLeases()) {
    im.leases.Install(session_id, e, shared.instance, model, shared.kv_tokens, now, shared.lease_expires);
  } else {
    im.leases.Drop(e);
  }
}

void Router::SetSharedLeases(std::int32_t instance, std::string_view model_name, std::int32_t total) {
  Impl& im = *impl_;
  if (instance < 0 || instance >= im.view.size()) return;
  const std::int32_t model = im.view.ModelId(model_name);
  auto& per_model = im.shared_leases;
  if (per_model.size() <= static_cast<std::size_t>(model)) per_model.resize(static_cast<std::size_t>(model) + 1);
  auto& charged = per_model[static_cast<std::size_t>(model)];
  if (charged.empty()) charged.assign(static_cast<std::size_t>(im.view.size()), 0);
  std::int32_t& shared = charged[static_cast<std::size_t>(instance)];
  // The store's count includes this router's own live leases there.
  const std::int32_t own = im.view.Candidates(model)[static_cast<std::size_t>(instance)].live_leases - shared;
  const std::int32_t others = std::max(0, total - own);
  im.view.ChargeLease(instance, model, others - shared, others - shared);  // a unit each
  shared = others;
}

std::vector<Router::LeaseView> Router::LiveLeases(TimePoint now) const {
  std::vector<LeaseView> out;
  impl_->leases.ForEachOwner([&](std::string_view session) {
    const SessionEntry* e = impl_->sessions.Find(session);
    if (e == nullptr || e->lease.id == 0 || e->lease.expires <= now) return;
    out.push_back(LeaseView{session, e->lease.instance, impl_->view.ModelName(e->lease.model),
                            ToSeconds(e->lease.expires - now), e->lease.units});
  });
  return out;
}

std::int32_t Router::LeaseOf(std::string_view session_id, TimePoint now) const {
  const SessionEntry* e = impl_->sessions.Find(session_id);
  if (e == nullptr || e->lease.id == 0 || e->lease.expires <= now) return -1;
  return e->lease.instance;
}

RouteDecision Router::Route(const RouteRequest& r, TimePoint now) {
  Impl& im = *impl_;
  ++counters_.decisions;
  const std::int32_t model = im.view.ModelId(r.model);
  im.leases.ExpireDue(now, im.sessions, counters_);
  SessionEntry& entry = im.Entry(r.session_id, now, options_);
  entry.last_use = now;
  if (entry.return_pending && r.continuation) {  // the gap since its last completion closes here
    entry.return_pending = false;
    const double gap_s = std::max(0.0, ToSeconds(now - entry.last_done));
    ReturnModel& returns = im.Returns(entry.model);
    returns.ObserveReturn(entry.gaps, gap_s);
    if (entry.pending_hint_s >= 0) returns.ObserveHintedReturn(gap_s, entry.pending_hint_s);
  }
  const PlacementContext ctx{im.view, entry, r, model, im.view.OutputTokens(model, options_.output_tokens_estimate),
                             now, options_, counters_};
  const PolicyPick pick = im.policy->Place(ctx);
  RouteDecision d;
  if (pick.instance < 0) {  // the caller's overload policy
    ++counters_.overloads;
    d.overload = RouteDecision::Overload::kAdmission;
    if (!pick.fresh_candidate_seen) {
      const auto& cands = im.view.Candidates(model);
      const bool served = std::any_of(cands.begin(), cands.end(), [](const Candidate& c) { return c.serves; });
      d.overload = served ? RouteDecision::Overload::kStale : RouteDecision::Overload::kNoInstance;
    }
    return d;
  }
  d.instance = pick.instance;
  d.reason = pick.reason;
  d.lease_hit = pick.lease_hit;
  d.cost_s = pick.cost_s;
  d.opens_replica = pick.opens_replica;
  // The overlay counts the call's own work there until a snapshot shows it.
  double own_work_s = pick.own_work_s;
  if (own_work_s < 0) {
    std::int64_t tokens = 0;
    CachedState(im.view, pick.instance, entry, model, tokens);
    own_work_s = OwnWork(ctx, pick.instance, std::min(tokens, r.prefix_tokens));
  }
  im.view.AddForward(pick.instance, model, now, own_work_s);
  if (entry.first_instance < 0) entry.first_instance = pick.instance;
  entry.last_instance = pick.instance;
  entry.model = model;
  return d;
}

}  // namespace talaria
