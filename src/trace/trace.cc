#include "trace/trace.h"

#include <cmath>
#include <fstream>
#include <iostream>
#include <limits>
#include <nlohmann/json.hpp>
#include <unordered_map>

#include "core/error.h"

namespace talaria {
namespace {

using nlohmann::json;

constexpr std::size_t kMaxIdLength = 256;

// Field readers for one record. Each records a problem and returns false (or
// nullopt) when the field is absent or has the wrong type or range.
class RecordReader {
 public:
  RecordReader(const json& record, std::string where, ProblemList& problems)
      : record_(record), where_(std::move(where)), problems_(problems) {}

  void Fail(std::string_view field, std::string_view message) {
    problems_.Add(where_, "field '" + std::string(field) + "': " + std::string(message));
    ok_ = false;
  }

  const json* Find(std::string_view key, bool required) {
    auto it = record_.find(key);
    if (it == record_.end()) {
      if (required) Fail(key, "missing");
      return nullptr;
    }
    return &*it;
  }

  std::string String(std::string_view key, bool required, bool allow_empty) {
    const json* v = Find(key, required);
    if (v == nullptr) return {};
    if (!v->is_string()) {
      Fail(key, "must be a string");
      return {};
    }
    auto s = v->get<std::string>();
    if (!allow_empty && s.empty()) Fail(key, "must not be empty");
    if (s.size() > kMaxIdLength) Fail(key, "longer than 256 characters");
    return s;
  }

  std::int64_t Integer(std::string_view key, std::int64_t min) {
    const json* v = Find(key, true);
    if (v == nullptr) return 0;
    if (!v->is_number_integer()) {
      Fail(key, "must be an integer");
      return 0;
    }
    if (v->is_number_unsigned() && v->get<std::uint64_t>() >
                                       static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) {
      Fail(key, "out of range");
      return 0;
    }
    auto x = v->get<std::int64_t>();
    if (x < min) Fail(key, "must be >= " + std::to_string(min) + ", got " + std::to_string(x));
    return x;
  }

  std::optional<double> Seconds(std::string_view key, bool required) {
    const json* v = Find(key, required);
    if (v == nullptr) return std::nullopt;
    if (!v->is_number()) {
      Fail(key, "must be a number of seconds");
      return std::nullopt;
    }
    double x = v->get<double>();
    if (!std::isfinite(x) || x < 0) {
      Fail(key, "must be a finite number >= 0");
      return std::nullopt;
    }
    return x;
  }

  std::uint64_t Seed(std::string_view key) {
    const json* v = Find(key, true);
    if (v == nullptr) return 0;
    if (!v->is_number_integer() || (v->is_number_integer() && !v->is_number_unsigned() &&
                                    v->get<std::int64_t>() < 0)) {
      Fail(key, "must be a non-negative integer");
      return 0;
    }
    auto x = v->get<std::uint64_t>();
    if (x > kMaxTokenSeed) Fail(key, "must be at most 2^53 - 1");
    return x;
  }

  bool Bool(std::string_view key) {
    const json* v = Find(key, false);
    if (v == nullptr) return false;
    if (!v->is_boolean()) {
      Fail(key, "must be true or false");
      return false;
    }
    return v->get<bool>();
  }

  bool ok() const { return ok_; }

 private:
  const json& record_;
  std::string where_;
  ProblemList& problems_;
  bool ok_ = true;
};

const char* const kKnownKeys[] = {"session_id", "call_index",    "model",       "prompt_tokens",
                                  "prefix_tokens", "output_tokens", "gap_s",     "gap_uncapped_s",
                                  "enqueue_s",  "token_seed",    "task",      "expected_tool_s",
                                  "session_end"};

bool IsKnownKey(const std::string& key) {
  for (const char* k : kKnownKeys) {
    if (key == k) return true;
  }
  return false;
}

struct SessionState {
  std::int32_t next_index = 0;
  std::string model;
  std::uint64_t token_seed = 0;
  std::int64_t previous_context = 0;  // prompt + output of the previous call
};

}  // namespace

std::vector<SessionCalls> GroupSessions(const Trace& trace) {
  std::vector<SessionCalls> sessions;
  std::unordered_map<std::string, std::size_t> index;
  for (std::size_t i = 0; i < trace.calls.size(); ++i) {
    const auto& id = trace.calls[i].session_id;
    auto [it, inserted] = index.try_emplace(id, sessions.size());
    if (inserted) sessions.push_back(SessionCalls{id, {}});
    sessions[it->second].calls.push_back(i);
  }
  return sessions;
}

Trace ReadTrace(std::istream& in, std::string_view source) {
  Trace trace;
  ProblemList problems;
  std::unordered_map<std::string, SessionState> sessions;
  std::string line;
  std::size_t line_no = 0;
  while (std::getline(in, line)) {
    ++line_no;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;  // blank line
    const std::string where = std::string(source) + ":" + std::to_string(line_no);
    json record;
    try {
      record = json::parse(line);
    } catch (const json::exception& e) {  // parse_error, and out_of_range for huge numbers
      problems.Add(where, std::string("not valid JSON: ") + e.what());
      continue;
    }
    if (!record.is_object()) {
      problems.Add(where, "a record must be a JSON object");
      continue;
    }
    RecordReader r(record, where, problems);
    for (const auto& [key, value] : record.items()) {
      if (!IsKnownKey(key)) r.Fail(key, "unknown field (docs/trace-format.md lists the fields)");
    }
    TraceCall c;
    c.session_id = r.String("session_id", true, false);
    c.call_index = static_cast<std::int32_t>(std::min<std::int64_t>(
        r.Integer("call_index", 0), std::numeric_limits<std::int32_t>::max()));
    c.model = r.String("model", true, false);
    c.prompt_tokens = r.Integer("prompt_tokens", 1);
    c.prefix_tokens = r.Integer("prefix_tokens", 0);
    c.output_tokens = r.Integer("output_tokens", 1);
    c.gap_s = r.Seconds("gap_s", true).value_or(0.0);
    c.gap_uncapped_s = r.Seconds("gap_uncapped_s", false);
    c.enqueue_s = r.Seconds("enqueue_s", false);
    c.token_seed = r.Seed("token_seed");
    c.task = r.String("task", false, true);
    c.expected_tool_s = r.Seconds("expected_tool_s", false);
    c.session_end = r.Bool("session_end");
    const bool fields_ok = r.ok();
    // Without a usable session and index the record cannot join its session.
    const auto index_it = record.find("call_index");
    if (c.session_id.empty() || index_it == record.end() || !index_it->is_number_integer() ||
        index_it->get<std::int64_t>() < 0) {
      continue;
    }
    if (fields_ok && c.prefix_tokens > c.prompt_tokens) {
      r.Fail("prefix_tokens", "exceeds prompt_tokens (" + std::to_string(c.prefix_tokens) + " > " +
                                  std::to_string(c.prompt_tokens) + ")");
    }
    if (fields_ok && c.gap_uncapped_s && *c.gap_uncapped_s < c.gap_s) {
      r.Fail("gap_uncapped_s", "is smaller than gap_s");
    }
    // Cross-record rules: contiguous call order, one model and seed per
    // session, and a prefix no longer than what the previous call produced.
    SessionState& s = sessions[c.session_id];
    if (c.call_index != s.next_index) {
      r.Fail("call_index", "expected " + std::to_string(s.next_index) + " for session '" +
                               c.session_id + "', got " + std::to_string(c.call_index));
    } else if (c.call_index == 0) {
      s.model = c.model;
      s.token_seed = c.token_seed;
      if (c.prefix_tokens != 0) r.Fail("prefix_tokens", "must be 0 on a session's first call");
    } else if (fields_ok) {
      if (c.model != s.model) {
        r.Fail("model", "session '" + c.session_id + "' changed model from '" + s.model + "'");
      }
      if (c.token_seed != s.token_seed) {
        r.Fail("token_seed", "differs from the session's first call");
      }
      if (c.prefix_tokens > s.previous_context) {
        r.Fail("prefix_tokens", "exceeds the previous call's prompt + output (" +
                                    std::to_string(s.previous_context) + ")");
      }
    }
    // Advance the session past a bad record too, so one mistake is reported
    // once; its lengths are unknown, so the next prefix goes unchecked.
    if (c.call_index == s.next_index) {
      s.next_index = c.call_index + 1;
      s.previous_context = r.ok() ? c.prompt_tokens + c.output_tokens
                                  : std::numeric_limits<std::int64_t>::max();
    }
    if (!r.ok()) continue;
    trace.calls.push_back(std::move(c));
  }
  if (in.bad()) problems.Add(std::string(source), "read error");
  problems.ThrowIfAny();
  trace.calls.shrink_to_fit();  // a replay holds it throughout: no doubling slack
  return trace;
}

Trace ReadTraceFile(const std::string& path) {
  if (path == "-") return ReadTrace(std::cin, "<stdin>");
  std::ifstream in(path);
  if (!in) throw InputError(path, "cannot open trace file");
  return ReadTrace(in, path);
}

void WriteTraceCall(std::ostream& out, const TraceCall& c) {
  nlohmann::ordered_json j;
  j["session_id"] = c.session_id;
  j["call_index"] = c.call_index;
  j["model"] = c.model;
  j["prompt_tokens"] = c.prompt_tokens;
  j["prefix_tokens"] = c.prefix_tokens;
  j["output_tokens"] = c.output_tokens;
  j["gap_s"] = c.gap_s;
  if (c.gap_uncapped_s) j["gap_uncapped_s"] = *c.gap_uncapped_s;
  if (c.enqueue_s) j["enqueue_s"] = *c.enqueue_s;
  j["token_seed"] = c.token_seed;
  if (!c.task.empty()) j["task"] = c.task;
  if (c.expected_tool_s) j["expected_tool_s"] = *c.expected_tool_s;
  if (c.session_end) j["session_end"] = true;
  out << j.dump() << '\n';
}

void WriteTrace(std::ostream& out, const Trace& trace) {
  for (const auto& c : trace.calls) WriteTraceCall(out, c);
}

}  // namespace talaria
