#include "sim/cluster_config.h"

#include <filesystem>
#include <set>
#include <toml++/toml.h>

#include "core/error.h"

namespace talaria {
namespace {

class TableReader {
 public:
  TableReader(const toml::table& t, std::string path, std::string prefix, ProblemList& problems)
      : t_(t), path_(std::move(path)), prefix_(std::move(prefix)), problems_(problems) {}

  void Fail(const toml::node* at, std::string_view key, std::string_view message) {
    std::string where = path_;
    const toml::node* line_of = at != nullptr ? at : &t_;
    if (line_of->source().begin.line > 0) {
      where.append(":").append(std::to_string(line_of->source().begin.line));
    }
    std::string text = "key '";
    text.append(prefix_).append(std::string(key)).append("': ").append(message);
    problems_.Add(where, text);
  }

  template <typename T>
  void Number(std::string_view key, T& out, double min, double max) {
    used_.insert(std::string(key));
    const toml::node* n = t_.get(key);
    if (n == nullptr) return;  // default stays
    double v = 0;
    if (n->is_integer()) {
      v = static_cast<double>(*n->value<std::int64_t>());
    } else if (n->is_floating_point() && !std::is_integral_v<T>) {
      v = *n->value<double>();
    } else {
      Fail(n, key, std::is_integral_v<T> ? "must be an integer" : "must be a number");
      return;
    }
    if (v < min || v > max) {
      Fail(n, key, "must be in [" + std::to_string(min) + ", " + std::to_string(max) + "]");
      return;
    }
    out = static_cast<T>(v);
  }

  void Bool(std::string_view key, bool& out) {
    used_.insert(std::string(key));
    const toml::node* n = t_.get(key);
    if (n == nullptr) return;
    if (!n->is_boolean()) return Fail(n, key, "must be true or false");
    out = *n->value<bool>();
  }

  void String(std::string_view key, std::string& out) {
    used_.insert(std::string(key));
    const toml::node* n = t_.get(key);
    if (n == nullptr) return;
    if (!n->is_string()) return Fail(n, key, "must be a string");
    out = *n->value<std::string>();
  }

  void Strings(std::string_view key, std::vector<std::string>& out) {
    used_.insert(std::string(key));
    const toml::node* n = t_.get(key);
    if (n == nullptr) return;
    const toml::array* a = n->as_array();
    if (a == nullptr) return Fail(n, key, "must be an array of strings");
    out.clear();
    for (const auto& e : *a) {
      if (!e.is_string()) return Fail(&e, key, "must be an array of strings");
      out.push_back(*e.value<std::string>());
    }
  }

  void RejectUnknown() {
    for (const auto& [k, v] : t_) {
      if (!used_.contains(std::string(k.str()))) Fail(&v, k.str(), "unknown key");
    }
  }

 private:
  const toml::table& t_;
  std::string path_;
  std::string prefix_;
  ProblemList& problems_;
  std::set<std::string> used_;
};

}  // namespace

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

ClusterConfig LoadClusterConfig(const std::string& path) {
  toml::table root;
  try {
    root = toml::parse_file(path);
  } catch (const toml::parse_error& e) {
    const auto line = e.source().begin.line;
    throw InputError(line > 0 ? path + ":" + std::to_string(line) : path,
                     "not valid TOML: " + std::string(e.description()));
  }
  ProblemList problems;
  ClusterConfig c;
  c.source = path;
  TableReader top(root, path, "", problems);
  std::string profiles = "../profiles";
  top.String("profiles", profiles);
  const std::filesystem::path base = std::filesystem::path(path).parent_path();
  c.profiles_dir = (base / profiles).lexically_normal().string();

  const toml::node* list = root.get("instance");
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
      TableReader r(*t, path, "instance[" + std::to_string(i) + "].", problems);
      r.String("name", ic.name);
      std::string pool = "cold";
      r.String("pool", pool);
      if (pool == "hot") ic.pool = Pool::kHot;
      else if (pool != "cold") r.Fail(t->get("pool"), "pool", "must be \"hot\" or \"cold\"");
      r.Strings("models", ic.models);
      r.Strings("resident", ic.resident);
      r.Number("max_resident", ic.max_resident, 0, 1 << 16);
      r.Number("storage_gbps", ic.storage_gbps, 0.001, 1e6);
      if (ic.models.empty()) r.Fail(t->get("models"), "models", "needs at least one model");
      r.Number("tp", ic.tp, 1, 64);
      r.Number("bump_fraction", ic.bump_fraction, 0.1, 1.0);
      r.Number("non_bump_reserved_gib", ic.non_bump_reserved_gib, 0, 1e4);
      r.Number("runtime_gib", ic.runtime_gib, 0, 1e4);
      r.Number("graph_pool_gib", ic.graph_pool_gib, 0, 1e4);
      r.Number("block_tokens", ic.block_tokens, 1, 1 << 16);
      r.Number("staging_chunk_mib", ic.staging_chunk_mib, 1, 1 << 20);
      r.Number("host_kv_gib_per_rank", ic.host_kv_gib_per_rank, 0, 1 << 20);
      r.Number("ttft_target_s", ic.ttft_target_s, 0.01, 1e5);
      r.Number("tpot_target_s", ic.tpot_target_s, 1e-4, 1e3);
      r.Number("gamma", ic.gamma, 0.01, 0.999);
      r.Number("min_prefill_budget_s", ic.min_prefill_budget_s, 0, 1e4);
      r.Number("sp_max_batch", ic.sp_max_batch, 1, 1 << 16);
      r.Number("slot_hold_s", ic.slot_hold_s, 0, 1e4);
      r.Number("max_prefill_batch_tokens", ic.max_prefill_batch_tokens, 1, 1 << 30);
      r.Bool("sp", ic.ablation.sp);
      r.Bool("hkvr", ic.ablation.hkvr);
      r.Bool("d2d_staging", ic.ablation.d2d_staging);
      r.RejectUnknown();
      if (!names.insert(ic.name).second) r.Fail(t->get("name"), "name", "duplicate instance name");
      c.instances.push_back(std::move(ic));
    }
  }
  if (const toml::node* rn = root.get("router")) {
    if (const toml::table* rt = rn->as_table()) {
      TableReader r(*rt, path, "router.", problems);
      std::string policy = ToString(c.router.policy);
      r.String("policy", policy);
      if (!ParseRouterPolicy(policy, c.router.policy)) {
        r.Fail(rt->get("policy"), "policy",
               "must be one of full, least-pressure, session-sticky, round-robin, prefix-aware");
      }
      r.Number("lease_tau_s", c.router.lease_tau_s, 0, 3600);
      r.Bool("admission_control", c.router.admission_control);
      r.Number("lease_unit_s", c.router.lease_unit_s, 0, 3600);
      r.Number("stale_after_s", c.router.stale_after_s, 0.001, 3600);
      r.Number("replica_penalty_s", c.router.replica_penalty_s, 0, 3600);
      r.Number("hbm_price_s_per_gib", c.router.hbm_price_s_per_gib, 0, 3600);
      r.Number("prefix_imbalance", c.router.prefix_imbalance, 1, 1000);
      r.Number("heartbeat_s", c.heartbeat_s, 0.001, 3600);
      r.Number("overload_max_wait_s", c.overload_max_wait_s, 0, 1e6);
      r.RejectUnknown();
    } else {
      problems.Add(path, "key 'router': must be a table");
    }
  }
  for (const auto& [k, v] : root) {
    if (k.str() != "profiles" && k.str() != "instance" && k.str() != "router") {
      problems.Add(path + ":" + std::to_string(v.source().begin.line),
                   "key '" + std::string(k.str()) + "': unknown key");
    }
  }
  problems.ThrowIfAny();
  return c;
}

}  // namespace talaria
