#include "report/report.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include <unistd.h>

#include "core/error.h"

namespace talaria {
namespace {

using nlohmann::json;

// A scratch directory per test (ctest runs tests in parallel).
class ReportTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("talaria-report-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_ / "records" / "talaria");
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::string Write(const std::string& name, const std::string& text) {
    const auto path = dir_ / name;
    std::ofstream(path) << text;
    return path.string();
  }
  static std::string Segment(int seq, const char* phase, double start, double end, const char* extra = "") {
    return "{\"instance\":\"w0\",\"seq\":" + std::to_string(seq) + ",\"model\":\"m\",\"phase\":\"" + phase + "\"" + extra +
           ",\"start_s\":" + std::to_string(start) + ",\"end_s\":" + std::to_string(end) +
           ",\"kv_used_bytes\":25,\"kv_total_bytes\":100,\"host_kv_used_bytes\":1,\"host_kv_capacity_bytes\":4}\n";
  }
  std::string Summary(const std::string& label) {
    return Write("summary.json", R"({"cluster":"c.toml","trace":"t.jsonl","runs":[{"config":"talaria","label":")" + label +
                                     R"(","router":"full","load":"medium","tau_s":1,"sct_p50_s":10,"sct_quantiles_s":[1,2,3]}]})");
  }

  std::filesystem::path dir_;
};

TEST_F(ReportTest, ReadsRunsAndTheirTimelines) {
  ReportOptions o;
  o.summaries = {Summary("talaria")};
  o.records_dir = (dir_ / "records").string();
  std::string lines;
  for (int k = 0; k < 10; ++k) lines += Segment(k + 1, k % 2 ? "decode" : "switch", k, k + 1, k % 2 ? "" : R"(,"path":"h2d")");
  Write("records/talaria/timeline.jsonl", lines);
  o.max_segments = 6;
  o.max_memory_points = 4;
  const json data = BuildReportData(o);
  ASSERT_EQ(data["runs"].size(), 1u);
  const json& run = data["runs"][0];
  EXPECT_EQ(run["trace"], "t.jsonl");
  EXPECT_EQ(run["summary"], o.summaries[0]);
  const json& tl = run["timeline"];
  EXPECT_EQ(tl["models"], json::array({"m"}));
  EXPECT_EQ(tl["segments_total"], 10);
  EXPECT_EQ(tl["segments_shown"], 6);
  ASSERT_EQ(tl["instances"]["w0"].size(), 6u);
  // [start, end, phase, model, path]: a switch's path index, -1 elsewhere.
  EXPECT_EQ(tl["instances"]["w0"][0], json::array({0.0, 1.0, 3, 0, 2}));
  EXPECT_EQ(tl["instances"]["w0"][1], json::array({1.0, 2.0, 2, 0, -1}));
  // Memory: thinned to 4 points plus the last; [t, HBM %, host %].
  ASSERT_EQ(tl["memory"]["w0"].size(), 5u);
  EXPECT_EQ(tl["memory"]["w0"][0], json::array({1.0, 25.0, 25.0}));
  EXPECT_EQ(tl["memory"]["w0"].back()[0], 10.0);
  // The paper's published points for the configurations it reports.
  EXPECT_EQ(data["paper"]["talaria"]["sct_p50_s"], 189);
  EXPECT_FALSE(data["paper"]["no-sp"].contains("sct_p95_s"));
}

// The paper's points go beside the runs of its experiment as reproduced
// here, unless asked for everywhere or nowhere.
TEST_F(ReportTest, MarksThePapersPointsBesideItsExperimentOnly) {
  const std::string paper_setup = Write("paper.json", R"({"cluster":"configs/tp8-three-models.toml",
      "trace":"traces/swe-fixed-30.jsonl","runs":[{"config":"talaria","load":"medium"},{"config":"no-sp","load":"high"}]})");
  ReportOptions o;
  o.summaries = {paper_setup, Summary("talaria")};
  json runs = BuildReportData(o)["runs"];
  EXPECT_EQ(runs[0]["paper"], true);
  EXPECT_EQ(runs[1]["paper"], false);  // another load than the paper's
  EXPECT_EQ(runs[2]["paper"], false);  // another cluster and trace
  o.paper = ReportOptions::Paper::kAll;
  runs = BuildReportData(o)["runs"];
  EXPECT_EQ(runs[2]["paper"], true);
  o.paper = ReportOptions::Paper::kNone;
  runs = BuildReportData(o)["runs"];
  EXPECT_EQ(runs[0]["paper"], false);
}

TEST_F(ReportTest, ARunWithoutRecordsHasNoTimeline) {
  ReportOptions o;
  o.summaries = {Summary("elsewhere")};
  o.records_dir = (dir_ / "records").string();
  EXPECT_TRUE(BuildReportData(o)["runs"][0]["timeline"].is_null());
}

TEST_F(ReportTest, BadInputNamesTheFileAndLine) {
  ReportOptions o;
  o.summaries = {Write("bad.json", "{not json")};
  try {
    BuildReportData(o);
    FAIL() << "no error";
  } catch (const InputError& e) {
    EXPECT_EQ(e.where(), o.summaries[0]);
  }
  o.summaries = {Write("norun.json", R"({"runs":[{"sct_p50_s":1}]})")};
  EXPECT_THROW(BuildReportData(o), InputError);
  o.summaries = {Summary("talaria")};
  o.records_dir = (dir_ / "records").string();
  Write("records/talaria/timeline.jsonl", Segment(1, "decode", 0, 1) + "{\"instance\":\"w0\",\"model\":\"m\",\"phase\":\"nap\"}\n");
  try {
    BuildReportData(o);
    FAIL() << "no error";
  } catch (const InputError& e) {
    EXPECT_EQ(e.where(), (dir_ / "records/talaria/timeline.jsonl").string() + ":2");
    EXPECT_NE(std::string(e.what()).find("phase"), std::string::npos) << e.what();
  }
  EXPECT_THROW(BuildReportData(ReportOptions{}), InputError);
}

// The page inlines Chart.js, the data and the script; no text from the
// inputs can end the data's <script> element.
TEST_F(ReportTest, RendersOneSelfContainedPage) {
  ReportOptions o;
  o.summaries = {Summary("a</script><script>alert(1)</script>")};
  const std::string html = RenderReport(BuildReportData(o));
  EXPECT_NE(html.find("Chart.js v3.9.1"), std::string::npos);
  EXPECT_NE(html.find("const DATA = {"), std::string::npos);
  EXPECT_NE(html.find("document.body.dataset.ready"), std::string::npos);
  EXPECT_EQ(html.find("/*TALARIA_"), std::string::npos);
  EXPECT_EQ(html.find("alert(1)</script>"), std::string::npos);
  EXPECT_NE(html.find(R"(a<\/script><script>alert(1)<\/script>)"), std::string::npos);
  EXPECT_EQ(html.find("src=\"http"), std::string::npos);
}

TEST_F(ReportTest, WriteReportSaysWhenItCannotWrite) {
  ReportOptions o;
  o.summaries = {Summary("talaria")};
  EXPECT_THROW(WriteReport(o, (dir_ / "no/such/dir/r.html").string()), InputError);
  WriteReport(o, (dir_ / "r.html").string());
  EXPECT_GT(std::filesystem::file_size(dir_ / "r.html"), 100000u);
}

}  // namespace
}  // namespace talaria
