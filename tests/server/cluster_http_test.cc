// Two instance servers and a gateway on loopback with ephemeral ports, the
// gateway reaching the instances over HTTP exactly as `talaria gateway`
// reaches `talaria instance` processes (tests/e2e/cluster.sh runs the
// processes themselves, and kills one).
#include <utility>  // before Boost 1.74's asio (see http_server.cc)

#include <boost/asio.hpp>
#include <boost/beast.hpp>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <chrono>
#include <thread>

#include "core/error.h"
#include "instance/test_profiles.h"
#include "server/http_client.h"
#include "server/gateway.h"
#include "server/http_server.h"
#include "server/instance_service.h"
#include "server/remote_instance.h"
#include "server/telemetry_json.h"

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

Reply Call(std::uint16_t port, http::verb verb, const std::string& target, const std::string& body = "",
           const testing::Headers& headers = {}) {
  return HttpCall(port, verb, target, body, headers);
}

std::string ChatBody(const std::string& model, const std::string& content, bool stream = false) {
  return json{{"model", model},
              {"max_tokens", 4},
              {"stream", stream},
              {"messages", json::array({json{{"role", "user"}, {"content", content}}})}}
      .dump();
}

// i0 holds model "a" open, i1 holds "b"; each may serve both but keeps one
// open, so a call for the other model would need a full open from storage.
// Emulated time runs 100x faster than the wall. The heartbeat is left to
// the tests (Gateway::Heartbeat), so what the router knows is scripted.
class ClusterHttpTest : public ::testing::Test {
 protected:
  void SetUp() override {
    profiles_.Add(testing::TinyProfile("a"));
    profiles_.Add(testing::TinyProfile("b"));
    cluster_.source = "test";
    cluster_.serve.time_scale = time_scale_;
    cluster_.heartbeat_s = 1e5;          // no automatic heartbeat within a test
    cluster_.router.stale_after_s = 1e6;  // snapshots stay fresh; health decides
    // tau = 1 emulated second is 10 ms of wall time here, less than a busy
    // test machine may take between a reply and the next request.
    cluster_.router.lease_tau_s = 50;
    const char* open[] = {"a", "b"};
    for (int i = 0; i < 2; ++i) {
      InstanceConfig ic = testing::TinyInstance("i" + std::to_string(i), {"a", "b"});
      ic.resident = {open[i]};
      ic.max_resident = 1;
      cluster_.instances.push_back(ic);
      services_[i] = std::make_unique<InstanceService>(ic, profiles_, cluster_.serve);
      services_[i]->Start();
      servers_[i] = std::make_unique<HttpServer>(*services_[i], "127.0.0.1", 0);
      ports_[i] = servers_[i]->Start();
    }
    std::vector<std::unique_ptr<InstanceLink>> links;
    for (int i = 0; i < 2; ++i) {
      // Health is scripted by killing servers (refused at once); a loaded
      // test machine must not turn a slow telemetry answer into a death.
      RemoteLinkOptions options;
      options.connect_timeout_s = options.poll_timeout_s = 10;
      options.poll_key = OperatorKey(cluster_.serve);
      links.push_back(std::make_unique<RemoteInstanceLink>(cluster_.instances[i].name,
                                                           "127.0.0.1:" + std::to_string(ports_[i]), options));
    }
    gateway_ = std::make_unique<Gateway>(cluster_, profiles_, std::move(links));
    gateway_->Start();
    gateway_server_ = std::make_unique<HttpServer>(*gateway_, "127.0.0.1", 0);
    port_ = gateway_server_->Start();
  }

  void TearDown() override {
    gateway_server_.reset();
    gateway_.reset();
    for (int i = 0; i < 2; ++i) Kill(i);
  }

  // The instance's process goes away: its listener and connections close.
  void Kill(int i) {
    servers_[i].reset();
    services_[i].reset();
  }

  Reply Chat(const std::string& body, const std::string& session = "") {
    std::vector<std::pair<std::string, std::string>> headers;
    if (!session.empty()) headers.emplace_back("X-Session-Id", session);
    return Call(port_, http::verb::post, "/v1/chat/completions", body, headers);
  }

  json GatewayTelemetry(int i) { return Call(port_, http::verb::get, "/v1/telemetry").Json()["instances"][i]; }

  double time_scale_ = 100;
  ProfileSet profiles_;
  ClusterConfig cluster_;
  std::unique_ptr<InstanceService> services_[2];
  std::unique_ptr<HttpServer> servers_[2];
  std::uint16_t ports_[2] = {0, 0};
  std::unique_ptr<Gateway> gateway_;
  std::unique_ptr<HttpServer> gateway_server_;
  std::uint16_t port_ = 0;
};

TEST_F(ClusterHttpTest, SecondCallInsideTauLandsOnTheSameInstanceWithCachedTokens) {
  const std::string turn1 = ChatBody("a", std::string(400, 'x'));
  const Reply r1 = Chat(turn1, "s1");
  ASSERT_EQ(r1.status, 200) << r1.body;
  const std::string first = r1.Json()["talaria"]["instance"];
  json turn2 = json::parse(turn1);
  turn2["messages"].push_back({{"role", "assistant"}, {"content", r1.Json()["choices"][0]["message"]["content"]}});
  turn2["messages"].push_back({{"role", "tool"}, {"content", "ok"}});
  const Reply r2 = Chat(turn2.dump(), "s1");  // well inside tau
  ASSERT_EQ(r2.status, 200) << r2.body;
  EXPECT_EQ(r2.Json()["talaria"]["instance"], first);
  EXPECT_EQ(r2.Json()["talaria"]["kv_source"], "device");
  EXPECT_GE(r2.Json()["usage"]["prompt_tokens_details"]["cached_tokens"].get<int>(), 384);
  EXPECT_EQ(MetricValue(Call(port_, http::verb::get, "/metrics").body, "talaria_lease_hits_total"), 1u);
}

TEST_F(ClusterHttpTest, ACallGoesToTheInstanceWhereItsModelIsOpen) {
  for (const char* model : {"a", "b"}) {
    const Reply r = Chat(ChatBody(model, "hello"));
    ASSERT_EQ(r.status, 200) << r.body;
    EXPECT_EQ(r.Json()["talaria"]["instance"], std::string(model) == "a" ? "i0" : "i1");
  }
}

TEST_F(ClusterHttpTest, InstanceServerExposesTelemetryAdminAndMetrics) {
  ASSERT_EQ(Call(ports_[1], http::verb::get, "/health").status, 200);
  const Reply t = Call(ports_[1], http::verb::get, "/v1/telemetry");
  ASSERT_EQ(t.status, 200);
  std::string error;
  const auto snapshot = TelemetryFromJson(t.Json(), error);
  ASSERT_TRUE(snapshot.has_value()) << error;
  EXPECT_EQ(snapshot->instance, "i1");
  ASSERT_EQ(snapshot->models.size(), 2u);
  EXPECT_FALSE(snapshot->models[0].resident);  // "a" is closed on i1
  EXPECT_TRUE(snapshot->models[1].resident);
  EXPECT_GT(snapshot->models[0].full_open_s, 0);

  // Open "a" there; "b" stays open beyond max_resident 1, being active.
  EXPECT_EQ(Call(ports_[1], http::verb::post, "/admin/models/a/open").status, 200);
  const auto after = TelemetryFromJson(Call(ports_[1], http::verb::get, "/v1/telemetry").Json(), error);
  ASSERT_TRUE(after.has_value()) << error;
  EXPECT_TRUE(after->models[0].resident);
  EXPECT_GT(after->version, snapshot->version);
  const Reply busy = Call(ports_[1], http::verb::post, "/admin/models/b/close");  // b is the active model
  EXPECT_EQ(busy.status, 409);
  EXPECT_EQ(busy.Json()["error"]["code"], "model_busy");
  EXPECT_EQ(Call(ports_[1], http::verb::post, "/admin/models/a/close").status, 200);
  EXPECT_EQ(Call(ports_[1], http::verb::post, "/admin/models/zz/open").status, 404);
  EXPECT_EQ(Call(ports_[1], http::verb::post, "/admin/models/a/reboot").status, 404);
  EXPECT_EQ(Call(ports_[1], http::verb::get, "/admin/models/a/open").status, 405);
  // The gateway has no admin operations.
  EXPECT_EQ(Call(port_, http::verb::post, "/admin/models/a/open").status, 404);

  ASSERT_EQ(Chat(ChatBody("b", "count me")).status, 200);
  const std::string m = Call(ports_[1], http::verb::get, "/metrics").body;
  EXPECT_EQ(MetricValue(m, "talaria_calls_completed_total"), 1u);
  EXPECT_EQ(MetricValue(m, "talaria_kv_source_total{source=\"recompute\"}"), 1u);
  EXPECT_NE(m.find("talaria_ttft_seconds_bucket"), std::string::npos);
}

// The instance dies between heartbeats: the call the router sends there
// finds it unreachable before anything streamed and is placed on the other
// instance; the next heartbeat marks it unhealthy, and later calls go
// straight to the survivor.
TEST_F(ClusterHttpTest, AKilledInstanceIsRetriedAroundAndThenExcluded) {
  ASSERT_EQ(Chat(ChatBody("a", "warm the connection")).status, 200);  // a kept-alive connection to i0
  Kill(0);
  const Reply r = Chat(ChatBody("a", "after the kill", /*stream=*/true));
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_NE(r.body.find(R"("instance":"i1")"), std::string::npos);
  std::string m = Call(port_, http::verb::get, "/metrics").body;
  EXPECT_EQ(MetricValue(m, "talaria_calls_retried_total"), 1u);
  EXPECT_EQ(MetricValue(m, "talaria_instance_unreachable_total{instance=\"i0\"}"), 1u);

  gateway_->Heartbeat();
  ASSERT_TRUE(gateway_->AwaitPolls(std::chrono::seconds(20)));
  EXPECT_FALSE(GatewayTelemetry(0)["healthy"].get<bool>());
  EXPECT_TRUE(GatewayTelemetry(1)["healthy"].get<bool>());
  const Reply next = Chat(ChatBody("a", "next"));
  ASSERT_EQ(next.status, 200) << next.body;
  EXPECT_EQ(next.Json()["talaria"]["instance"], "i1");
  m = Call(port_, http::verb::get, "/metrics").body;
  EXPECT_EQ(MetricValue(m, "talaria_calls_retried_total"), 1u);  // no second attempt on i0
  EXPECT_EQ(MetricValue(m, "talaria_calls_accepted_total"),
            MetricValue(m, "talaria_calls_completed_total") + MetricValue(m, "talaria_calls_failed_total"));
}

TEST_F(ClusterHttpTest, NoLiveInstanceGives503ThenAfterAHeartbeat429) {
  Kill(0);
  Kill(1);
  const Reply down = Chat(ChatBody("a", "anyone?"));
  EXPECT_EQ(down.status, 503) << down.body;
  EXPECT_EQ(down.Json()["error"]["code"], "instance_unreachable");
  EXPECT_EQ(down.Json()["error"]["type"], "server_error");

  gateway_->Heartbeat();
  ASSERT_TRUE(gateway_->AwaitPolls(std::chrono::seconds(20)));
  ASSERT_FALSE(GatewayTelemetry(0)["healthy"].get<bool>());
  // No instance is healthy, and no heartbeat (every 1e5 s here) comes within
  // overload_max_wait_s (60 s) to bring one back: the call is shed at once
  // (the wait itself is GatewayWaitTest's, on a manual clock).
  const Reply shed = Chat(ChatBody("a", "anyone now?"));
  EXPECT_EQ(shed.status, 429) << shed.body;
  EXPECT_EQ(shed.retry_after, "1");
  EXPECT_EQ(shed.Json()["error"]["code"], "no_capacity");
  EXPECT_NE(shed.Json()["error"]["message"].get<std::string>().find("(stale); retry later"), std::string::npos)
      << shed.body;
  const std::string m = Call(port_, http::verb::get, "/metrics").body;
  EXPECT_EQ(MetricValue(m, "talaria_calls_waited_total"), 0u);
  EXPECT_EQ(MetricValue(m, "talaria_calls_waiting"), 0u);
  EXPECT_EQ(MetricValue(m, "talaria_calls_accepted_total"), 1u);  // the 503 one; the 429 was never accepted
  EXPECT_EQ(MetricValue(m, "talaria_calls_failed_total"), 1u);
}

TEST_F(ClusterHttpTest, ErrorPathsThroughTheGatewayKeepTheirBodies) {
  const Reply bad = Chat(R"({"model":"a","messages":"hi"})");
  EXPECT_EQ(bad.status, 400);
  EXPECT_EQ(bad.Json()["error"]["param"], "messages");
  const Reply unknown = Chat(ChatBody("gpt-9", "x"));
  EXPECT_EQ(unknown.status, 404);
  EXPECT_EQ(unknown.Json()["error"]["code"], "model_not_found");
}

// With api_keys (docs/serving.md), the gateway's telemetry polls carry the
// operator key (here the first api key), so the instances stay healthy and a
// keyed call is served (the polls used to get 401 and mark every instance
// unhealthy: every call then got 429).
class ClusterHttpKeysTest : public ClusterHttpTest {
 protected:
  void SetUp() override {
    cluster_.serve.api_keys = {"tenant-a", "tenant-b"};
    ClusterHttpTest::SetUp();
  }
};

// Tenants kept apart: a tenant key's /v1/telemetry (gateway and instance)
// lists only its own sessions, the operator key's lists all; /admin takes
// the operator key only. (Any key used to see every tenant's session ids
// and could call /admin.)
class ClusterHttpTenantsTest : public ClusterHttpTest {
 protected:
  void SetUp() override {
    cluster_.serve.api_keys = {"tenant-a", "tenant-b"};
    cluster_.serve.operator_key = "ops";
    ClusterHttpTest::SetUp();
  }
  static testing::Headers Key(const std::string& k) { return {{"Authorization", "Bearer " + k}}; }
  std::vector<std::string> SessionsSeen(std::uint16_t port, const std::string& key) {
    const json t = Call(port, http::verb::get, "/v1/telemetry", "", Key(key)).Json();
    std::vector<std::string> ids;
    auto collect = [&](const json& one) {
      for (const auto& [id, s] : one["sessions"].items()) ids.push_back(id);
    };
    if (t.contains("instances")) {
      for (const json& one : t["instances"]) collect(one);
    } else {
      collect(t);
    }
    return ids;
  }
};

TEST_F(ClusterHttpTenantsTest, ATenantSeesItsOwnSessionsAndOnlyTheOperatorAdministers) {
  for (const char* tenant : {"tenant-a", "tenant-b"}) {
    testing::Headers h = Key(tenant);
    h.emplace_back("X-Session-Id", std::string("s-") + tenant);
    ASSERT_EQ(Call(port_, http::verb::post, "/v1/chat/completions", ChatBody("a", "hello"), h).status, 200);
  }
  gateway_->Heartbeat();
  ASSERT_TRUE(gateway_->AwaitPolls(std::chrono::seconds(20)));
  const std::string scope_a = SessionScope("tenant-a");
  for (std::uint16_t port : {port_, ports_[0]}) {
    SCOPED_TRACE(port == port_ ? "gateway" : "instance");
    const auto a = SessionsSeen(port, "tenant-a");
    ASSERT_FALSE(a.empty());
    for (const auto& id : a) EXPECT_EQ(id.rfind(scope_a, 0), 0u) << id;
    EXPECT_EQ(SessionsSeen(port, "ops").size(), port == port_ ? 2u : a.size() + SessionsSeen(port, "tenant-b").size());
  }
  EXPECT_EQ(Call(ports_[0], http::verb::post, "/admin/models/b/open", "", Key("tenant-a")).status, 403);
  EXPECT_EQ(Call(ports_[0], http::verb::post, "/admin/models/b/open", "", Key("ops")).status, 200);
}

TEST_F(ClusterHttpKeysTest, TelemetryPollsCarryTheOperatorKey) {
  gateway_->Heartbeat();
  ASSERT_TRUE(gateway_->AwaitPolls(std::chrono::seconds(20)));
  const testing::Headers key = {{"Authorization", "Bearer tenant-b"}};
  const json instances = Call(port_, http::verb::get, "/v1/telemetry", "", key).Json()["instances"];
  EXPECT_TRUE(instances[0]["healthy"].get<bool>());
  EXPECT_TRUE(instances[1]["healthy"].get<bool>());
  const Reply r = Call(port_, http::verb::post, "/v1/chat/completions", ChatBody("a", "hello"), key);
  EXPECT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(Call(port_, http::verb::post, "/v1/chat/completions", ChatBody("a", "hello")).status, 401);
}

// In real time (time scale 1) a 60-token stream takes about 0.6 s to decode
// and is under 16 KB; through the gateway its first event reaches the
// client as it is made, not with the rest (the gateway used to relay in
// 16 KB reads: the whole stream arrived at its end).
class ClusterHttpRealTimeTest : public ClusterHttpTest {
 protected:
  void SetUp() override {
    time_scale_ = 1;
    ClusterHttpTest::SetUp();
  }
};

TEST_F(ClusterHttpRealTimeTest, AStreamIsRelayedAsItsEventsArrive) {
  const std::string body = json{{"model", "a"},
                                {"max_tokens", 60},
                                {"stream", true},
                                {"messages", json::array({json{{"role", "user"}, {"content", "go"}}})}}
                               .dump();
  net::io_context io;
  tcp::socket socket(io);
  socket.connect({net::ip::make_address("127.0.0.1"), port_});
  const std::string request = "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                              "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
  net::write(socket, net::buffer(request));
  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  Clock::time_point first_delta{}, done{};
  std::string got;
  char buf[4096];
  while (done == Clock::time_point{}) {
    boost::system::error_code ec;
    const std::size_t n = socket.read_some(net::buffer(buf), ec);
    if (ec) break;
    got.append(buf, n);
    if (first_delta == Clock::time_point{} && got.find("\"content\":\"") != std::string::npos) first_delta = Clock::now();
    if (got.find("[DONE]") != std::string::npos) done = Clock::now();
  }
  ASSERT_NE(done, Clock::time_point{}) << got.substr(0, 500);
  const double total_s = std::chrono::duration<double>(done - start).count();
  const double first_s = std::chrono::duration<double>(first_delta - start).count();
  ASSERT_GT(total_s, 0.4) << "the stream was too short to tell";
  EXPECT_LT(first_s, total_s / 2) << "first delta at " << first_s << " s of " << total_s << " s";
}

TEST(ServeOptionsTest, TheOperatorKeyDefaultsToTheFirstApiKeyAndInstancesAcceptIt) {
  ServeOptions s;
  EXPECT_EQ(OperatorKey(s), "");
  EXPECT_TRUE(AcceptedKeys(s).empty());
  s.api_keys = {"k1", "k2"};
  EXPECT_EQ(OperatorKey(s), "k1");
  s.operator_key = "ops";
  EXPECT_EQ(OperatorKey(s), "ops");
  EXPECT_EQ(AcceptedKeys(s), (std::vector<std::string>{"k1", "k2", "ops"}));
}

TEST(RemoteInstanceLinkTest, RejectsAnAddressThatIsNotIpPort) {
  EXPECT_THROW(RemoteInstanceLink("x", "localhost"), InputError);
  EXPECT_THROW(RemoteInstanceLink("x", "127.0.0.1:0"), InputError);
  EXPECT_THROW(RemoteInstanceLink("x", "127.0.0.1:80x"), InputError);
  EXPECT_NO_THROW(RemoteInstanceLink("x", "127.0.0.1:8101"));
}

TEST(TelemetryJsonTest, RoundTripsAndNamesAMissingField) {
  InstanceTelemetry t;
  t.instance = "i9";
  t.version = 7;
  t.round_estimate_s = 1.5;
  t.kv_total_bytes = 1 << 20;
  ModelTelemetry m;
  m.name = "a";
  m.resident = true;
  m.queued = 3;
  m.switch_in_s = 0.2;
  m.admit_wait_s = 4.5;
  t.models.push_back(m);
  t.session_prefill = true;
  t.hold_wait_scale = 2.5;
  t.busy_fraction = 0.75;
  t.models[0].forced_reopen_s = 13.5;
  t.sessions.emplace("s", CachedPrefix{"a", KvState::kHost, 640});
  std::string error;
  const auto back = TelemetryFromJson(TelemetryToJson(t), error);
  ASSERT_TRUE(back.has_value()) << error;
  EXPECT_EQ(back->instance, "i9");
  EXPECT_EQ(back->version, 7u);
  EXPECT_EQ(back->models[0].queued, 3);
  EXPECT_DOUBLE_EQ(back->models[0].switch_in_s, 0.2);
  EXPECT_DOUBLE_EQ(back->models[0].admit_wait_s, 4.5);
  EXPECT_TRUE(back->session_prefill);
  EXPECT_DOUBLE_EQ(back->hold_wait_scale, 2.5);
  EXPECT_DOUBLE_EQ(back->busy_fraction, 0.75);
  EXPECT_DOUBLE_EQ(back->models[0].forced_reopen_s, 13.5);
  EXPECT_EQ(back->sessions.at("s").state, KvState::kHost);
  EXPECT_EQ(back->sessions.at("s").tokens, 640);

  // The round-wait fields are optional (older instances do not send them).
  json j = TelemetryToJson(t);
  j["models"][0].erase("admit_wait_s");
  j.erase("session_prefill");
  j.erase("hold_wait_scale");
  j.erase("busy_fraction");
  j["models"][0].erase("forced_reopen_s");
  const auto old = TelemetryFromJson(j, error);
  ASSERT_TRUE(old.has_value()) << error;
  EXPECT_EQ(old->models[0].admit_wait_s, 0.0);
  EXPECT_FALSE(old->session_prefill);
  EXPECT_EQ(old->models[0].forced_reopen_s, 0.0);  // its open closes nothing busy
  EXPECT_EQ(old->hold_wait_scale, 1.0);             // W as predicted
  EXPECT_EQ(old->busy_fraction, 0.0);               // unknown, as before two steps

  j = TelemetryToJson(t);
  j["models"][0].erase("queued");
  EXPECT_FALSE(TelemetryFromJson(j, error).has_value());
  EXPECT_NE(error.find("models[].queued"), std::string::npos) << error;
  j = TelemetryToJson(t);
  j["sessions"]["s"]["state"] = "lost";
  EXPECT_FALSE(TelemetryFromJson(j, error).has_value());
  EXPECT_NE(error.find("sessions.s.state"), std::string::npos) << error;
  for (double bad : {0.0, -1.0}) {
    j = TelemetryToJson(t);
    j["hold_wait_scale"] = bad;
    EXPECT_FALSE(TelemetryFromJson(j, error).has_value()) << bad;
    EXPECT_NE(error.find("hold_wait_scale: must be a positive number"), std::string::npos) << error;
  }
}

// An instance's snapshot is input like any other: a number the router would
// compute with is checked for its range, and the error names the field and
// the value. Rounding past a bound is clamped, not refused.
TEST(TelemetryJsonTest, NumbersOutOfRangeAreRefusedByName) {
  InstanceTelemetry t;
  t.instance = "i1";
  t.models.push_back(ModelTelemetry{});
  t.models[0].name = "a";
  t.sessions.emplace("s", CachedPrefix{"a", KvState::kDevice, 64});
  struct Bad {
    std::string pointer;  // a JSON pointer into the snapshot
    json value;
    std::string names;  // what the error says
  };
  const std::vector<Bad> bad = {
      {"/models/0/queued_work_s", -1.0, "models[].queued_work_s: must be a number >= 0 and <= 1e+09, got -1.0"},
      {"/models/0/queued", 2.5, "models[].queued: must be a whole number"},
      {"/models/0/running", -3, "models[].running: must be a whole number >= 0"},
      {"/models/0/prefill_scale", 0.0, "models[].prefill_scale: must be a positive number"},
      {"/models/0/staged_coverage", 1.5, "models[].staged_coverage: must be a number >= 0 and <= 1, got 1.5"},
      {"/busy_fraction", 1.5, "busy_fraction: must be a number >= 0 and <= 1, got 1.5"},
      {"/models/0/switch_in_s", "fast", "models[].switch_in_s: "},
      {"/taken_at_s", 1e300, "taken_at_s: must be a number >= 0 and <= 1e+09"},
      {"/kv_free_bytes", -1, "kv_free_bytes: must be a whole number >= 0"},
      {"/sessions/s/tokens", -5, "sessions.s.tokens: must be a whole number >= 0"},
  };
  std::string error;
  for (const Bad& b : bad) {
    json j = TelemetryToJson(t);
    j[json::json_pointer(b.pointer)] = b.value;
    EXPECT_FALSE(TelemetryFromJson(j, error).has_value()) << b.pointer;
    EXPECT_NE(error.find(b.names), std::string::npos) << error;
  }
  json j = TelemetryToJson(t);
  j["models"][0]["admit_wait_s"] = -1e-12;
  j["models"][0]["staged_coverage"] = 1 + 1e-12;
  const auto rounded = TelemetryFromJson(j, error);
  ASSERT_TRUE(rounded.has_value()) << error;
  EXPECT_EQ(rounded->models[0].admit_wait_s, 0.0);
  EXPECT_EQ(rounded->models[0].staged_coverage, 1.0);
}

}  // namespace
}  // namespace talaria
