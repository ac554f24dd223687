#include "report/report.h"

#include <algorithm>
#include <array>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string_view>

#include "core/error.h"
#include "web/web_assets.h"

namespace talaria {
namespace {

using nlohmann::json;

// The paper's TP=8 fixed replay (§5, the ablation table), the points its
// CDFs are compared against; absent figures are not published.
struct PaperPoint {
  const char* config;
  double sct_p50_s, sct_p95_s, ttft_p50_s;  // 0: not published
};
constexpr std::array<PaperPoint, 5> kPaper = {{
    {"talaria", 189, 867, 0.55},
    {"no-sp", 623, 0, 4.60},
    {"no-hkvr", 486, 0, 0},
    {"h2d-only", 194, 933, 0},
    {"round-only", 1000, 2296, 13.44},
}};

constexpr std::array<std::string_view, 5> kPhases = {"prefill", "session_prefill", "decode", "switch", "hold"};
constexpr std::array<std::string_view, 3> kPaths = {"d2d", "partial", "h2d"};

json PaperJson() {
  json out = json::object();
  for (const PaperPoint& p : kPaper) {
    json e = json::object();
    if (p.sct_p50_s > 0) e["sct_p50_s"] = p.sct_p50_s;
    if (p.sct_p95_s > 0) e["sct_p95_s"] = p.sct_p95_s;
    if (p.ttft_p50_s > 0) e["ttft_p50_s"] = p.ttft_p50_s;
    out[p.config] = e;
  }
  return out;
}

bool EndsWith(std::string_view s, std::string_view end) {
  return s.size() >= end.size() && s.substr(s.size() - end.size()) == end;
}

// Whether the paper's points belong beside this run (ReportOptions::paper).
bool PaperApplies(ReportOptions::Paper paper, const json& run) {
  if (paper == ReportOptions::Paper::kNone) return false;
  if (paper == ReportOptions::Paper::kAll) return true;
  const auto text = [&](const char* key) {
    return run.contains(key) && run[key].is_string() ? run[key].get<std::string>() : std::string();
  };
  return EndsWith(text("cluster"), "tp8-three-models.toml") && EndsWith(text("trace"), "swe-fixed-30.jsonl") &&
         text("load") != "low" && text("load") != "high";
}

json ReadJsonFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw InputError(path, "cannot read the replay summary");
  std::stringstream text;
  text << in.rdbuf();
  json j = json::parse(text.str(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) throw InputError(path, "not JSON (expected a `talaria replay --json` summary)");
  return j;  // its shape is checked with the summaries given in memory (BuildReportData)
}

int IndexOf(std::string_view value, auto const& names) {
  for (std::size_t i = 0; i < names.size(); ++i) {
    if (names[i] == value) return static_cast<int>(i);
  }
  return -1;
}

double Number(const json& line, const char* field, const std::string& where) {
  auto it = line.find(field);
  if (it == line.end() || !it->is_number()) throw InputError(where, std::string("field '") + field + "' missing or not a number");
  return it->get<double>();
}

std::string Text(const json& line, const char* field, const std::string& where) {
  auto it = line.find(field);
  if (it == line.end() || !it->is_string()) throw InputError(where, std::string("field '") + field + "' missing or not a string");
  return it->get<std::string>();
}

double Percent(double used, double total) { return total > 0 ? 100.0 * used / total : 0.0; }

// One run's timeline.jsonl as the page draws it: per instance, segments
// [start_s, end_s, phase, model, path] (indices into "phases", "models",
// "paths"; path -1 unless a switch) and memory points [t_s, HBM KV %,
// host KV %].
json ReadTimeline(const std::string& path, const ReportOptions& o) {
  std::ifstream in(path);
  if (!in) return nullptr;
  json models = json::array();
  std::map<std::string, int> model_ids;
  std::map<std::string, json> segments, memory;
  std::size_t kept = 0, total = 0, lineno = 0;
  std::string line;
  while (std::getline(in, line)) {
    ++lineno;
    if (line.empty()) continue;
    const std::string where = path + ":" + std::to_string(lineno);
    const json j = json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded() || !j.is_object()) throw InputError(where, "not a JSON object");
    const std::string instance = Text(j, "instance", where);
    const std::string model = Text(j, "model", where);
    const int phase = IndexOf(Text(j, "phase", where), kPhases);
    if (phase < 0) throw InputError(where, "field 'phase': unknown phase");
    const int path_index = j.contains("path") ? IndexOf(Text(j, "path", where), kPaths) : -1;
    const double start = Number(j, "start_s", where), end = Number(j, "end_s", where);
    auto [id, added] = model_ids.emplace(model, static_cast<int>(models.size()));
    if (added) models.push_back(model);
    ++total;
    if (kept < o.max_segments) {
      segments[instance].push_back(json::array({start, end, phase, id->second, path_index}));
      ++kept;
    }
    memory[instance].push_back(json::array({end, Percent(Number(j, "kv_used_bytes", where), Number(j, "kv_total_bytes", where)),
                                            Percent(Number(j, "host_kv_used_bytes", where),
                                                    Number(j, "host_kv_capacity_bytes", where))}));
  }
  // Thin each instance's memory series to at most max_memory_points.
  for (auto& [instance, points] : memory) {
    if (points.size() <= o.max_memory_points) continue;
    json thinned = json::array();
    const double stride = static_cast<double>(points.size()) / static_cast<double>(o.max_memory_points);
    for (std::size_t k = 0; k < o.max_memory_points; ++k) thinned.push_back(points[static_cast<std::size_t>(k * stride)]);
    thinned.push_back(points.back());
    points = std::move(thinned);
  }
  json out;
  out["models"] = models;
  out["instances"] = segments;
  out["memory"] = memory;
  out["segments_total"] = total;
  out["segments_shown"] = kept;
  return out;
}

}  // namespace

json BuildReportData(const ReportOptions& o) {
  if (o.summaries.empty() && o.loaded.empty()) throw InputError("--summary", "at least one replay summary is needed");
  std::vector<ReportSummary> all = o.loaded;
  for (const std::string& path : o.summaries) all.push_back(ReportSummary{path, ReadJsonFile(path)});
  json runs = json::array();
  std::vector<std::string> sources;
  for (const auto& [path, summary] : all) {
    sources.push_back(path);
    if (!summary.is_object() || !summary.contains("runs") || !summary["runs"].is_array()) {
      throw InputError(path, "no \"runs\" array (expected a `talaria replay --json` summary)");
    }
    for (std::size_t k = 0; k < summary["runs"].size(); ++k) {
      json run = summary["runs"][k];
      const std::string where = path + ": runs[" + std::to_string(k) + "]";
      if (!run.is_object() || !run.contains("config") || !run["config"].is_string()) {
        throw InputError(where, "not a replay run (no \"config\")");
      }
      if (!run.contains("label") || !run["label"].is_string()) run["label"] = run["config"];
      run["summary"] = path;
      for (const char* key : {"cluster", "trace", "target"}) {
        if (summary.contains(key)) run[key] = summary[key];
      }
      run["paper"] = PaperApplies(o.paper, run);
      run["timeline"] = nullptr;
      if (!o.records_dir.empty()) {
        const std::string label = run["label"].get<std::string>();
        if (label.find("..") == std::string::npos) {
          run["timeline"] = ReadTimeline(o.records_dir + "/" + label + "/timeline.jsonl", o);
        }
      }
      runs.push_back(std::move(run));
    }
  }
  json data;
  data["title"] = o.title;
  data["sources"] = sources;
  data["records"] = o.records_dir;
  data["phases"] = json::array();
  for (std::string_view p : kPhases) data["phases"].push_back(std::string(p));
  data["paths"] = json::array();
  for (std::string_view p : kPaths) data["paths"].push_back(std::string(p));
  data["paper"] = PaperJson();
  data["runs"] = std::move(runs);
  return data;
}

std::string RenderReport(const json& data) {
  // Inside a <script> element nothing may read as "</script": JSON
  // escapes "</" as "<\/" harmlessly.
  std::string text = data.dump(-1, ' ', /*ensure_ascii=*/true, json::error_handler_t::replace);
  for (std::size_t at = text.find("</"); at != std::string::npos; at = text.find("</", at + 3)) text.insert(at + 1, "\\");
  const std::string_view page = web::ReportHtml();
  // In the template's order.
  const std::array<std::pair<std::string_view, std::string_view>, 3> parts = {{
      {"/*TALARIA_CHART_JS*/", web::ChartJs()},
      {"/*TALARIA_DATA*/", text},
      {"/*TALARIA_REPORT_JS*/", web::ReportJs()},
  }};
  std::string out;
  out.reserve(page.size() + text.size() + web::ChartJs().size() + web::ReportJs().size());
  std::size_t from = 0;
  for (const auto& [marker, content] : parts) {
    const std::size_t at = page.find(marker, from);
    TALARIA_CHECK(at != std::string_view::npos, "the report template lacks a marker (or has them out of order)");
    out.append(page.substr(from, at - from));
    out.append(content);
    from = at + marker.size();
  }
  out.append(page.substr(from));
  return out;
}

void WriteReport(const ReportOptions& options, const std::string& path) {
  const std::string html = RenderReport(BuildReportData(options));
  std::ofstream out(path, std::ios::binary);
  if (!out) throw InputError(path, "cannot write the report");
  out << html;
  if (!out.flush()) throw InputError(path, "cannot write the report");
}

}  // namespace talaria
