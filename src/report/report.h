// `talaria report` (and `talaria replay --report`): one self-contained HTML
// file from replay summaries (`replay --json`) and their records
// (`replay --records`): SCT and TTFT CDFs per run with the paper's published
// points marked, the runs as a table coloured best to worst within each
// load, the lease-timeout sweep when the runs vary tau, and per run a Gantt
// of each instance's slots, switches and holds with HBM and host-KV
// occupancy over time (from timeline.jsonl). Chart.js and the script are
// inlined: the file opens offline.
#pragma once

#include <cstddef>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace talaria {

// A summary already in memory (`talaria replay --report`), named `source`.
struct ReportSummary {
  std::string source;
  nlohmann::json summary;
};

struct ReportOptions {
  std::vector<std::string> summaries;  // replay --json files
  std::vector<ReportSummary> loaded;   // and summaries in memory; at least one in all
  std::string records_dir;             // replay --records DIR; "" for none
  std::string title = "Talaria replay report";
  // Per run: at most this many timeline segments in the Gantt (the first
  // ones; the report says when it cut), and memory points per instance.
  std::size_t max_segments = 20000;
  std::size_t max_memory_points = 2000;
  // Where the paper's published points are marked: kAuto on the runs of the
  // paper's experiment as this project reproduces it (the TP=8 cluster
  // configs/tp8-three-models.toml on traces/swe-fixed-30.jsonl, any
  // ablation), kAll on every run whose configuration the paper reports,
  // kNone nowhere.
  enum class Paper { kAuto, kAll, kNone };
  Paper paper = Paper::kAuto;
};

// Reads every input. Throws InputError naming the file (and line) of
// anything malformed; a run whose records are absent gets no Gantt.
nlohmann::json BuildReportData(const ReportOptions& options);

// The page for `data` (BuildReportData's form).
std::string RenderReport(const nlohmann::json& data);

// BuildReportData + RenderReport into `path`; InputError if it cannot write.
void WriteReport(const ReportOptions& options, const std::string& path);

}  // namespace talaria
