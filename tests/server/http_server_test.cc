#include <utility>  // before Boost 1.74's asio (see http_server.cc)

#include "server/http_server.h"
#include "server/gateway.h"

#include <boost/asio.hpp>
#include <boost/beast.hpp>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <atomic>
#include <set>
#include <thread>

#include "instance/test_profiles.h"
#include "server/http_client.h"
#include "server/openai_encode.h"

namespace talaria {
namespace {

using testing::HttpCall;
using testing::MetricValue;
using testing::Reply;
namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = net::ip::tcp;
using nlohmann::json;

// A chat completion request as a raw client writes it on its own socket
// (the tests that leave early or pipeline cannot use HttpCall).
http::request<http::string_body> RawChat(std::string body, const std::string& session = "") {
  http::request<http::string_body> req{http::verb::post, "/v1/chat/completions", 11};
  req.set(http::field::host, "localhost");
  if (!session.empty()) req.set("X-Session-Id", session);
  req.body() = std::move(body);
  req.prepare_payload();
  return req;
}

// A gateway over one tiny emulated instance, 1,000x faster than real time,
// served on an ephemeral loopback port.
class HttpServerTest : public ::testing::Test {
 protected:
  void StartServer(std::vector<std::string> keys = {}, double time_scale = 1000, double heartbeat_s = 0.25) {
    ModelProfile p = testing::TinyProfile("m");
    p.max_context_tokens = 4096;
    profiles_.Add(p);
    ClusterConfig c;
    c.source = "test";
    c.instances.push_back(testing::TinyInstance("i0", {"m"}));
    c.serve.time_scale = time_scale;
    c.serve.api_keys = std::move(keys);
    c.heartbeat_s = heartbeat_s;
    // Emulated time runs 1,000x faster than the wall, so a slow (sanitizer)
    // build looks overloaded to Eq.5 admission; these tests check the API,
    // not shedding, so the gateway queues instead of answering 429.
    c.router.admission_control = false;
    c.router.stale_after_s = 1e6;  // a heartbeat is 0.25 ms of wall time at this scale
    if (lease_tau_s_ > 0) c.router.lease_tau_s = lease_tau_s_;
    gateway_ = std::make_unique<Gateway>(c, profiles_);
    gateway_->Start();
    server_ = std::make_unique<HttpServer>(*gateway_, "127.0.0.1", 0);
    port_ = server_->Start();
  }

  void TearDown() override {
    if (server_) server_->Stop();
    if (gateway_) gateway_->Stop();
  }

  Reply Call(http::verb verb, const std::string& target, const std::string& body = "",
             const testing::Headers& headers = {}) {
    return HttpCall(port_, verb, target, body, headers);
  }

  Reply Chat(const std::string& body, const std::string& session = "", const std::string& key = "") {
    std::vector<std::pair<std::string, std::string>> headers;
    if (!session.empty()) headers.emplace_back("X-Session-Id", session);
    if (!key.empty()) headers.emplace_back("Authorization", "Bearer " + key);
    return Call(http::verb::post, "/v1/chat/completions", body, headers);
  }

  double lease_tau_s_ = 0;  // > 0: the router's lease timeout
  ProfileSet profiles_;
  std::unique_ptr<Gateway> gateway_;
  std::unique_ptr<HttpServer> server_;
  std::uint16_t port_ = 0;
};

TEST_F(HttpServerTest, HealthAndModels) {
  StartServer();
  EXPECT_EQ(Call(http::verb::get, "/health").status, 200);
  EXPECT_EQ(Call(http::verb::head, "/health").status, 200);  // load balancers probe with HEAD
  const Reply models = Call(http::verb::get, "/v1/models");
  ASSERT_EQ(models.status, 200);
  EXPECT_EQ(models.Json()["data"][0]["id"], "m");
  EXPECT_EQ(Call(http::verb::get, "/nope").status, 404);
}

TEST_F(HttpServerTest, TelemetryShowsWhatTheRouterReads) {
  // No heartbeat of its own: a later one's delta snapshot, with nothing
  // changed, would list no sessions.
  StartServer({}, 1000, /*heartbeat_s=*/1e5);
  ASSERT_EQ(Chat(R"({"model":"m","max_tokens":2,"messages":[{"role":"user","content":"x"}]})", "tele").status, 200);
  gateway_->Heartbeat();  // the router's view is the last heartbeat's: take one after the call
  const Reply r = Call(http::verb::get, "/v1/telemetry");
  ASSERT_EQ(r.status, 200);
  const json t = r.Json()["instances"][0];
  EXPECT_EQ(t["instance"], "i0");
  EXPECT_TRUE(t["healthy"].get<bool>());
  EXPECT_GE(t["version"].get<int>(), 1);
  EXPECT_EQ(t["models"][0]["name"], "m");
  EXPECT_TRUE(t["models"][0]["active"].get<bool>());
  EXPECT_GT(t["kv_total_bytes"].get<std::int64_t>(), 0);
  ASSERT_EQ(t["sessions"].size(), 1u);  // the session's KV stays on device
  EXPECT_EQ(t["sessions"].begin().value()["state"], "device");
}

TEST_F(HttpServerTest, ChatCompletionAndASessionContinuationHitsTheCache) {
  StartServer();
  const std::string turn1 = R"({"model":"m","max_tokens":8,"messages":[{"role":"system","content":")" +
                            std::string(300, 's') + R"("},{"role":"user","content":"fix the bug"}]})";
  const Reply a = Chat(turn1, "task-1");
  ASSERT_EQ(a.status, 200) << a.body;
  const json ja = a.Json();
  EXPECT_EQ(ja["object"], "chat.completion");
  const std::string answer = ja["choices"][0]["message"]["content"];
  EXPECT_NE(answer.find("filler"), std::string::npos);  // sim engine: deterministic filler
  EXPECT_EQ(ja["usage"]["completion_tokens"], 8);
  const std::int64_t prompt1 = ja["usage"]["prompt_tokens"];
  EXPECT_GT(prompt1, 300);
  EXPECT_EQ(ja["usage"]["prompt_tokens_details"]["cached_tokens"], 0);

  json turn2 = json::parse(turn1);
  turn2["messages"].push_back({{"role", "assistant"}, {"content", answer}});
  turn2["messages"].push_back({{"role", "tool"}, {"content", "tests pass"}});
  const Reply b = Chat(turn2.dump(), "task-1");
  ASSERT_EQ(b.status, 200) << b.body;
  const std::int64_t cached = b.Json()["usage"]["prompt_tokens_details"]["cached_tokens"];
  EXPECT_GT(cached, 256);            // the previous prompt's full blocks
  EXPECT_LT(cached, prompt1 + 64);
  // Another tenant's identical session id is a different session.
  const Reply c = Chat(turn2.dump(), "task-1-other");
  EXPECT_EQ(c.Json()["usage"]["prompt_tokens_details"]["cached_tokens"], 0);
}

// The session header aliases other gateways use name the session as
// X-Session-Id does: a continuation under each finds its cached prefix.
TEST_F(HttpServerTest, SessionHeaderAliasesNameTheSession) {
  StartServer();
  const std::string turn1 = R"({"model":"m","max_tokens":8,"messages":[{"role":"system","content":")" +
                            std::string(300, 's') + R"("},{"role":"user","content":"go"}]})";
  for (const char* header : {"X-Dynamo-Session-ID", "X-SMG-Routing-Key"}) {
    SCOPED_TRACE(header);
    const std::string session = std::string("alias-") + header;
    const Reply a = Call(http::verb::post, "/v1/chat/completions", turn1, {{header, session}});
    ASSERT_EQ(a.status, 200) << a.body;
    json turn2 = json::parse(turn1);
    turn2["messages"].push_back({{"role", "assistant"}, {"content", a.Json()["choices"][0]["message"]["content"]}});
    turn2["messages"].push_back({{"role", "user"}, {"content", "next"}});
    const Reply b = Call(http::verb::post, "/v1/chat/completions", turn2.dump(), {{header, session}});
    ASSERT_EQ(b.status, 200) << b.body;
    EXPECT_GT(b.Json()["usage"]["prompt_tokens_details"]["cached_tokens"].get<std::int64_t>(), 256);
  }
}

TEST_F(HttpServerTest, StreamingSendsServerSentEventsEndingWithDone) {
  StartServer();
  const Reply r = Chat(R"({"model":"m","max_tokens":5,"stream":true,"messages":[{"role":"user","content":"hi"}]})");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_NE(r.body.find("data: {"), std::string::npos);
  EXPECT_NE(r.body.find("chat.completion.chunk"), std::string::npos);
  EXPECT_NE(r.body.find(R"("role":"assistant")"), std::string::npos);
  EXPECT_NE(r.body.find(R"("finish_reason":"length")"), std::string::npos);
  EXPECT_EQ(r.body.rfind("data: [DONE]\n\n"), r.body.size() - 14);
}

TEST_F(HttpServerTest, BadRequestsGetOpenAiErrorBodies) {
  StartServer();
  const Reply malformed = Chat("{\"model\":");
  EXPECT_EQ(malformed.status, 400);
  EXPECT_TRUE(malformed.Json()["error"]["param"].is_null());
  const Reply missing = Chat(R"({"model":"m"})");
  EXPECT_EQ(missing.status, 400);
  EXPECT_EQ(missing.Json()["error"]["param"], "messages");
  const Reply unknown = Chat(R"({"model":"gpt-9","messages":[{"role":"user","content":"x"}]})");
  EXPECT_EQ(unknown.status, 404);
  EXPECT_EQ(unknown.Json()["error"]["code"], "model_not_found");
  const Reply too_long = Chat(R"({"model":"m","max_tokens":32000,"messages":[{"role":"user","content":"x"}]})");
  EXPECT_EQ(too_long.status, 400);
  EXPECT_EQ(too_long.Json()["error"]["code"], "context_length_exceeded");
  // A session id that is not printable UTF-8 is refused, naming the header,
  // and telemetry (which lists session ids) keeps answering.
  const Reply bad_session = Chat(R"({"model":"m","messages":[{"role":"user","content":"x"}]})", "ab\xff\xfe");
  EXPECT_EQ(bad_session.status, 400);
  EXPECT_EQ(bad_session.Json()["error"]["param"], "X-Session-Id");
  EXPECT_EQ(Call(http::verb::get, "/v1/telemetry").status, 200);
}

// A streaming client that leaves mid-stream frees its call: counted failed,
// never completed, and its session's device KV is gone.
TEST_F(HttpServerTest, ClientDisconnectMidStreamCancelsTheCall) {
  StartServer();
  {
    net::io_context io;
    tcp::socket socket(io);
    socket.connect({net::ip::make_address("127.0.0.1"), port_});
    http::write(socket,
                RawChat(R"({"model":"m","max_tokens":3000,"stream":true,"messages":[{"role":"user","content":"long"}]})",
                        "leaver"));
    char first[256];
    socket.read_some(net::buffer(first));  // the headers and a chunk or two
    socket.close();                          // then leave
  }
  // The server notices at its next write.
  EXPECT_TRUE(testing::Eventually([&] { return gateway_->metrics().failed.load() == 1; }));
  const std::string metrics = Call(http::verb::get, "/metrics").body;
  EXPECT_EQ(MetricValue(metrics, "talaria_calls_failed_total"), 1u);
  EXPECT_EQ(MetricValue(metrics, "talaria_calls_completed_total"), 0u);
  EXPECT_EQ(MetricValue(metrics, "talaria_calls_accepted_total"), 1u);
}

// A client that leaves while it waits for a call (not streaming, or a
// stream before its first token) gets it cancelled: counted failed, never
// completed (it used to run to its end). 4,000 tokens at time scale 10 take
// about 4 s of wall time; the server notices the close at once.
TEST_F(HttpServerTest, AClientThatLeavesWhileWaitingHasItsCallCancelled) {
  StartServer({}, 10);
  for (const char* stream : {"false", "true"}) {
    SCOPED_TRACE(stream);
    net::io_context io;
    tcp::socket socket(io);
    socket.connect({net::ip::make_address("127.0.0.1"), port_});
    http::write(socket, RawChat(std::string(R"({"model":"m","max_tokens":4000,"stream":)") + stream +
                                R"(,"messages":[{"role":"user","content":"x"}]})"));
    socket.close();  // before any answer
  }
  EXPECT_TRUE(testing::Eventually([&] { return gateway_->metrics().failed.load() == 2; }));
  const std::string metrics = Call(http::verb::get, "/metrics").body;
  EXPECT_EQ(MetricValue(metrics, "talaria_calls_failed_total"), 2u);
  EXPECT_EQ(MetricValue(metrics, "talaria_calls_completed_total"), 0u);
  EXPECT_EQ(MetricValue(metrics, "talaria_calls_accepted_total"), 2u);
}

// Bytes that reach a waiting call's socket are a pipelined request, not a
// hang-up: the watch peeks at them and leaves them for the next read, so
// both calls are answered in order. The second request is written only
// once the first call is accepted (400 tokens at time scale 10 take about
// 0.4 s), so it arrives while the first is being watched.
TEST_F(HttpServerTest, APipelinedRequestIsNotTakenForAHangup) {
  StartServer({}, 10);
  net::io_context io;
  tcp::socket socket(io);
  socket.connect({net::ip::make_address("127.0.0.1"), port_});
  const auto request = [](int max_tokens) {
    return RawChat(R"({"model":"m","max_tokens":)" + std::to_string(max_tokens) +
                   R"(,"messages":[{"role":"user","content":"x"}]})");
  };
  http::write(socket, request(400));
  ASSERT_TRUE(testing::Eventually([&] { return gateway_->metrics().accepted.load() == 1; }));
  http::write(socket, request(4));
  beast::flat_buffer buffer;
  for (int k = 0; k < 2; ++k) {
    http::response<http::string_body> res;
    http::read(socket, buffer, res);
    EXPECT_EQ(res.result_int(), 200) << res.body();
  }
  EXPECT_EQ(gateway_->metrics().completed.load(), 2u);
  EXPECT_EQ(gateway_->metrics().failed.load(), 0u);
}

// Under concurrent load, with some clients leaving mid-stream, every
// accepted call ends as completed or failed.
TEST_F(HttpServerTest, UnderLoadAcceptedEqualsCompletedPlusFailed) {
  StartServer();
  std::vector<std::thread> clients;
  std::atomic<int> ok{0};
  for (int t = 0; t < 8; ++t) {
    clients.emplace_back([&, t] {
      for (int k = 0; k < 4; ++k) {
        const std::string session = "load-" + std::to_string(t);
        const bool stream = (t + k) % 3 == 0;
        const std::string body = std::string(R"({"model":"m","max_tokens":)") + (stream ? "400" : "20") +
                                 R"(,"stream":)" + (stream ? "true" : "false") +
                                 R"(,"messages":[{"role":"user","content":"turn )" + std::to_string(k) + R"("}]})";
        if (stream && t % 2 == 0) {  // leave early
          net::io_context io;
          tcp::socket socket(io);
          socket.connect({net::ip::make_address("127.0.0.1"), port_});
          http::write(socket, RawChat(body, session));
          char some[64];
          socket.read_some(net::buffer(some));
          continue;  // the socket closes here
        }
        if (Chat(body, session).status == 200) ++ok;
      }
    });
  }
  for (auto& c : clients) c.join();
  // A leaver is noticed at its next token.
  const ServerMetrics& m = gateway_->metrics();
  EXPECT_TRUE(testing::Eventually(
      [&] { return m.accepted.load() == m.completed.load() + m.failed.load(); }, std::chrono::seconds(20)));
  const std::string metrics = Call(http::verb::get, "/metrics").body;
  const auto accepted = MetricValue(metrics, "talaria_calls_accepted_total");
  EXPECT_EQ(accepted, 32u);
  EXPECT_EQ(accepted, MetricValue(metrics, "talaria_calls_completed_total") +
                          MetricValue(metrics, "talaria_calls_failed_total"));
  EXPECT_EQ(ok.load(), 32 - 6);  // every client that stayed (all but 6 leavers) got its answer
}

// GET /v1/timeline: what the instance's GPUs did, as segments after a
// cursor; a hostile cursor is a 400 that names the parameter.
TEST_F(HttpServerTest, TimelineShowsWhatTheGpusDidAfterACursor) {
  StartServer();
  ASSERT_EQ(Chat(R"({"model":"m","max_tokens":4,"messages":[{"role":"user","content":"x"}]})", "tl").status, 200);
  const Reply r = Call(http::verb::get, "/v1/timeline");
  ASSERT_EQ(r.status, 200) << r.body;
  const json i0 = r.Json()["instances"][0];
  EXPECT_EQ(i0["instance"], "i0");
  json all = i0["segments"];
  if (!i0["open"].is_null()) all.push_back(i0["open"]);
  std::set<std::string> phases;
  for (const json& s : all) phases.insert(s["phase"].get<std::string>());
  EXPECT_TRUE(phases.count("prefill")) << all.dump();
  EXPECT_TRUE(phases.count("decode")) << all.dump();
  EXPECT_GE(i0["now_s"].get<double>(), all.back()["end_s"].get<double>());
  if (!i0["segments"].empty()) {
    const auto last = i0["segments"].back()["seq"].get<std::uint64_t>();
    const json after = Call(http::verb::get, "/v1/timeline?after=" + std::to_string(last)).Json();
    for (const json& s : after["instances"][0]["segments"]) EXPECT_GT(s["seq"].get<std::uint64_t>(), last);
  }
  for (const char* bad : {"/v1/timeline?after=x", "/v1/timeline?after=-1", "/v1/timeline?after=1,2",
                          "/v1/timeline?after=99999999999999999999999"}) {
    const Reply e = Call(http::verb::get, bad);
    EXPECT_EQ(e.status, 400) << bad;
    EXPECT_NE(e.Json()["error"]["message"].get<std::string>().find("'after'"), std::string::npos) << e.body;
  }
}

// Hint headers: a good tool time is taken, a bad one is a 400 naming the
// header (docs/serving.md "Agent hints").
TEST_F(HttpServerTest, AgentHintHeadersAreCheckedAtTheDoor) {
  StartServer();
  const std::string body = R"({"model":"m","max_tokens":2,"messages":[{"role":"user","content":"x"}]})";
  const auto post = [&](const char* value) {
    return Call(http::verb::post, "/v1/chat/completions", body,
                {{"X-Session-Id", "h"}, {"X-Expected-Tool-Seconds", value}, {"X-Session-End", "false"}});
  };
  EXPECT_EQ(post("2.5").status, 200);
  for (const char* bad : {"-1", "soon", "1e6", "nan"}) {
    const Reply r = post(bad);
    EXPECT_EQ(r.status, 400) << bad;
    EXPECT_EQ(r.Json()["error"]["param"], "X-Expected-Tool-Seconds") << r.body;
  }
  const Reply in_body = Chat(
      R"({"model":"m","max_tokens":2,"messages":[{"role":"user","content":"x"}],"talaria":{"expected_tool_s":-3}})", "h");
  EXPECT_EQ(in_body.status, 400);
  EXPECT_EQ(in_body.Json()["error"]["param"], "talaria.expected_tool_s");
}

// The dashboard page and its chart library are built in and served without
// a key; the data they read needs one.
TEST_F(HttpServerTest, DashboardIsBuiltInAndItsDataNeedsAKey) {
  StartServer({"k1"});
  const Reply page = Call(http::verb::get, "/dashboard");
  ASSERT_EQ(page.status, 200);
  EXPECT_NE(page.body.find("<title>Talaria cluster</title>"), std::string::npos);
  EXPECT_NE(page.body.find("/v1/timeline"), std::string::npos);
  const Reply chart = Call(http::verb::get, "/dashboard/chart.js");
  ASSERT_EQ(chart.status, 200);
  EXPECT_NE(chart.body.find("Chart.js v3.9.1"), std::string::npos);
  EXPECT_EQ(Call(http::verb::get, "/v1/timeline").status, 401);
  EXPECT_EQ(Call(http::verb::get, "/v1/timeline", "", {{"Authorization", "Bearer k1"}}).status, 200);
  EXPECT_EQ(Call(http::verb::get, "/dashboard/other").status, 404);
}

// Live leases are listed in the gateway's telemetry, each tenant seeing only
// its own sessions' (the operator, the first key, sees all).
TEST_F(HttpServerTest, TelemetryListsLiveLeasesOnlyToTheirTenant) {
  lease_tau_s_ = 60;  // emulated seconds: a minute of wall time at time scale 1
  StartServer({"op", "k2"}, /*time_scale=*/1);
  const std::string body = R"({"model":"m","max_tokens":2,"messages":[{"role":"user","content":"x"}]})";
  ASSERT_EQ(Chat(body, "s-op", "op").status, 200);
  ASSERT_EQ(Chat(body, "s-k2", "k2").status, 200);
  const json mine = Call(http::verb::get, "/v1/telemetry", "", {{"Authorization", "Bearer k2"}}).Json()["leases"];
  ASSERT_EQ(mine.size(), 1u) << mine.dump();
  const std::string id = mine.begin().key();
  EXPECT_EQ(id.substr(id.size() - 5), ":s-k2");
  EXPECT_EQ(mine.begin().value()["instance"], "i0");
  EXPECT_EQ(mine.begin().value()["model"], "m");
  EXPECT_GT(mine.begin().value()["remaining_s"].get<double>(), 0);
  EXPECT_LE(mine.begin().value()["remaining_s"].get<double>(), 60.0);
  EXPECT_EQ(mine.begin().value()["units"].get<double>(), 1.0);  // a fixed lease holds a whole unit
  const json all = Call(http::verb::get, "/v1/telemetry", "", {{"Authorization", "Bearer op"}}).Json()["leases"];
  EXPECT_EQ(all.size(), 2u) << all.dump();
}

TEST_F(HttpServerTest, ApiKeysAreRequiredWhenConfigured) {
  StartServer({"k1"});
  const std::string body = R"({"model":"m","max_tokens":2,"messages":[{"role":"user","content":"x"}]})";
  EXPECT_EQ(Chat(body).status, 401);
  EXPECT_EQ(Chat(body, "", "wrong").status, 401);
  EXPECT_EQ(Chat(body, "", "k1").status, 200);
  EXPECT_EQ(Call(http::verb::get, "/v1/models").status, 401);
  EXPECT_EQ(Call(http::verb::get, "/health").status, 200);  // health stays open
}

}  // namespace
}  // namespace talaria

namespace talaria {
namespace {

// Sends a slow call on `socket` (a 900-token prefill: 0.9 s of wall time at
// time scale 1), streaming or not, asking for keep-alives every 0.1 s or not.
void SendSlowCall(tcp::socket& socket, std::uint16_t port, bool stream, bool ask_keepalives) {
  socket.connect({net::ip::make_address("127.0.0.1"), port});
  http::request<http::string_body> req{http::verb::post, "/v1/completions", 11};
  req.set(http::field::host, "localhost");
  if (ask_keepalives) req.set(kKeepaliveHeader, "0.1");
  req.body() = json{{"model", "m"}, {"max_tokens", 2}, {"stream", stream}, {"prompt", std::string(900, 'x')}}.dump();
  req.prepare_payload();
  http::write(socket, req);
}

// A stream that asks for keep-alives (the gateway's links do) gets its head
// at once and a comment line each period until its first token: here a
// 900-token prefill, 0.9 s of wall time at time scale 1, with comments every
// 0.1 s. Without the header nothing is sent before the first token.
TEST_F(HttpServerTest, AStreamThatAsksForKeepalivesGetsCommentsUntilItsFirstToken) {
  StartServer({}, /*time_scale=*/1);
  for (const bool ask : {true, false}) {
    SCOPED_TRACE(ask ? "asked" : "not asked");
    net::io_context io;
    tcp::socket socket(io);
    SendSlowCall(socket, port_, /*stream=*/true, ask);
    std::string seen;
    char buf[4096];
    boost::system::error_code ec;
    while (seen.find("data: {") == std::string::npos && !ec) {
      const std::size_t n = socket.read_some(net::buffer(buf), ec);
      seen.append(buf, n);
    }
    ASSERT_FALSE(ec) << ec.message();
    const std::string before_first = seen.substr(0, seen.find("data: {"));
    std::size_t comments = 0;
    for (std::size_t at = 0; (at = before_first.find(": keepalive", at)) != std::string::npos; ++at) ++comments;
    if (ask) {
      EXPECT_GE(comments, 3u) << before_first;
    } else {
      EXPECT_EQ(comments, 0u) << before_first;
    }
  }
}

// A whole answer (not streaming) that asks for keep-alives gets, once a
// period passes without it, a 200 chunked head and a space each period, then
// its JSON: the body still parses as the answer. Without the header it is
// an ordinary answer with a Content-Length.
TEST_F(HttpServerTest, AWholeAnswerThatAsksForKeepalivesGetsLeadingSpaces) {
  StartServer({}, /*time_scale=*/1);
  for (const bool ask : {true, false}) {
    SCOPED_TRACE(ask ? "asked" : "not asked");
    net::io_context io;
    tcp::socket socket(io);
    SendSlowCall(socket, port_, /*stream=*/false, ask);
    beast::flat_buffer buffer;
    http::response<http::string_body> res;
    http::read(socket, buffer, res);
    ASSERT_EQ(res.result_int(), 200) << res.body();
    const std::string& body = res.body();
    const std::size_t spaces = body.find_first_not_of(' ');
    ASSERT_NE(spaces, std::string::npos) << body;
    if (ask) {
      EXPECT_TRUE(res.chunked());
      EXPECT_GE(spaces, 3u) << body;  // 0.9 s of prefill, a space every 0.1 s
    } else {
      EXPECT_FALSE(res.chunked());
      EXPECT_EQ(spaces, 0u);
    }
    const json answer = json::parse(body);  // leading whitespace is part of the JSON
    EXPECT_EQ(answer["object"], "text_completion") << body;
    EXPECT_EQ(answer["usage"]["completion_tokens"], 2) << body;
  }
}

}  // namespace
}  // namespace talaria
