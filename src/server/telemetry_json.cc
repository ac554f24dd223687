#include "server/telemetry_json.h"

#include <cmath>

namespace talaria {

using nlohmann::json;

namespace {

bool ParseKvState(const std::string& s, KvState& out) {
  for (KvState k : {KvState::kMissing, KvState::kHost, KvState::kDevice}) {
    if (s == ToString(k)) {
      out = k;
      return true;
    }
  }
  return false;
}

}  // namespace

json TelemetryToJson(const InstanceTelemetry& t) {
  json models = json::array();
  for (const auto& m : t.models) {
    models.push_back({{"name", m.name},
                      {"resident", m.resident},
                      {"active", m.active},
                      {"staged", m.staged},
                      {"staged_coverage", m.staged_coverage},
                      {"queued", m.queued},
                      {"running", m.running},
                      {"queued_work_s", m.queued_work_s},
                      {"switch_in_s", m.switch_in_s},
                      {"full_open_s", m.full_open_s},
                      {"forced_reopen_s", m.forced_reopen_s},
                      {"admit_wait_s", m.admit_wait_s},
                      {"prefill_scale", m.prefill_scale},
                      {"decode_scale", m.decode_scale},
                      {"weight_bytes_per_rank", m.weight_bytes_per_rank}});
  }
  json sessions = json::object();
  for (const auto& [id, c] : t.sessions) {
    sessions[id] = {{"model", c.model}, {"state", ToString(c.state)}, {"tokens", c.tokens}};
  }
  return {{"instance", t.instance},
          {"version", t.version},
          {"taken_at_s", ToSeconds(t.taken_at)},
          {"models", models},
          {"round_estimate_s", t.round_estimate_s},
          {"round_bound_s", t.round_bound_s},
          {"deadline_risk", t.deadline_risk},
          {"kv_free_bytes", t.kv_free_bytes},
          {"kv_total_bytes", t.kv_total_bytes},
          {"staging_slack_bytes", t.staging_slack_bytes},
          {"host_kv_used_bytes", t.host_kv_used_bytes},
          {"host_kv_capacity_bytes", t.host_kv_capacity_bytes},
          {"host_kv_evicted_blocks", t.host_kv_evicted_blocks},
          {"restore_bytes_per_s", t.restore_bytes_per_s},
          {"session_prefill", t.session_prefill},
          {"hold_wait_scale", t.hold_wait_scale},
          {"sessions", sessions}};
}

std::optional<InstanceTelemetry> TelemetryFromJson(const json& j, std::string& error) {
  std::string field;  // the field being read, for the error
  try {
    const auto get = [&field](const json& obj, const char* key, auto& out, const std::string& where = "") {
      field = where + key;
      obj.at(key).get_to(out);
    };
    InstanceTelemetry t;
    get(j, "instance", t.instance);
    get(j, "version", t.version);
    double taken_at_s = 0;
    get(j, "taken_at_s", taken_at_s);
    t.taken_at = TimePoint(FromSeconds(taken_at_s));
    get(j, "round_estimate_s", t.round_estimate_s);
    get(j, "round_bound_s", t.round_bound_s);
    get(j, "deadline_risk", t.deadline_risk);
    get(j, "kv_free_bytes", t.kv_free_bytes);
    get(j, "kv_total_bytes", t.kv_total_bytes);
    get(j, "staging_slack_bytes", t.staging_slack_bytes);
    get(j, "host_kv_used_bytes", t.host_kv_used_bytes);
    get(j, "host_kv_capacity_bytes", t.host_kv_capacity_bytes);
    get(j, "host_kv_evicted_blocks", t.host_kv_evicted_blocks);
    get(j, "restore_bytes_per_s", t.restore_bytes_per_s);
    // Optional (absent from instances before 2026-11-30): no wait, no SP.
    if (j.contains("session_prefill")) get(j, "session_prefill", t.session_prefill);
    // Optional (absent before 2026-12-05): W as predicted.
    if (j.contains("hold_wait_scale")) {
      get(j, "hold_wait_scale", t.hold_wait_scale);
      if (!(t.hold_wait_scale > 0) || !std::isfinite(t.hold_wait_scale)) {
        error = "hold_wait_scale: must be a positive number, got " + j.at("hold_wait_scale").dump();
        return std::nullopt;
      }
    }
    field = "models";
    for (const auto& jm : j.at("models")) {
      ModelTelemetry m;
      get(jm, "name", m.name, "models[].");
      get(jm, "resident", m.resident, "models[].");
      get(jm, "active", m.active, "models[].");
      get(jm, "staged", m.staged, "models[].");
      get(jm, "staged_coverage", m.staged_coverage, "models[].");
      get(jm, "queued", m.queued, "models[].");
      get(jm, "running", m.running, "models[].");
      get(jm, "queued_work_s", m.queued_work_s, "models[].");
      get(jm, "switch_in_s", m.switch_in_s, "models[].");
      get(jm, "full_open_s", m.full_open_s, "models[].");
      // Optional (absent before 2026-12-03): an open closes nothing busy.
      if (jm.contains("forced_reopen_s")) get(jm, "forced_reopen_s", m.forced_reopen_s, "models[].");
      if (jm.contains("admit_wait_s")) get(jm, "admit_wait_s", m.admit_wait_s, "models[].");
      get(jm, "prefill_scale", m.prefill_scale, "models[].");
      get(jm, "decode_scale", m.decode_scale, "models[].");
      get(jm, "weight_bytes_per_rank", m.weight_bytes_per_rank, "models[].");
      t.models.push_back(std::move(m));
    }
    field = "sessions";
    for (const auto& [id, js] : j.at("sessions").items()) {
      CachedPrefix c;
      std::string state;
      get(js, "model", c.model, "sessions." + id + ".");
      get(js, "state", state, "sessions." + id + ".");
      get(js, "tokens", c.tokens, "sessions." + id + ".");
      if (!ParseKvState(state, c.state)) {
        error = "sessions." + id + ".state: unknown state '" + state + "'";
        return std::nullopt;
      }
      t.sessions.emplace(id, std::move(c));
    }
    return t;
  } catch (const json::exception& e) {
    error = field + ": " + e.what();
    return std::nullopt;
  }
}

}  // namespace talaria
