#include "router/router.h"

#include <algorithm>
#include <cmath>
#include <deque>
#include <limits>
#include <unordered_set>

#include <absl/container/flat_hash_map.h>

#include "core/error.h"
#include "core/strings.h"
#include "core/units.h"

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

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

struct Lease {
  std::int32_t instance = -1;
  std::int32_t model = -1;
  std::int64_t prefix_tokens = 0;
  TimePoint expires;
  TimePoint installed;
  std::uint64_t id = 0;  // 0: no lease
};

// Where a session's prefix is held, from the latest snapshots.
struct Location {
  std::int32_t instance;
  std::int32_t model;
  KvState state;
  std::int64_t tokens;
};

struct SessionEntry {
  std::int32_t last_instance = -1;
  std::int32_t first_instance = -1;  // session-sticky's pin
  std::int32_t model = -1;
  std::int64_t kv_tokens = 0;
  TimePoint last_use;
  TimePoint last_done;  // completion seen by the router (newer than a snapshot?)
  Lease lease;
  std::vector<Location> held;  // where snapshots say its prefix is
  std::list<std::string>::iterator lru;
};

struct OverlayEntry {
  TimePoint at;
  std::int32_t model;
  double work_s;
};

struct ProfileTerms {
  const ModelProfile* profile = nullptr;
  double extend_s = 0;     // prefill of the tokens past the reusable prefix
  double recompute_s = 0;  // prefill of the reusable prefix itself
  double decode_s = 0;     // the call's own decode, at batch 1
  double kv_bytes = 0;     // KV the call needs per rank (prompt + expected output)
};

// What the cost loop reads of an instance for every candidate, kept in one
// dense array (24 bytes an instance) apart from the rest of its state.
struct InstanceHot {
  TimePoint snapshot_at;
  double overlay_total_s = 0;
  std::int32_t live_leases = 0;
  bool has_snapshot = false;
  bool healthy = true;
};

struct InstanceState {
  std::uint64_t snapshot_version = 0;
  std::string name;
  std::int32_t tp = 0;
  std::vector<std::int32_t> model_of;           // snapshot model position -> catalogue id
  std::vector<const ModelProfile*> profile_of;  // catalogue id -> profile at this tp
  std::deque<OverlayEntry> overlay;             // forwarded since the snapshot
  double load_s = 0;  // queued work in the snapshot, all models
  // The sessions this instance's snapshots say it holds (their entries in
  // the session table name it); a full snapshot replaces them all.
  std::unordered_set<std::string, StringHash, std::equal_to<>> indexed_sessions;
  bool wants_full = true;  // the next snapshot must be a full one
};

// What the cost loop needs about one (model, instance) pair, laid out densely
// per model so a decision scans one array instead of chasing each instance's
// snapshot. Rebuilt from each snapshot (the request-independent terms are
// computed there); overlay_work_s follows the overlay.
struct Candidate {
  const ModelProfile* profile = nullptr;
  double queued_work_s = 0;
  double overlay_work_s = 0;
  double activation_s = 0;  // C_act: 0 active, switch when resident, open + switch otherwise
  double admit_wait_s = 0;  // until the model's next P phase, at the snapshot
  double prefill_scale = 1;  // measured / profiled, from the instance's rounds
  double decode_scale = 1;
  double round_estimate_s = 0;
  double round_bound_s = 0;
  double kv_total_bytes = 0;
  // Eq.2's right-hand side, T_swap + mu_j * dW_m + nu_m.
  double replica_threshold_s = 0;
  std::int32_t live_leases = 0;  // this model's on this instance: units held in its next slot
  bool serves = false;
  bool resident = false;
  bool active = false;
  bool session_prefill = false;  // continuations with a cached prefix enter mid-slot
};

// A candidate that would need a new replica of the model: Eq.2 decides it
// once the cheapest resident candidate is known.
struct ReplicaCandidate {
  std::int32_t instance;
  double cost_s;
  double cost_without_activation_s;
};

}  // namespace

struct Router::Impl {
  const ProfileSet& profiles;
  std::vector<InstanceState> instances;
  std::vector<InstanceHot> hot;  // [instance]
  std::unordered_map<std::string, std::int32_t, StringHash, std::equal_to<>> model_ids;
  std::vector<std::string> model_names;
  std::vector<double> output_estimate;  // per catalogue model, EWMA of completions
  std::vector<std::vector<Candidate>> by_model;  // [catalogue model][instance]
  // Open addressing (one probe of contiguous slots per lookup, the key and
  // entry inline): a decision looks its session up among ~100,000.
  absl::flat_hash_map<std::string, SessionEntry, StringHash, std::equal_to<>> sessions;
  std::list<std::string> lru;  // front = least recently used
  std::unordered_map<std::uint64_t, std::string> lease_owner;  // live lease id -> session
  std::deque<std::pair<TimePoint, std::uint64_t>> lease_expiry;  // FIFO: tau is constant

  std::uint64_t next_lease = 1;
  std::uint32_t round_robin = 0;
  // Scratch reused per decision (no allocation on the hot path).
  std::vector<ReplicaCandidate> replicas;  // fresh, admissible, not resident
  std::vector<std::int32_t> holders;       // instances holding the session's prefix
  std::vector<ProfileTerms> terms;  // per distinct profile, this decision

  // Profile-dependent cost terms of the current request, computed once per
  // profile per decision.
  const ProfileTerms& TermsFor(const ModelProfile* p, const RouteRequest& r, double output_tokens) {
    for (const auto& t : terms) {
      if (t.profile == p) return t;
    }
    ProfileTerms t;
    t.profile = p;
    t.extend_s = p->PrefillSeconds(r.prompt_tokens - r.prefix_tokens, r.prefix_tokens);
    t.recompute_s = r.prefix_tokens > 0 ? p->PrefillSeconds(r.prefix_tokens) : 0.0;
    t.decode_s = output_tokens * p->DecodeStepSeconds(1, r.prompt_tokens);
    t.kv_bytes = (static_cast<double>(r.prompt_tokens) + output_tokens) *
                 static_cast<double>(p->KvBytesPerTokenPerRank());
    terms.push_back(t);
    return terms.back();
  }

  explicit Impl(const ProfileSet& p) : profiles(p) {}

  std::int32_t ModelId(std::string_view name) {
    auto it = model_ids.find(name);
    if (it != model_ids.end()) return it->second;
    const auto id = static_cast<std::int32_t>(model_names.size());
    model_ids.emplace(std::string(name), id);
    model_names.emplace_back(name);
    output_estimate.push_back(-1);
    by_model.emplace_back(instances.size());
    for (std::size_t i = 0; i < instances.size(); ++i) {
      instances[i].profile_of.push_back(profiles.Find(model_names.back(), instances[i].tp));
      by_model.back()[i].profile = instances[i].profile_of.back();
    }
    return id;
  }

  // The catalogue id of the model at `position` in this instance's
  // snapshots: instances list the same models in the same order heartbeat
  // after heartbeat, so a name comparison usually replaces a lookup.
  std::int32_t SnapshotModel(InstanceState& inst, std::size_t position, const std::string& name) {
    if (position < inst.model_of.size()) {
      std::int32_t& id = inst.model_of[position];
      if (model_names[static_cast<std::size_t>(id)] != name) id = ModelId(name);
      return id;
    }
    inst.model_of.push_back(ModelId(name));
    return inst.model_of.back();
  }

  void Remap(std::int32_t index, InstanceState& inst, const InstanceTelemetry& t, const RouterOptions& options) {
    const auto i = static_cast<std::size_t>(index);
    for (auto& per_model : by_model) {
      per_model[i].serves = false;
      per_model[i].queued_work_s = 0;
    }
    inst.load_s = 0;
    const double total = static_cast<double>(t.kv_total_bytes);
    // mu_j of Eq.2 rises with KV use and falls with staging slack.
    const double kv_used_fraction = total > 0 ? 1.0 - static_cast<double>(t.kv_free_bytes) / total : 0.0;
    const double slack_fraction = total > 0 ? std::min(1.0, static_cast<double>(t.staging_slack_bytes) / total) : 1.0;
    const double mu = options.hbm_price_s_per_gib * (1.0 + kv_used_fraction) * (2.0 - slack_fraction);
    for (std::size_t position = 0; position < t.models.size(); ++position) {
      const ModelTelemetry& mt = t.models[position];
      const std::int32_t id = SnapshotModel(inst, position, mt.name);
      Candidate& c = by_model[static_cast<std::size_t>(id)][i];
      c.serves = true;
      c.queued_work_s = mt.queued_work_s;
      c.activation_s = mt.active ? 0.0 : mt.resident ? mt.switch_in_s : mt.full_open_s + mt.switch_in_s;
      c.admit_wait_s = mt.admit_wait_s;
      c.active = mt.active;
      c.session_prefill = t.session_prefill;
      c.round_estimate_s = t.round_estimate_s;
      c.round_bound_s = t.round_bound_s;
      c.kv_total_bytes = total;
      c.replica_threshold_s = mt.full_open_s + mu * ToGiB(mt.weight_bytes_per_rank) + options.replica_penalty_s;
      c.prefill_scale = mt.prefill_scale;
      c.decode_scale = mt.decode_scale;
      c.resident = mt.resident;
      inst.load_s += mt.queued_work_s;
    }
  }

  void ExpireLeases(TimePoint now, RouterCounters& counters) {
    while (!lease_expiry.empty() && lease_expiry.front().first <= now) {
      const std::uint64_t id = lease_expiry.front().second;
      lease_expiry.pop_front();
      auto owner = lease_owner.find(id);
      if (owner == lease_owner.end()) continue;  // consumed or discarded already
      auto s = sessions.find(owner->second);
      if (s != sessions.end() && s->second.lease.id == id) {
        ChargeLease(s->second.lease, -1);
        s->second.lease = Lease{};
      }
      lease_owner.erase(owner);
      ++counters.leases_expired;
    }
  }

  // The entry for a session, created (most recently used) if absent.
  SessionEntry& Entry(std::string_view id, TimePoint now) {
    auto it = sessions.find(id);
    if (it == sessions.end()) {
      it = sessions.emplace(std::string(id), SessionEntry{}).first;
      it->second.lru = lru.insert(lru.end(), it->first);
      it->second.last_use = now;
    }
    return it->second;
  }

  void Reindex(std::int32_t index, InstanceState& inst, const InstanceTelemetry& t) {
    for (const auto& id : inst.indexed_sessions) {
      auto it = sessions.find(id);
      if (it != sessions.end()) {
        std::erase_if(it->second.held, [&](const Location& l) { return l.instance == index; });
      }
    }
    inst.indexed_sessions.clear();
    for (const auto& [id, c] : t.sessions) {
      const std::int32_t model = ModelId(c.model);
      Entry(id, hot[static_cast<std::size_t>(index)].snapshot_at).held.push_back(Location{index, model, c.state, c.tokens});
      inst.indexed_sessions.insert(id);
    }
  }

  // Applies a delta snapshot's session changes on top of the index.
  void ApplyDelta(std::int32_t index, InstanceState& inst, const InstanceTelemetry& t) {
    for (const auto& [id, c] : t.sessions) {
      if (c.state == KvState::kMissing) {
        if (auto it = sessions.find(id); it != sessions.end()) {
          std::erase_if(it->second.held, [&](const Location& l) { return l.instance == index; });
        }
        inst.indexed_sessions.erase(id);
        continue;
      }
      const std::int32_t model = ModelId(c.model);
      std::vector<Location>& held = Entry(id, hot[static_cast<std::size_t>(index)].snapshot_at).held;
      auto l = std::find_if(held.begin(), held.end(), [&](const Location& x) { return x.instance == index; });
      if (l == held.end()) {
        held.push_back(Location{index, model, c.state, c.tokens});
        inst.indexed_sessions.insert(id);  // copies the id only if absent
      } else {
        *l = Location{index, model, c.state, c.tokens};
      }
    }
  }

  // A live lease holds one admission unit in its model's next slot on its
  // instance, and so lengthens that instance's round.
  void ChargeLease(const Lease& l, std::int32_t delta) {
    hot[static_cast<std::size_t>(l.instance)].live_leases += delta;
    by_model[static_cast<std::size_t>(l.model)][static_cast<std::size_t>(l.instance)].live_leases += delta;
  }

  void DropLease(SessionEntry& e) {
    if (e.lease.id == 0) return;
    if (lease_owner.erase(e.lease.id) > 0) ChargeLease(e.lease, -1);
    e.lease = Lease{};
  }

  bool Fresh(std::int32_t i, TimePoint now, double stale_after_s) const {
    const InstanceHot& h = hot[static_cast<std::size_t>(i)];
    return h.healthy && h.has_snapshot && ToSeconds(now - h.snapshot_at) <= stale_after_s;
  }

  // Where this instance holds the session's prefix for `model`, in tokens.
  KvState CachedState(std::int32_t index, const std::vector<Location>* locs, std::int32_t model,
                      const SessionEntry* entry, std::int64_t& tokens) const {
    tokens = 0;
    // Completions after the snapshot: the router knows the KV is on device there.
    if (entry != nullptr && entry->last_instance == index && entry->model == model &&
        entry->last_done > hot[static_cast<std::size_t>(index)].snapshot_at) {
      tokens = entry->kv_tokens;
      return KvState::kDevice;
    }
    if (locs == nullptr) return KvState::kMissing;
    for (const Location& l : *locs) {
      if (l.instance == index && l.model == model) {
        tokens = l.tokens;
        return l.state;
      }
    }
    return KvState::kMissing;
  }

  double Load(std::int32_t i, double unit_s) const {
    const InstanceHot& h = hot[static_cast<std::size_t>(i)];
    return instances[static_cast<std::size_t>(i)].load_s + h.overlay_total_s + h.live_leases * unit_s;
  }
};

Router::Router(RouterOptions options, std::vector<std::string> instances, std::vector<std::int32_t> tps,
               const ProfileSet& profiles)
    : impl_(std::make_unique<Impl>(profiles)), options_(options) {
  TALARIA_CHECK(instances.size() == tps.size(), "one tp per instance");
  for (std::size_t i = 0; i < instances.size(); ++i) {
    InstanceState s;
    s.name = instances[i];
    s.tp = tps[i];
    impl_->instances.push_back(std::move(s));
    impl_->hot.emplace_back();
  }
}

Router::~Router() = default;

std::size_t Router::sessions() const { return impl_->sessions.size(); }

void Router::SetHealthy(std::int32_t instance, bool healthy) {
  impl_->hot[static_cast<std::size_t>(instance)].healthy = healthy;
}

void Router::OnTelemetry(std::int32_t instance, const InstanceTelemetry& snapshot, TimePoint now) {
  InstanceState& inst = impl_->instances[static_cast<std::size_t>(instance)];
  InstanceHot& hot = impl_->hot[static_cast<std::size_t>(instance)];
  if (hot.has_snapshot && snapshot.version <= inst.snapshot_version) return;  // out of order
  // A delta applies only on top of the snapshot it was taken against; one
  // that does not (a lost snapshot) keeps the old session index and asks for
  // a full snapshot next.
  const bool delta_applies = snapshot.sessions_delta && !inst.wants_full && hot.has_snapshot &&
                             snapshot.sessions_base == inst.snapshot_version;
  inst.snapshot_version = snapshot.version;
  hot.snapshot_at = snapshot.taken_at;
  hot.has_snapshot = true;
  impl_->Remap(instance, inst, snapshot, options_);
  if (!snapshot.sessions_delta) {
    impl_->Reindex(instance, inst, snapshot);
    inst.wants_full = false;
  } else if (delta_applies) {
    impl_->ApplyDelta(instance, inst, snapshot);
  } else {
    inst.wants_full = true;
  }
  // The overlay keeps only forwards the snapshot could not have seen.
  const auto i = static_cast<std::size_t>(instance);
  while (!inst.overlay.empty() && inst.overlay.front().at <= hot.snapshot_at) {
    impl_->by_model[static_cast<std::size_t>(inst.overlay.front().model)][i].overlay_work_s -= inst.overlay.front().work_s;
    hot.overlay_total_s -= inst.overlay.front().work_s;
    inst.overlay.pop_front();
  }
  if (inst.overlay.empty()) {
    for (auto& per_model : impl_->by_model) per_model[i].overlay_work_s = 0;
    hot.overlay_total_s = 0;
  }
  (void)now;
}

void Router::OnCompleted(std::string_view session_id, std::string_view model, std::int32_t instance,
                         std::int64_t kv_tokens, std::int64_t output_tokens, TimePoint now) {
  Impl& im = *impl_;
  const std::int32_t model_id = im.ModelId(model);
  double& estimate = im.output_estimate[static_cast<std::size_t>(model_id)];
  estimate = estimate < 0 ? static_cast<double>(output_tokens) : 0.9 * estimate + 0.1 * static_cast<double>(output_tokens);
  auto it = im.sessions.find(session_id);
  if (it == im.sessions.end()) return;  // evicted from the table meanwhile
  SessionEntry& e = it->second;
  e.last_instance = instance;
  e.model = model_id;
  e.kv_tokens = kv_tokens;
  e.last_use = now;
  e.last_done = now;
  im.lru.splice(im.lru.end(), im.lru, e.lru);
  if (options_.policy != RouterPolicy::kFull || options_.lease_tau_s <= 0) return;
  // The successor lease: installed only here, never by routing.
  im.DropLease(e);
  e.lease = Lease{instance, model_id, kv_tokens, now + FromSeconds(options_.lease_tau_s), now, im.next_lease++};
  im.lease_owner.emplace(e.lease.id, std::string(session_id));
  im.lease_expiry.emplace_back(e.lease.expires, e.lease.id);
  im.ChargeLease(e.lease, +1);
  ++counters_.leases_installed;
}

bool Router::WantsFullSnapshot(std::int32_t instance) const {
  return impl_->instances[static_cast<std::size_t>(instance)].wants_full;
}

std::int32_t Router::LeaseOf(std::string_view session_id, TimePoint now) const {
  auto it = impl_->sessions.find(session_id);
  if (it == impl_->sessions.end() || it->second.lease.id == 0 || it->second.lease.expires <= now) return -1;
  return it->second.lease.instance;
}

RouteDecision Router::Route(const RouteRequest& r, TimePoint now) {
  Impl& im = *impl_;
  ++counters_.decisions;
  const std::int32_t model = im.ModelId(r.model);
  im.ExpireLeases(now, counters_);

  // Session table entry (bounded: idle entries and the LRU overflow go).
  auto found = im.sessions.find(r.session_id);
  if (found == im.sessions.end()) {
    while (!im.lru.empty() &&
           (im.sessions.size() >= options_.max_sessions ||
            ToSeconds(now - im.sessions.find(im.lru.front())->second.last_use) > options_.session_idle_s)) {
      auto victim = im.sessions.find(im.lru.front());
      im.DropLease(victim->second);
      im.sessions.erase(victim);
      im.lru.pop_front();
    }
    found = im.sessions.emplace(std::string(r.session_id), SessionEntry{}).first;
    found->second.lru = im.lru.insert(im.lru.end(), found->first);
  } else {
    im.lru.splice(im.lru.end(), im.lru, found->second.lru);
  }
  SessionEntry& entry = found->second;
  entry.last_use = now;
  const std::vector<Location>* locs = &entry.held;

  RouteDecision d;
  const auto n = static_cast<std::int32_t>(im.instances.size());
  const std::vector<Candidate>& cands = im.by_model[static_cast<std::size_t>(model)];
  auto OverloadReason = [&](bool fresh_candidate_seen) {
    if (fresh_candidate_seen) return RouteDecision::Overload::kAdmission;
    for (const Candidate& c : cands) {
      if (c.serves) return RouteDecision::Overload::kStale;
    }
    return RouteDecision::Overload::kNoInstance;
  };
  auto serves = [&](std::int32_t i) {
    return im.hot[static_cast<std::size_t>(i)].has_snapshot && cands[static_cast<std::size_t>(i)].serves;
  };
  auto commit = [&](std::int32_t i, RouteDecision::Reason reason, double work_s) {
    d.instance = i;
    d.reason = reason;
    im.instances[static_cast<std::size_t>(i)].overlay.push_back(OverlayEntry{now, model, work_s});
    im.by_model[static_cast<std::size_t>(model)][static_cast<std::size_t>(i)].overlay_work_s += work_s;
    im.hot[static_cast<std::size_t>(i)].overlay_total_s += work_s;
    if (entry.first_instance < 0) entry.first_instance = i;
    entry.last_instance = i;
    entry.model = model;
    return d;
  };
  const double output_tokens = im.output_estimate[static_cast<std::size_t>(model)] > 0
                                   ? im.output_estimate[static_cast<std::size_t>(model)]
                                   : options_.output_tokens_estimate;

  // Per-candidate own work (dR without the queue), used by every policy for the overlay.
  auto own_work = [&](const InstanceState& inst, std::int64_t cached) {
    const ModelProfile* p = inst.profile_of[static_cast<std::size_t>(model)];
    if (p == nullptr) return 0.0;
    return p->PrefillSeconds(r.prompt_tokens - cached, cached) +
           output_tokens * p->DecodeStepSeconds(1, r.prompt_tokens);
  };

  // Least loaded fresh instance that serves the model; ties to the lowest index.
  auto least_pressure = [&]() -> std::int32_t {
    std::int32_t best = -1;
    double best_load = kInf;
    for (std::int32_t i = 0; i < n; ++i) {
      if (!serves(i)) continue;
      if (!im.Fresh(i, now, options_.stale_after_s)) {
        ++counters_.stale_exclusions;
        continue;
      }
      const double load = im.Load(i, options_.lease_unit_s);
      if (load < best_load) best = i, best_load = load;
    }
    return best;
  };

  switch (options_.policy) {
    case RouterPolicy::kLeastPressure:
    case RouterPolicy::kSessionSticky:
    case RouterPolicy::kRoundRobin:
    case RouterPolicy::kPrefixAware: {
      std::int32_t pick = -1;
      if (options_.policy == RouterPolicy::kSessionSticky && entry.first_instance >= 0 &&
          im.hot[static_cast<std::size_t>(entry.first_instance)].healthy &&
          serves(entry.first_instance)) {
        pick = entry.first_instance;
      } else if (options_.policy == RouterPolicy::kRoundRobin) {
        for (std::int32_t k = 0; k < n && pick < 0; ++k) {
          const std::int32_t i = static_cast<std::int32_t>((im.round_robin + static_cast<std::uint32_t>(k)) % static_cast<std::uint32_t>(n));
          if (serves(i) && im.Fresh(i, now, options_.stale_after_s)) {
            pick = i;
            im.round_robin = static_cast<std::uint32_t>(i + 1);
          }
        }
      } else if (options_.policy == RouterPolicy::kPrefixAware) {
        const std::int32_t least = least_pressure();
        std::int32_t best = -1;
        std::int64_t best_tokens = 0;
        for (std::int32_t i = 0; i < n; ++i) {
          if (!serves(i) || !im.Fresh(i, now, options_.stale_after_s)) continue;
          std::int64_t tokens = 0;
          if (im.CachedState(i, locs, model, &entry, tokens) != KvState::kMissing &&
              tokens > best_tokens) {
            best = i, best_tokens = tokens;
          }
        }
        pick = least;
        if (best >= 0 && least >= 0) {
          const double lb = im.Load(best, options_.lease_unit_s);
          const double ll = im.Load(least, options_.lease_unit_s);
          if (lb <= ll * options_.prefix_imbalance + options_.prefix_imbalance_floor_s) pick = best;
        }
      }
      if (pick < 0) pick = least_pressure();
      if (pick < 0) {
        ++counters_.overloads;
        d.overload = OverloadReason(false);
        return d;
      }
      std::int64_t tokens = 0;
      im.CachedState(pick, locs, model, &entry, tokens);
      return commit(pick, RouteDecision::Reason::kBaseline,
                    own_work(im.instances[static_cast<std::size_t>(pick)], std::min(tokens, r.prefix_tokens)));
    }
    case RouterPolicy::kFull:
      break;
  }

  // Algorithm 1, lines 1-9: a live lease for this session and model.
  if (entry.lease.id != 0) {
    const Lease lease = entry.lease;
    const InstanceState& inst = im.instances[static_cast<std::size_t>(lease.instance)];
    std::int64_t tokens = 0;
    const bool live = lease.expires > now && lease.model == model;
    const bool restorable = live && im.hot[static_cast<std::size_t>(lease.instance)].healthy &&
                            im.CachedState(lease.instance, locs, model, &entry, tokens) != KvState::kMissing;
    im.DropLease(entry);  // consumed or discarded: routing never refreshes it
    if (restorable) {
      ++counters_.leases_consumed;
      d.lease_hit = true;
      return commit(lease.instance, RouteDecision::Reason::kLease, own_work(inst, std::min(tokens, r.prefix_tokens)));
    }
    if (lease.expires > now) ++counters_.leases_discarded;  // wrong model, unhealthy or lost prefix
    else ++counters_.leases_expired;
  }

  // Lines 10-25: cost placement over fresh candidates. One pass computes
  // Eq.1 for every candidate and keeps the cheapest resident one; candidates
  // that would need a new replica are set aside with their cost, and Eq.2
  // (which needs the best resident cost) decides among them afterwards.
  // The few instances holding this session's prefix are found first, so the
  // pass itself treats every other candidate as a recompute.
  im.terms.clear();
  im.replicas.clear();
  im.holders.clear();
  for (const Location& l : entry.held) {
    if (l.model == model) im.holders.push_back(l.instance);
  }
  if (entry.last_instance >= 0 && entry.model == model) im.holders.push_back(entry.last_instance);
  std::sort(im.holders.begin(), im.holders.end());
  im.holders.erase(std::unique(im.holders.begin(), im.holders.end()), im.holders.end());
  im.holders.push_back(n);  // sentinel
  std::size_t next_holder = 0;
  double best_resident = kInf;
  std::int32_t best_resident_at = -1;
  const Duration stale_after = FromSeconds(options_.stale_after_s);
  const double lease_unit_s = options_.lease_unit_s;
  const bool slot_wait = options_.slot_wait;
  bool any_fresh = false;
  const ProfileTerms* terms = nullptr;
  for (std::int32_t i = 0; i < n; ++i) {
    const Candidate& c = cands[static_cast<std::size_t>(i)];
    const bool holder = i == im.holders[next_holder];
    if (holder) ++next_holder;
    if (!c.serves || c.profile == nullptr) continue;
    const InstanceHot& inst = im.hot[static_cast<std::size_t>(i)];
    if (!inst.has_snapshot || !inst.healthy || now - inst.snapshot_at > stale_after) {
      ++counters_.stale_exclusions;
      continue;
    }
    any_fresh = true;
    const ModelProfile* p = c.profile;
    // Eq.1 terms, seconds. The profile-only terms are computed once per
    // distinct profile per decision (a cluster has few), so the per-instance
    // work is a handful of loads and adds.
    if (terms == nullptr || terms->profile != p) terms = &im.TermsFor(p, r, output_tokens);
    // Queue ahead: the snapshot's, the overlay's forwards, and one admission
    // unit per live lease of this model here (capacity its next slot holds
    // for returns the router expects). Every lease here lengthens the round.
    const double leases = inst.live_leases * lease_unit_s;
    const double queue = c.queued_work_s + c.overlay_work_s + c.live_leases * lease_unit_s;
    // A cold instance admits a new call at the model's next P phase: the
    // wait advertised at the snapshot, less the time since.
    double wait = 0;
    if (slot_wait && c.admit_wait_s > 0) {
      wait = std::max(0.0, c.admit_wait_s - ToSeconds(now - inst.snapshot_at));
    }
    // Profile predictions, scaled by what this instance measured lately.
    double own = terms->extend_s * c.prefill_scale + terms->decode_s * c.decode_scale;
    double c_kv = terms->recompute_s * c.prefill_scale;  // missing: recompute the prefix
    if (holder) {
      std::int64_t tokens = 0;
      const KvState state = im.CachedState(i, locs, model, &entry, tokens);
      if (state != KvState::kMissing) {
        const std::int64_t reuse = std::min(tokens, r.prefix_tokens);
        own = p->PrefillSeconds(r.prompt_tokens - reuse, reuse) * c.prefill_scale + terms->decode_s * c.decode_scale;
        c_kv = state == KvState::kHost ? p->KvRestoreSeconds(reuse) : 0.0;
        if (c.active && c.session_prefill) wait = 0;  // enters mid-slot
      }
    }
    const double dr = queue + wait + own;
    const double c_act = c.activation_s;
    // Admission checks: Eq.5 on the predicted round, and KV capacity.
    if (options_.admission_control) {
      const double round = c.round_estimate_s + inst.overlay_total_s + leases + own + c_kv + c_act;
      if (c.round_bound_s > 0 && round > c.round_bound_s && c.round_estimate_s > 0) continue;
      if (c.kv_total_bytes > 0 && terms->kv_bytes > c.kv_total_bytes) continue;
    }
    const double cost = dr + c_kv + c_act;
    if (!c.resident) {
      im.replicas.push_back(ReplicaCandidate{i, cost, dr + c_kv});
    } else if (cost < best_resident) {  // strict: ties go to the lowest index
      best_resident = cost, best_resident_at = i;
    }
  }
  std::int32_t pick = best_resident_at;
  double pick_cost = best_resident;
  for (const ReplicaCandidate& rc : im.replicas) {
    // Eq.2: open a new replica only if its gain beats its cost.
    const double gain = best_resident == kInf ? kInf : best_resident - rc.cost_without_activation_s;
    if (!(gain > cands[static_cast<std::size_t>(rc.instance)].replica_threshold_s)) continue;
    // Ties go to the lowest index, resident or not.
    if (rc.cost_s < pick_cost || (rc.cost_s == pick_cost && rc.instance < pick)) {
      pick = rc.instance, pick_cost = rc.cost_s;
    }
  }
  if (pick < 0) {
    ++counters_.overloads;
    d.overload = OverloadReason(any_fresh);
    return d;  // the caller's overload policy
  }
  d.cost_s = pick_cost;
  std::int64_t tokens = 0;
  im.CachedState(pick, locs, model, &entry, tokens);
  return commit(pick, RouteDecision::Reason::kCost,
                own_work(im.instances[static_cast<std::size_t>(pick)], std::min(tokens, r.prefix_tokens)));
}

}  // namespace talaria
