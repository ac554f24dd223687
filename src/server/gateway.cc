#include "server/gateway.h"

#include <algorithm>
#include <chrono>
#include <cstdio>

#include "core/error.h"
#include "server/asio_timer.h"
#include "server/telemetry_json.h"

namespace talaria {
namespace {

std::vector<std::unique_ptr<InstanceLink>> LocalLinks(const ClusterConfig& cluster, const ProfileSet& profiles) {
  std::vector<std::unique_ptr<InstanceLink>> links;
  for (const auto& ic : cluster.instances) {
    links.push_back(std::make_unique<LocalInstanceLink>(std::make_unique<InstanceService>(ic, profiles, cluster.serve)));
  }
  return links;
}

// Session state shared through `store` (none: in this process), with the
// leases the router installs (the full router's tau; baselines install none).
std::unique_ptr<SharedSessions> MakeShared(std::unique_ptr<SessionStore> store, const RouterOptions& o,
                                           std::size_t threads) {
  return std::make_unique<SharedSessions>(std::move(store), o.policy == RouterPolicy::kFull ? o.lease_tau_s : 0,
                                          o.session_table_idle_s, threads);
}

// The decisions metric's outcomes: an index into Gateway::decisions_ and
// Gateway::kRouteOutcomes (their labels).
enum Outcome : std::size_t { kLease, kCost, kOpen, kBaseline, kLastResort, kWait, kOverload };
static_assert(std::size(Gateway::kRouteOutcomes) == kOverload + 1, "one label per outcome");

// A placement's outcome: its index in Gateway::kRouteOutcomes.
std::size_t DecisionOutcome(const ControlPlane::Placement& p) {
  switch (p.outcome) {
    case ControlPlane::Placement::Outcome::kWait: return kWait;
    case ControlPlane::Placement::Outcome::kRejected: return kOverload;
    case ControlPlane::Placement::Outcome::kPlaced: break;
  }
  if (p.last_resort) return kLastResort;
  switch (p.decision.reason) {
    case RouteDecision::Reason::kLease: return kLease;
    case RouteDecision::Reason::kCost: return p.decision.opens_replica ? kOpen : kCost;
    case RouteDecision::Reason::kBaseline: return kBaseline;
    case RouteDecision::Reason::kOverload: break;
  }
  return kOverload;
}

}  // namespace

// The production clock (emulated seconds: the steady clock times the time
// scale) and the Asio timer that fires on it.
struct Gateway::Owned {
  std::shared_ptr<const Clock> clock;
  AsioTimer timer;
  explicit Owned(double time_scale)
      : clock(std::make_shared<const ScaledClock>(std::make_shared<const SteadyClock>(), time_scale)),
        timer(clock, time_scale) {}
};

// One client call: what every placement of it shares.
struct Gateway::Call {
  std::int64_t id = 0;
  std::shared_ptr<const LinkCall> link;
  std::shared_ptr<CompletionSink> sink;  // the client's
  SessionContexts::Match match;
  std::int32_t instance = -1;  // current placement; guarded by Gateway::mu_
  std::size_t attempts = 0;    // guarded by Gateway::mu_
  bool waited = false;         // has waited at the gateway; guarded by Gateway::mu_
  TimePoint submitted;
  // Written by the placement's link thread only (one placement at a time).
  std::atomic<bool> streamed{false};
  TimePoint first_token = TimePoint::max();
  std::string output_text;
  std::atomic<bool> ended{false};  // completed, failed or cancelled: set once
};

// Relays one placement's output to the client's sink.
class Gateway::Relay final : public CompletionSink {
 public:
  Relay(Gateway& gateway, std::shared_ptr<Call> call) : gateway_(gateway), call_(std::move(call)) {}
  void OnDelta(const std::string& text) override {
    if (call_->ended) return;
    if (!call_->streamed) {
      call_->first_token = gateway_.Now();
      call_->streamed = true;
    }
    call_->output_text += text;
    call_->sink->OnDelta(text);
  }
  void OnDone(const Usage& usage, const std::string& finish_reason) override {
    gateway_.OnCallDone(call_, usage, finish_reason);
  }
  void OnError(const ApiError& error) override { gateway_.OnCallError(call_, error); }

 private:
  Gateway& gateway_;
  std::shared_ptr<Call> call_;
};

Gateway::Gateway(const ClusterConfig& cluster, const ProfileSet& profiles)
    : Gateway(cluster, profiles, LocalLinks(cluster, profiles)) {
  for (auto& link : links_) {
    static_cast<LocalInstanceLink&>(*link).service().SetSwitchObserver(
        [this](const SwitchRecord& r) { metrics_.switches.Add(ToString(r.path)); });
  }
}

Gateway::Gateway(const ClusterConfig& cluster, const ProfileSet& profiles,
                 std::vector<std::unique_ptr<InstanceLink>> links)
    : Gateway(cluster, profiles, std::move(links), [&] {
        if (!(cluster.serve.time_scale > 0)) throw InputError("serve.time_scale", "must be greater than 0");
        return std::make_unique<Owned>(cluster.serve.time_scale);
      }()) {}

Gateway::Gateway(const ClusterConfig& cluster, const ProfileSet& profiles,
                 std::vector<std::unique_ptr<InstanceLink>> links, std::unique_ptr<Owned> owned)
    : Gateway(cluster, profiles, std::move(links), *owned->clock, owned->timer) {
  owned_ = std::move(owned);
}

Gateway::Gateway(const ClusterConfig& cluster, const ProfileSet& profiles,
                 std::vector<std::unique_ptr<InstanceLink>> links, const Clock& clock, Timer& timer)
    : serve_(cluster.serve),
      accepted_keys_(AcceptedKeys(cluster.serve)),
      clock_(clock),
      timer_(timer),
      catalog_(cluster.instances, profiles),
      links_(std::move(links)),
      heartbeat_s_(cluster.heartbeat_s),
      shared_(MakeShared(cluster.serve.state.empty()
                             ? nullptr
                             : MakeSessionStore(cluster.serve.state, cluster.serve.state_timeout_s,
                                                cluster.serve.time_scale, "--state / [serve] state"),
                         cluster.router, SharedSessions::kDefaultThreads)),
      control_(cluster, profiles),
      sessions_(100'000, serve_.session_idle_s, [this](Duration sct) { metrics_.session_s.Observe(ToSeconds(sct)); }),
      last_(cluster.instances.size()),
      polling_(cluster.instances.size(), false),
      route_s_({1e-6, 2e-6, 5e-6, 1e-5, 2e-5, 5e-5, 1e-4, 2e-4, 5e-4, 1e-3, 1e-2}) {
  if (cluster.instances.empty()) throw InputError(cluster.source, "no instances to serve");
  TALARIA_CHECK(links_.size() == cluster.instances.size(), "one link per instance");
  for (std::size_t i = 0; i < cluster.instances.size(); ++i) {
    instance_index_.emplace(cluster.instances[i].name, static_cast<std::int32_t>(i));
    for (const auto& model : cluster.instances[i].models) {
      lease_pairs_.push_back(LeaseCount{cluster.instances[i].name, model, 0});
      lease_pair_instance_.push_back(static_cast<std::int32_t>(i));
    }
  }
}

void Gateway::UseSessionStore(std::unique_ptr<SessionStore> store, std::size_t threads) {
  shared_ = MakeShared(std::move(store), control_.router().options(), threads);
}

void Gateway::RefreshShared() {
  if (!shared_->enabled()) return;
  std::vector<LeaseCount> counts = lease_pairs_;
  if (!shared_->Refresh(counts, Now())) return;
  std::lock_guard<std::mutex> lock(mu_);
  for (std::size_t k = 0; k < counts.size(); ++k) {
    control_.SetSharedLeases(lease_pair_instance_[k], counts[k].model, counts[k].live);
  }
}

void Gateway::ScheduleRefresh(TimePoint at) {
  timer_.At(at, [this, at] {
    if (stop_) return;
    RefreshShared();
    ScheduleRefresh(at + FromSeconds(heartbeat_s_));
  });
}

void Gateway::AdoptLocked(Call& call, const SessionRecord& record, bool proves_context, TimePoint now) {
  const auto known = instance_index_.find(record.instance);
  if (known == instance_index_.end()) return;  // another configuration's instance: local state only
  const std::int32_t instance = known->second;
  SessionContexts::Match& m = call.match;
  m.continuation = true;
  // The record's whole previous context starts the prompt (the agent
  // case): that prefix is reusable, unless the local match is longer.
  if (proves_context && record.context_tokens > m.prefix_tokens) {
    m.prefix_tokens = record.context_tokens;
    m.full_reuse = true;
  }
  SharedSession s;
  s.instance = instance;
  s.model = record.model;
  s.kv_tokens = record.kv_tokens;
  s.done = now - FromSeconds(record.done_age_s);
  s.lease = record.lease;
  s.lease_expires = now + FromSeconds(record.lease_left_s);
  control_.AdoptSession(call.link->scoped_session, s, now);
}

Gateway::~Gateway() { Stop(); }

void Gateway::Start() {
  for (auto& link : links_) link->Start();
  if (owned_) owned_->timer.Start();
  // The first heartbeat now (the control plane's beats touch no routing
  // state: Poll locks), the next ones on the timer.
  control_.StartHeartbeat(
      timer_, Now(), [this](std::int32_t i) { Poll(i); }, [this] { return !stop_; });
  if (shared_->enabled()) {
    RefreshShared();
    ScheduleRefresh(Now() + FromSeconds(heartbeat_s_));
  }
  // Serve once the router has snapshots: wait (bounded) for the first
  // answers; in-process links answer at once.
  AwaitPolls(std::chrono::seconds(3));
}

bool Gateway::AwaitPolls(std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  return polled_.wait_for(lock, timeout,
                          [&] { return std::none_of(polling_.begin(), polling_.end(), [](bool p) { return p; }); });
}

void Gateway::Stop() {
  stop_ = true;
  if (owned_) owned_->timer.Stop();
  // Calls still waiting (or reading their shared record) get an answer:
  // nothing is dropped silently.
  std::unordered_map<std::int64_t, std::shared_ptr<Call>> waiting;
  {
    std::lock_guard<std::mutex> lock(mu_);
    waiting.swap(waiting_);
    waiting.merge(taking_);
    taking_.clear();
    metrics_.waiting = 0;
  }
  for (const auto& [id, call] : waiting) {
    if (call->ended.exchange(true)) continue;
    ApiError e;
    e.status = 503;
    e.type = "server_error";
    e.code = "shutting_down";
    e.message = "the gateway stopped while the call waited for an instance";
    call->sink->OnError(e);
  }
  // Completions still writing their records finish (and answer) first.
  shared_->Stop();
  for (auto& link : links_) link->Stop();
}

void Gateway::Heartbeat() {
  for (std::size_t i = 0; i < links_.size(); ++i) Poll(static_cast<std::int32_t>(i));
  RefreshShared();
}

void Gateway::Poll(std::int32_t instance) {
  const auto i = static_cast<std::size_t>(instance);
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (polling_[i]) return;  // the previous poll has not answered yet
    polling_[i] = true;
  }
  const TimePoint sent = Now();
  links_[i]->PollTelemetry([this, instance, i, sent](std::optional<InstanceTelemetry> t) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      polling_[i] = false;
      if (t) {
        // The instance's clock is its own: the snapshot counts as taken when
        // it was asked for, so the overlay keeps everything placed since.
        t->taken_at = sent;
        last_[i] = *t;
        control_.OnTelemetry(instance, *t, Now());
      } else {
        control_.OnUnreachable(instance);
      }
    }
    polled_.notify_all();
  });
}

nlohmann::json Gateway::Telemetry() {
  nlohmann::json instances = nlohmann::json::array();
  std::lock_guard<std::mutex> lock(mu_);
  for (std::size_t i = 0; i < links_.size(); ++i) {
    nlohmann::json t = last_[i] ? TelemetryToJson(*last_[i]) : nlohmann::json{{"instance", links_[i]->name()}};
    t["healthy"] = control_.healthy(static_cast<std::int32_t>(i));
    instances.push_back(std::move(t));
  }
  // Live leases by (scoped) session id, filtered per key like "sessions".
  const TimePoint now = Now();
  nlohmann::json leases = nlohmann::json::object();
  for (const Router::LeaseView& l : control_.router().LiveLeases(now)) {
    leases[std::string(l.session_id)] = {{"instance", links_[static_cast<std::size_t>(l.instance)]->name()},
                                         {"model", l.model},
                                         {"remaining_s", l.remaining_s},
                                         {"units", l.units}};
  }
  return nlohmann::json{{"now_s", ToSeconds(now)}, {"instances", std::move(instances)}, {"leases", std::move(leases)}};
}

nlohmann::json Gateway::Timeline(const std::vector<std::uint64_t>& after) {
  nlohmann::json instances = nlohmann::json::array();
  for (std::size_t i = 0; i < links_.size(); ++i) instances.push_back(links_[i]->Timeline(i < after.size() ? after[i] : 0));
  return nlohmann::json{{"instances", std::move(instances)}};
}

bool Gateway::Cancel(std::int64_t id) {
  std::shared_ptr<Call> call;
  std::int32_t instance = -1;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = live_.find(id);
    if (it == live_.end()) {
      // Reading its shared record, or waiting at the gateway: never
      // accepted, so not counted failed.
      if (auto t = taking_.find(id); t != taking_.end()) {
        if (t->second->ended.exchange(true)) return false;
        taking_.erase(t);
        return true;
      }
      auto w = waiting_.find(id);
      if (w == waiting_.end() || w->second->ended.exchange(true)) return false;
      waiting_.erase(w);
      metrics_.waiting = waiting_.size();
      return true;
    }
    call = it->second;
    instance = call->instance;
    live_.erase(it);
  }
  if (call->ended.exchange(true)) return false;
  links_[static_cast<std::size_t>(instance)]->Cancel(id);
  ++metrics_.failed;
  return true;
}

std::int64_t Gateway::Submit(const CompletionRequest& request, const std::string& api_key,
                             std::shared_ptr<CompletionSink> sink) {
  auto prompt = catalog_.PromptTokens(request);
  if (auto* e = std::get_if<ApiError>(&prompt)) {
    sink->OnError(*e);
    return -1;
  }
  auto link = std::make_shared<LinkCall>();
  link->model = request.model;
  link->prompt = std::move(std::get<std::vector<std::int32_t>>(prompt));
  link->max_tokens = request.max_tokens;
  link->stream = request.stream;
  link->session_id = request.session_id;
  link->session_end = request.session_end;
  link->expected_tool_s = request.expected_tool_s;
  link->api_key = api_key;
  link->scoped_session = ScopedSessionId(api_key, request.session_id);
  auto call = std::make_shared<Call>();
  call->sink = std::move(sink);
  call->submitted = Now();
  call->link = link;
  const bool share = !link->scoped_session.empty() && shared_->enabled();
  {
    std::lock_guard<std::mutex> lock(mu_);
    call->id = link->id = next_id_++;
    if (link->scoped_session.empty()) link->scoped_session = "call-" + std::to_string(call->id);
    call->match = sessions_.Find(link->scoped_session, link->prompt);
    if (share) taking_[call->id] = call;
  }
  if (!share) return Place(call, /*retry=*/false) ? call->id : -1;
  // Replicas: the session's shared record, its lease taken (one round trip,
  // off this thread), then the placement.
  const std::int64_t id = call->id;
  shared_->TakeAsync(link->scoped_session, [this, call](std::optional<SessionRecord> record) {
    // The fingerprint check hashes up to the whole prompt: before the lock.
    const std::vector<std::int32_t>& prompt = call->link->prompt;
    const bool proves = record && record->context_tokens <= static_cast<std::int64_t>(prompt.size()) &&
                        ContextFingerprint(std::span(prompt).first(static_cast<std::size_t>(
                            std::max<std::int64_t>(0, record->context_tokens)))) == record->context_hash;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (taking_.erase(call->id) == 0) return;  // cancelled, or answered by Stop()
      if (record) AdoptLocked(*call, *record, proves, Now());
    }
    Place(call, /*retry=*/false);
  });
  return id;
}

bool Gateway::Place(const std::shared_ptr<Call>& call, bool retry) {
  const LinkCall& c = *call->link;
  RouteRequest route;
  route.session_id = c.scoped_session;
  route.model = c.model;
  route.prompt_tokens = static_cast<std::int64_t>(c.prompt.size());
  route.prefix_tokens = call->match.prefix_tokens;
  route.continuation = call->match.continuation;
  ControlPlane::Placement p;
  {
    std::lock_guard<std::mutex> lock(mu_);
    const TimePoint now = Now();
    // The wait counts from the first try that had to wait; a re-placement was
    // accepted already and never waits. Stopping, a call is rejected at once
    // (Stop() has answered the waiting).
    const TimePoint arrived = call->waited && !retry ? call->submitted : now;
    const auto decision_start = std::chrono::steady_clock::now();
    p = control_.Place(route, arrived, now, /*may_wait=*/!retry && !stop_);
    route_s_.Observe(std::chrono::duration<double>(std::chrono::steady_clock::now() - decision_start).count());
    decisions_[DecisionOutcome(p)].fetch_add(1, std::memory_order_relaxed);
    if (p.outcome == ControlPlane::Placement::Outcome::kPlaced) {
      call->instance = p.decision.instance;
      ++call->attempts;
      live_[call->id] = call;
    } else if (p.outcome == ControlPlane::Placement::Outcome::kWait) {
      waiting_[call->id] = call;
      if (!call->waited) ++metrics_.waited;
      call->waited = true;
      metrics_.waiting = waiting_.size();
    }
  }
  switch (p.outcome) {
    case ControlPlane::Placement::Outcome::kPlaced:
      Dispatch(call, p.decision, retry);
      return true;
    case ControlPlane::Placement::Outcome::kWait:
      timer_.At(p.retry_at, [this, call] { Retry(call); });
      return true;
    case ControlPlane::Placement::Outcome::kRejected:
      break;
  }
  if (call->ended.exchange(true)) return false;  // cancelled meanwhile
  if (retry) {  // accepted earlier, and now nowhere to go
    ++metrics_.failed;
    call->sink->OnError(UnreachableError("(any)", "its instance failed and no other instance can take the call"));
  } else {
    Reject(*call, p.decision.overload, p.waited_s);
  }
  return false;
}

void Gateway::Retry(const std::shared_ptr<Call>& call) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    // Gone from the wait: cancelled, or answered by Stop().
    if (waiting_.erase(call->id) == 0) return;
    metrics_.waiting = waiting_.size();
  }
  Place(call, /*retry=*/false);
}

void Gateway::Reject(Call& call, RouteDecision::Overload reason, double waited_s) {
  metrics_.rejected.Add(ToString(reason));
  ApiError e;
  e.status = 429;
  e.type = "rate_limit_error";
  e.code = "no_capacity";
  e.message = std::string("no instance can take this call now (") + ToString(reason) + ")";
  if (waited_s > 0) {
    char waited[64];
    std::snprintf(waited, sizeof waited, " after waiting %g s at the gateway", waited_s);
    e.message += waited;
  }
  e.message += "; retry later";
  call.sink->OnError(e);
}

void Gateway::Dispatch(const std::shared_ptr<Call>& call, const RouteDecision& d, bool retry) {
  if (retry) {
    ++metrics_.retries;
  } else {
    ++metrics_.accepted;
    if (call->match.continuation) ++(d.lease_hit ? metrics_.lease_hits : metrics_.lease_misses);
  }
  links_[static_cast<std::size_t>(d.instance)]->Submit(call->link, std::make_shared<Relay>(*this, call));
}

void Gateway::OnCallDone(const std::shared_ptr<Call>& call, const Usage& usage, const std::string& finish_reason) {
  if (call->ended.exchange(true)) return;  // cancelled meanwhile
  const TimePoint now = Now();
  const LinkCall& c = *call->link;
  SessionRecord record;
  double lease_s = 0;  // the successor lease the router installed (shared with the other replicas)
  {
    std::vector<std::int32_t> context = c.prompt;
    AppendByteTokens(context, call->output_text);
    const bool share = !c.session_id.empty() && shared_->enabled();
    if (share) {
      record.model = c.model;
      record.kv_tokens = static_cast<std::int64_t>(c.prompt.size()) + usage.completion_tokens;
      record.context_tokens = static_cast<std::int64_t>(context.size());
      record.context_hash = ContextFingerprint(context);
    }
    std::lock_guard<std::mutex> lock(mu_);
    if (share) record.instance = links_[static_cast<std::size_t>(call->instance)]->name();
    // A session the client said ends here gets no lease: none holds a slot
    // for a return that will not come (the hint costs only its own locality).
    lease_s = control_.OnCompleted(c.scoped_session, c.model, call->instance,
                                   static_cast<std::int64_t>(c.prompt.size()) + usage.completion_tokens,
                                   usage.completion_tokens, now, c.expected_tool_s, c.session_end);
    sessions_.Update(c.scoped_session, std::move(context), call->submitted, now);
    live_.erase(call->id);
  }
  auto answer = [this, call, usage, finish_reason, now] {
    ++metrics_.completed;
    metrics_.kv_source.Add(usage.kv_source.empty() ? "unknown" : usage.kv_source);
    const TimePoint first = call->streamed ? call->first_token : now;
    metrics_.ttft_s.Observe(ToSeconds(first - call->submitted));
    metrics_.call_s.Observe(ToSeconds(now - call->submitted));
    if (usage.completion_tokens > 1) {
      metrics_.tpot_s.Observe(ToSeconds(now - first) / static_cast<double>(usage.completion_tokens - 1));
    }
    call->sink->OnDone(usage, finish_reason);
  };
  // Shared before the client hears the answer, so its next call finds the
  // record and lease whichever replica it reaches.
  if (record.instance.empty()) {
    answer();
  } else if (c.session_end) {
    shared_->EndAsync(c.scoped_session, std::move(record), std::move(answer));
  } else {
    shared_->CompleteAsync(c.scoped_session, std::move(record), now, std::move(answer), lease_s);
  }
}

void Gateway::OnCallError(const std::shared_ptr<Call>& call, const ApiError& error) {
  if (error.code == kUnreachableCode && !call->streamed) {
    std::int32_t failed = -1;
    bool again = false;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (call->ended) return;
      failed = call->instance;
      // Stop placing on it until its next heartbeat is answered.
      control_.OnUnreachable(failed);
      live_.erase(call->id);
      again = control_.MayPlaceAgain(call->attempts);
    }
    metrics_.unreachable.Add(links_[static_cast<std::size_t>(failed)]->name());
    if (again) {
      Place(call, /*retry=*/true);
      return;
    }
  }
  if (call->ended.exchange(true)) return;
  std::int32_t died = -1;
  {
    std::lock_guard<std::mutex> lock(mu_);
    live_.erase(call->id);
    // The instance died serving this call: no new placements on it until a
    // heartbeat is answered; the call itself is not retried (its request
    // may be what killed it).
    if (error.code == kInstanceFailedCode) {
      died = call->instance;
      control_.OnUnreachable(died);
    }
  }
  if (died >= 0) metrics_.unreachable.Add(links_[static_cast<std::size_t>(died)]->name());
  ++metrics_.failed;
  call->sink->OnError(error);
}


}  // namespace talaria
