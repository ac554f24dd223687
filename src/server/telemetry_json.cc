#include "server/telemetry_json.h"

#include <algorithm>
#include <cmath>
#include <sstream>
#include <stdexcept>
#include <type_traits>

namespace talaria {

using nlohmann::json;

namespace {

// A number out of the range the router can compute with.
struct TelemetryRangeError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

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
          {"busy_fraction", t.busy_fraction},
          {"sessions", sessions}};
}

std::optional<InstanceTelemetry> TelemetryFromJson(const json& j, std::string& error) {
  std::string field;  // the field being read, for the error
  try {
    const auto get = [&field](const json& obj, const char* key, auto& out, const std::string& where = "") {
      field = where + key;
      obj.at(key).get_to(out);
    };
    // A number the router computes with: finite, within [0, hi] (above 0
    // where `positive`), and whole for an integer field. A real field may
    // stray past a bound by rounding (1e-9 of it), and is clamped back.
    const auto number = [&field](const json& obj, const char* key, auto& out, double hi, const std::string& where = "",
                                 bool positive = false) {
      using T = std::remove_reference_t<decltype(out)>;
      field = where + key;
      const json& v = obj.at(key);
      const double d = v.get<double>();  // a type error for anything but a number
      constexpr double kRounding = 1e-9;
      const bool in_range = positive ? d > 0 && d <= hi : d >= -kRounding && d <= hi * (1 + kRounding);
      if (!in_range || (std::is_integral_v<T> && d != std::floor(d))) {
        std::ostringstream problem;
        problem << "must be a " << (std::is_integral_v<T> ? "whole " : "") << (positive ? "positive " : "")
                << "number " << (positive ? "" : ">= 0 and ") << "<= " << hi << ", got " << v.dump();
        throw TelemetryRangeError(problem.str());
      }
      if constexpr (std::is_integral_v<T>) {
        out = v.get<T>();
      } else {
        out = std::clamp(d, 0.0, hi);
      }
    };
    constexpr double kSeconds = 1e9;  // about 32 years: any duration or instant a snapshot can mean
    constexpr double kCount = 1e9;
    constexpr double kBytes = 1e18;
    constexpr double kScale = 1e6;
    InstanceTelemetry t;
    get(j, "instance", t.instance);
    number(j, "version", t.version, 1e18);
    double taken_at_s = 0;
    number(j, "taken_at_s", taken_at_s, kSeconds);
    t.taken_at = TimePoint(FromSeconds(taken_at_s));
    number(j, "round_estimate_s", t.round_estimate_s, kSeconds);
    number(j, "round_bound_s", t.round_bound_s, kSeconds);
    number(j, "deadline_risk", t.deadline_risk, kBytes);  // a count since start
    number(j, "kv_free_bytes", t.kv_free_bytes, kBytes);
    number(j, "kv_total_bytes", t.kv_total_bytes, kBytes);
    number(j, "staging_slack_bytes", t.staging_slack_bytes, kBytes);
    number(j, "host_kv_used_bytes", t.host_kv_used_bytes, kBytes);
    number(j, "host_kv_capacity_bytes", t.host_kv_capacity_bytes, kBytes);
    number(j, "host_kv_evicted_blocks", t.host_kv_evicted_blocks, kBytes);
    number(j, "restore_bytes_per_s", t.restore_bytes_per_s, kBytes);
    // Optional (absent from instances before 2026-11-30): no wait, no SP.
    if (j.contains("session_prefill")) get(j, "session_prefill", t.session_prefill);
    // Optional (absent before 2026-12-05): W as predicted.
    if (j.contains("hold_wait_scale")) number(j, "hold_wait_scale", t.hold_wait_scale, kScale, "", true);
    // Optional (absent before 2026-12-07): unknown, as before two steps.
    if (j.contains("busy_fraction")) number(j, "busy_fraction", t.busy_fraction, 1.0);
    field = "models";
    for (const auto& jm : j.at("models")) {
      const std::string where = "models[].";
      ModelTelemetry m;
      get(jm, "name", m.name, where);
      get(jm, "resident", m.resident, where);
      get(jm, "active", m.active, where);
      get(jm, "staged", m.staged, where);
      number(jm, "staged_coverage", m.staged_coverage, 1, where);
      number(jm, "queued", m.queued, kCount, where);
      number(jm, "running", m.running, kCount, where);
      number(jm, "queued_work_s", m.queued_work_s, kSeconds, where);
      number(jm, "switch_in_s", m.switch_in_s, kSeconds, where);
      number(jm, "full_open_s", m.full_open_s, kSeconds, where);
      // Optional (absent before 2026-12-03): an open closes nothing busy.
      if (jm.contains("forced_reopen_s")) number(jm, "forced_reopen_s", m.forced_reopen_s, kSeconds, where);
      if (jm.contains("admit_wait_s")) number(jm, "admit_wait_s", m.admit_wait_s, kSeconds, where);
      number(jm, "prefill_scale", m.prefill_scale, kScale, where, true);
      number(jm, "decode_scale", m.decode_scale, kScale, where, true);
      number(jm, "weight_bytes_per_rank", m.weight_bytes_per_rank, kBytes, where);
      t.models.push_back(std::move(m));
    }
    field = "sessions";
    for (const auto& [id, js] : j.at("sessions").items()) {
      CachedPrefix c;
      std::string state;
      const std::string where = "sessions." + id + ".";
      get(js, "model", c.model, where);
      get(js, "state", state, where);
      number(js, "tokens", c.tokens, kCount, where);
      if (!ParseKvState(state, c.state)) {
        error = "sessions." + id + ".state: unknown state '" + state + "'";
        return std::nullopt;
      }
      t.sessions.emplace(id, std::move(c));
    }
    return t;
  } catch (const json::exception& e) {
    error = field + ": " + e.what();
  } catch (const TelemetryRangeError& e) {
    error = field + ": " + e.what();
  }
  return std::nullopt;
}

}  // namespace talaria
