#include "config/cluster_config.h"

#include <filesystem>
#include <initializer_list>
#include <set>
#include <string_view>
#include <utility>

#include "core/error.h"
#include "core/toml_reader.h"

namespace talaria {

const std::vector<std::string>& AblationNames() {
  static const std::vector<std::string> names = {"talaria", "no-sp", "no-hkvr", "h2d-only", "round-only"};
  return names;
}

bool AblationByName(const std::string& name, Ablation& out) {
  if (name == "talaria") out = {true, true, true};
  else if (name == "no-sp") out = {false, true, true};
  else if (name == "no-hkvr") out = {true, false, true};
  else if (name == "h2d-only") out = {true, true, false};
  else if (name == "round-only") out = {false, false, false};
  else return false;
  return true;
}

namespace {

bool ValidAddress(const std::string& a) {
  const auto colon = a.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == a.size() || a.size() - colon - 1 > 5) return false;
  int port = 0;
  for (std::size_t i = colon + 1; i < a.size(); ++i) {
    if (a[i] < '0' || a[i] > '9') return false;
    port = port * 10 + (a[i] - '0');
  }
  return port >= 1 && port <= 65535;
}

// A key whose string names one of `choices`: `out` keeps its value when
// the key is absent; any other string is a problem, `message` saying what
// the names are.
template <typename E, std::size_t N>
void OptionalChoice(TomlSection& s, const char* key, E& out, const Choices<E, N>& choices, const char* message) {
  std::string name = choices.Name(out);
  s.Optional(key, name);
  if (!choices.Parse(name, out)) s.Fail(key, s.table()->get(key), message);
}

template <typename E, std::size_t N>
void OptionalChoice(TomlSection& s, const char* key, E& out, const std::pair<std::string_view, E> (&names)[N],
                    const char* message) {
  Choices<E, N> choices{};
  for (std::size_t i = 0; i < N; ++i) choices.names[i] = names[i];
  OptionalChoice(s, key, out, choices, message);
}

ClusterConfig FromTable(const toml::table& root, const std::string& path, const std::string& base_dir) {
  ProblemList problems;
  ClusterConfig c;
  c.source = path;
  TomlSection top(&root, path, "", problems);
  std::string profiles = "../profiles";
  top.Optional("profiles", profiles);
  c.profiles_dir = (std::filesystem::path(base_dir) / profiles).lexically_normal().string();

  if (TomlSection s = top.Sub("serve", false); s.present()) {
    s.Optional("host", c.serve.host);
    s.Optional("port", c.serve.port, 0, 65535);
    s.Optional("time_scale", c.serve.time_scale, 1e-3, 1e6);
    s.Optional("api_keys", c.serve.api_keys);
    s.Optional("operator_key", c.serve.operator_key);
    s.Optional("max_header_bytes", c.serve.http.max_header_bytes, 1024, 1 << 20);
    s.Optional("max_body_bytes", c.serve.http.max_body_bytes, 1024, 1 << 30);
    s.Optional("idle_timeout_s", c.serve.http.idle_timeout_s, 0.1, 3600);
    s.Optional("header_timeout_s", c.serve.http.header_timeout_s, 0.1, 3600);
    s.Optional("request_timeout_s", c.serve.http.request_timeout_s, 0.1, 3600);
    s.Optional("write_timeout_s", c.serve.http.write_timeout_s, 0.1, 3600);
    s.Optional("drain_timeout_s", c.serve.drain_timeout_s, 0, 3600);
    s.Optional("upstream_keepalive_s", c.serve.upstream_keepalive_s, 0, 60);
    s.Optional("upstream_silence_s", c.serve.upstream_silence_s, 0.1, 3600);
    const double keepalive = c.serve.upstream_keepalive_s;
    if (keepalive > 0 && keepalive < 0.1) {
      s.Fail("upstream_keepalive_s", s.table()->get("upstream_keepalive_s"), "must be 0 (off) or at least 0.1");
    } else if (keepalive > 0 && c.serve.upstream_silence_s < 2 * keepalive) {
      s.Fail("upstream_silence_s", s.table()->get("upstream_silence_s"),
             "must be at least twice upstream_keepalive_s, or every quiet call counts its instance hung");
    }
    OptionalChoice(s, "upstream_protocol", c.serve.upstream_protocol,
                   {{"link", UpstreamProtocol::kLink}, {"http", UpstreamProtocol::kHttp}},
                   "must be \"link\" or \"http\"");
    s.Optional("max_connections", c.serve.http.max_connections, 1, 1 << 20);
    s.Optional("state", c.serve.state);
    s.Optional("state_timeout_s", c.serve.state_timeout_s, 0.001, 60);
    s.Optional("session_idle_s", c.serve.session_idle_s, 0.001, 1e6);
    s.RejectUnknown();
  }

  if (TomlSection r = top.Sub("router", false); r.present()) {
    std::string policy = ToString(c.router.policy);
    r.Optional("policy", policy);
    if (!ParseRouterPolicy(policy, c.router.policy)) {
      r.Fail("policy", r.table()->get("policy"),
             "must be one of full, least-pressure, session-sticky, round-robin, prefix-aware");
    }
    r.Optional("lease_tau_s", c.router.lease_tau_s, 0, 3600);
    OptionalChoice(r, "lease", c.router.lease, kLeasePolicies, "must be \"fixed\" (lease_tau_s) or \"adaptive\"");
    r.Optional("lease_replica_check", c.router.lease_replica_check);
    OptionalChoice(r, "lease_honour", c.router.lease_honour, kLeaseHonours, "must be \"route\" or \"rank\"");
    r.Optional("admission_control", c.router.admission_control);
    r.Optional("slot_wait", c.router.slot_wait);
    r.Optional("lease_unit_s", c.router.lease_unit_s, 0, 3600);
    r.Optional("stale_after_s", c.router.stale_after_s, 0.001, 3600);
    r.Optional("replica_penalty_s", c.router.replica_penalty_s, 0, 3600);
    r.Optional("hbm_price_s_per_gib", c.router.hbm_price_s_per_gib, 0, 3600);
    r.Optional("prefix_imbalance", c.router.prefix_imbalance, 1, 1000);
    r.Optional("heartbeat_s", c.heartbeat_s, 0.001, 3600);
    r.Optional("overload_max_wait_s", c.overload_max_wait_s, 0, 1e6);
    r.RejectUnknown();
  }

  const toml::node* list = top.Get("instance", false);
  const toml::array* instances = list != nullptr ? list->as_array() : nullptr;
  if (instances == nullptr || instances->empty()) {
    problems.Add(path, "key 'instance': needs at least one [[instance]] table");
  } else {
    std::set<std::string> names;
    for (std::size_t i = 0; i < instances->size(); ++i) {
      const toml::table* t = (*instances)[i].as_table();
      if (t == nullptr) {
        problems.Add(path, "key 'instance': must be an array of tables");
        continue;
      }
      InstanceConfig ic;
      ic.name = "instance-" + std::to_string(i);
      TomlSection r(t, path, "instance[" + std::to_string(i) + "].", problems);
      r.Optional("name", ic.name);
      OptionalChoice(r, "pool", ic.pool, {{"cold", Pool::kCold}, {"hot", Pool::kHot}}, "must be \"hot\" or \"cold\"");
      r.Optional("models", ic.models);
      if (ic.models.empty()) r.Fail("models", t->get("models"), "needs at least one model");
      r.Optional("resident", ic.resident);
      r.Optional("max_resident", ic.max_resident, 0, 1 << 16);
      r.Optional("defer_forced_opens", ic.defer_forced_opens);
      r.Optional("storage_gbps", ic.storage_gbps, 0.001, 1e6);
      r.Optional("tp", ic.tp, 1, 64);
      r.Optional("engine", ic.engine);
      if (ic.engine != "sim" && ic.engine != "cpu") r.Fail("engine", t->get("engine"), "must be \"sim\" or \"cpu\"");
      r.Optional("bump_fraction", ic.bump_fraction, 0.1, 1.0);
      r.Optional("non_bump_reserved_gib", ic.non_bump_reserved_gib, 0, 1e4);
      r.Optional("runtime_gib", ic.runtime_gib, 0, 1e4);
      r.Optional("graph_pool_gib", ic.graph_pool_gib, 0, 1e4);
      r.Optional("min_kv_gib", ic.min_kv_gib, 0, 1e4);
      r.Optional("block_tokens", ic.block_tokens, 1, 1 << 16);
      r.Optional("staging_chunk_mib", ic.staging_chunk_mib, 1, 1 << 20);
      r.Optional("host_kv_gib_per_rank", ic.host_kv_gib_per_rank, 0, 1 << 20);
      OptionalChoice(r, "state_checkpoints", ic.state_checkpoints, kStateCheckpoints,
                     "must be \"doubling\" or \"context_end\"");
      r.Optional("ttft_target_s", ic.ttft_target_s, 0.01, 1e5);
      r.Optional("tpot_target_s", ic.tpot_target_s, 1e-4, 1e3);
      r.Optional("gamma", ic.gamma, 0.01, 0.999);
      r.Optional("switches_in_round_budget", ic.switches_in_round_budget);
      r.Optional("min_prefill_budget_s", ic.min_prefill_budget_s, 0, 1e4);
      r.Optional("sp_max_batch", ic.sp_max_batch, 1, 1 << 16);
      r.Optional("slot_hold_s", ic.slot_hold_s, 0, 1e4);
      OptionalChoice(r, "hold", ic.hold, kHoldPolicies, "must be \"fixed\" (slot_hold_s) or \"adaptive\"");
      r.Optional("hold_charges_decode", ic.hold_charges_decode);
      r.Optional("hold_within_share", ic.hold_within_share);
      r.Optional("max_prefill_batch_tokens", ic.max_prefill_batch_tokens, 1, 1 << 30);
      r.Optional("sp", ic.ablation.sp);
      r.Optional("hkvr", ic.ablation.hkvr);
      r.Optional("d2d_staging", ic.ablation.d2d_staging);
      std::string address;
      r.Optional("address", address);
      if (!address.empty() && !ValidAddress(address)) {
        r.Fail("address", t->get("address"), "must be IP:PORT with a port from 1 to 65535, e.g. \"127.0.0.1:8101\"");
      }
      c.instance_addresses.push_back(address);
      r.RejectUnknown();
      if (!names.insert(ic.name).second) r.Fail("name", t->get("name"), "duplicate instance name");
      c.instances.push_back(std::move(ic));
    }
  }
  top.RejectUnknown();
  problems.ThrowIfAny();
  return c;
}

}  // namespace

ClusterConfig LoadClusterConfig(const std::string& path) {
  return FromTable(ParseTomlFile(path), path, std::filesystem::path(path).parent_path().string());
}

ClusterConfig ParseClusterConfig(const std::string& text, const std::string& source,
                                 const std::string& base_dir) {
  toml::table root;
  try {
    root = toml::parse(text, source);
  } catch (const toml::parse_error& e) {
    const auto line = e.source().begin.line;
    throw InputError(line > 0 ? source + ":" + std::to_string(line) : source,
                     "not valid TOML: " + std::string(e.description()));
  }
  return FromTable(root, source, base_dir);
}

}  // namespace talaria
