// talaria report: one self-contained HTML report from replay summaries and
// records (report/report.h).

#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "commands.h"
#include "report/report.h"

namespace talaria::cli {

void AddReportCommand(CLI::App& app) {
  struct Args {
    ReportOptions options;
    std::string out = "report.html";
  };
  auto args = std::make_shared<Args>();
  auto* cmd = app.add_subcommand(
      "report", "Write one self-contained HTML report (SCT/TTFT CDFs with the paper's points, the runs coloured "
                "best to worst, the lease sweep, per-instance Gantt and memory) from `talaria replay --json` "
                "summaries and `--records`");
  cmd->add_option("--summary", args->options.summaries, "replay summary (replay --json FILE); repeat to combine runs")
      ->required()
      ->check(CLI::ExistingFile);
  cmd->add_option("--records", args->options.records_dir,
                  "the replay's --records DIR: each run's timeline.jsonl under DIR/<label>/ gives its Gantt and memory "
                  "plots (without it the report has neither)")
      ->check(CLI::ExistingDirectory);
  cmd->add_option("-o,--out", args->out, "the HTML file to write")->capture_default_str();
  cmd->add_option("--title", args->options.title, "the report's title")->capture_default_str();
  cmd->add_option("--max-segments", args->options.max_segments,
                  "per run, the most timeline segments drawn in the Gantt (the first ones)")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  cmd->add_option("--paper", args->options.paper,
                  "where to mark the paper's published TP=8 points: auto (runs of configs/tp8-three-models.toml on "
                  "traces/swe-fixed-30.jsonl, the paper's experiment), all (every run of a configuration it reports), "
                  "none")
      ->transform(CLI::CheckedTransformer(std::map<std::string, ReportOptions::Paper>{
          {"auto", ReportOptions::Paper::kAuto}, {"all", ReportOptions::Paper::kAll}, {"none", ReportOptions::Paper::kNone}}))
      ->default_str("auto");
  cmd->callback([args] {
    WriteReport(args->options, args->out);
    std::fprintf(stderr, "talaria report: wrote %s\n", args->out.c_str());
  });
}

}  // namespace talaria::cli
