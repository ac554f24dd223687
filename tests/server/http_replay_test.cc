// The closed-loop replay over HTTP (server/http_replay.h) against a real
// instance server on loopback: a session that starts, or returns, after
// the server closed its idle connection still has all its calls served,
// and a session the transport ends is counted, never dropped; both leave a
// record per call (--records).
#include <utility>  // before Boost 1.74's asio (see http_server.cc)

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/error.h"
#include "instance/test_profiles.h"
#include "server/http_replay.h"
#include "server/http_server.h"
#include "server/instance_service.h"
#include "server/scripted_instance.h"

namespace talaria {
namespace {

using nlohmann::json;
using testing::ScriptedInstance;

// The replay's call records in `dir`, one object a line.
std::vector<json> ReadRecords(const std::string& dir) {
  std::ifstream in(dir + "/calls.jsonl");
  std::vector<json> out;
  for (std::string line; std::getline(in, line);) out.push_back(json::parse(line));
  return out;
}

std::string FreshDir(const std::string& name) {
  const std::string dir = ::testing::TempDir() + "/" + name;
  std::filesystem::remove_all(dir);
  return dir;
}

// One session's calls: the first `start_s` after the origin, each later
// one `gap_s` after its previous call ended (trace seconds).
void AddSession(Trace& trace, const std::string& id, double start_s, double gap_s, int calls) {
  for (int k = 0; k < calls; ++k) {
    TraceCall c;
    c.session_id = InternedString(id);
    c.model = InternedString("m");
    c.call_index = k;
    c.prompt_tokens = 16 + 8 * k;
    c.prefix_tokens = k == 0 ? 0 : 16 + 8 * (k - 1);
    c.output_tokens = 2;
    c.gap_s = k == 0 ? start_s : gap_s;
    c.token_seed = 1 + trace.calls.size();
    trace.calls.push_back(c);
  }
}

TEST(HttpReplayTest, SessionsOutlastTheServersIdleTimeout) {
  ProfileSet profiles;
  profiles.Add(testing::TinyProfile("m"));
  ServeOptions serve;
  serve.time_scale = 100;  // 100 trace seconds a wall second
  InstanceService service(testing::TinyInstance("i0", {"m"}), profiles, serve);
  service.Start();
  HttpLimits limits;
  limits.idle_timeout_s = 0.1;  // wall seconds
  HttpServer server(service, "127.0.0.1", 0, nullptr, limits);
  const std::uint16_t port = server.Start();

  // "early" starts at once, with short gaps; "late" starts after the idle
  // timeout (its connection, opened at the start, would be closed by then)
  // and waits it out between its calls too.
  Trace trace;
  AddSession(trace, "early", 0, 1, 2);
  AddSession(trace, "late", 40, 30, 3);
  HttpReplayOptions o;
  o.target = "http://127.0.0.1:" + std::to_string(port);
  o.time_scale = serve.time_scale;
  o.gap_cap_s = 100;
  o.records_dir = FreshDir("http-replay-records") + "/http";  // created by the replay
  const ReplayResult r = ReplayOverHttp(trace, o);
  EXPECT_EQ(r.calls_completed, 5);
  EXPECT_EQ(r.rejected, 0);
  EXPECT_EQ(r.sct_s.count(), 2u);

  // A record per call, in trace seconds: its TTFT from its intended
  // release, and each later call released its gap after the previous ended.
  const std::vector<json> records = ReadRecords(o.records_dir);
  ASSERT_EQ(records.size(), 5u);
  std::map<std::string, std::map<int, json>> by_session;
  for (const json& j : records) {
    EXPECT_EQ(j.at("status"), 200);
    EXPECT_EQ(j.at("model"), "m");
    const double intended = j.at("intended_enqueue_s"), first = j.at("first_token_s"), done = j.at("finished_s");
    EXPECT_NEAR(j.at("ttft_s").get<double>(), first - intended, 1e-9);
    EXPECT_LE(intended, first);
    EXPECT_LE(first, done);
    by_session[j.at("session_id")][j.at("call_index")] = j;
  }
  ASSERT_EQ(by_session["early"].size(), 2u);
  ASSERT_EQ(by_session["late"].size(), 3u);
  EXPECT_GE(by_session["late"][0].at("intended_enqueue_s").get<double>(), 40.0 - 1e-6);
  for (int k = 1; k < 3; ++k) {
    EXPECT_GE(by_session["late"][k].at("intended_enqueue_s").get<double>(),
              by_session["late"][k - 1].at("finished_s").get<double>() + 30.0 - 1e-6);
  }
  server.Stop();
  service.Stop();
}

TEST(HttpReplayTest, ASessionTheTransportEndsIsCountedNotDropped) {
  // Answers the first session's first call, then closes the connection
  // before the next call's answer; a fresh connection is closed at once.
  const std::string body = "data: {\"choices\":[{\"text\":\"x\"}]}\n\ndata: [DONE]\n\n";
  ScriptedInstance instance(std::vector<ScriptedInstance::Script>{
      [&](boost::asio::ip::tcp::socket& s) {
        ScriptedInstance::Write(s, "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nContent-Length: " +
                                       std::to_string(body.size()) + "\r\n\r\n" + body);
        boost::beast::flat_buffer buffer;
        boost::beast::http::request<boost::beast::http::string_body> next;
        boost::system::error_code ec;
        boost::beast::http::read(s, buffer, next, ec);  // the second call, never answered
        s.close();
      },
      [](boost::asio::ip::tcp::socket& s) { s.close(); }});
  Trace trace;
  AddSession(trace, "s", 0, 0, 3);
  HttpReplayOptions o;
  o.target = "http://" + instance.address();
  o.records_dir = FreshDir("http-replay-lost");
  const ReplayResult r = ReplayOverHttp(trace, o);
  EXPECT_EQ(r.calls_completed, 1);
  EXPECT_EQ(r.rejected, 2);  // the call in hand and the one after it
  EXPECT_EQ(r.rejected_by_reason.at("transport"), 2);
  EXPECT_EQ(r.calls_completed + r.rejected, r.calls_total);

  // Every call has its record: the lost ones say so, and only the one that
  // was released has a release time.
  const std::vector<json> records = ReadRecords(o.records_dir);
  ASSERT_EQ(records.size(), 3u);
  EXPECT_EQ(records[0].at("call_index"), 0);
  EXPECT_EQ(records[0].at("status"), 200);
  for (int k = 1; k < 3; ++k) {
    EXPECT_EQ(records[k].at("call_index"), k);
    EXPECT_EQ(records[k].at("status"), 0);
    EXPECT_EQ(records[k].at("error").get<std::string>().rfind("transport: ", 0), 0u);
  }
  EXPECT_TRUE(records[1].contains("intended_enqueue_s"));
  EXPECT_FALSE(records[2].contains("intended_enqueue_s"));
}

TEST(HttpReplayTest, RecordsThatCannotBeWrittenAreAnError) {
  const std::string file = FreshDir("http-replay-not-a-dir");
  std::ofstream(file) << "a file where the records directory should go\n";
  Trace trace;
  AddSession(trace, "s", 0, 0, 1);
  HttpReplayOptions o;
  o.target = "http://127.0.0.1:1";
  o.records_dir = file;
  EXPECT_THROW(ReplayOverHttp(trace, o), InputError);
}

}  // namespace
}  // namespace talaria
