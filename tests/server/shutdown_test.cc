// An ordered shutdown (HttpServer::Drain): accepting stops, calls in flight
// finish within the drain time, the rest end with 503 shutting_down (a
// stream: an error event, then [DONE]), idle kept-alive connections close,
// and every accepted call is counted completed or failed. (It used to cut
// streams with no terminator, and a process crashed tearing down.)
#include <utility>  // before Boost 1.74's asio (see http_server.cc)

#include "server/http_server.h"
#include "server/gateway.h"

#include <boost/asio.hpp>
#include <boost/beast.hpp>
#include <gtest/gtest.h>

#include <future>
#include <string>
#include <thread>

#include "instance/test_profiles.h"
#include "server/http_client.h"

namespace talaria {
namespace {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = net::ip::tcp;
using testing::HttpCall;

// A gateway over one tiny emulated instance: a token takes 10 ms of
// emulated time, so at time scale 1 a call of 4,000 tokens runs 40 s.
class ShutdownTest : public ::testing::Test {
 protected:
  void Start(double time_scale) {
    profiles_.Add(testing::TinyProfile("m"));
    ClusterConfig c;
    c.source = "test";
    c.instances.push_back(testing::TinyInstance("i0", {"m"}));
    c.serve.time_scale = time_scale;
    c.router.admission_control = false;
    c.heartbeat_s = 1e5;
    c.router.stale_after_s = 1e6;
    gateway_ = std::make_unique<Gateway>(c, profiles_);
    gateway_->Start();
    server_ = std::make_unique<HttpServer>(*gateway_, "127.0.0.1", 0);
    port_ = server_->Start();
  }
  void TearDown() override {
    // The order a process shuts down in: drain, service, server.
    if (gateway_) gateway_->Stop();
    server_.reset();
    gateway_.reset();
  }

  // Sends a chat request on a fresh connection and returns it.
  std::unique_ptr<tcp::socket> Send(int max_tokens, bool stream) {
    auto socket = std::make_unique<tcp::socket>(io_);
    socket->connect({net::ip::make_address("127.0.0.1"), port_});
    http::request<http::string_body> req{http::verb::post, "/v1/chat/completions", 11};
    req.set(http::field::host, "x");
    req.body() = "{\"model\":\"m\",\"max_tokens\":" + std::to_string(max_tokens) +
                 ",\"stream\":" + (stream ? "true" : "false") + ",\"messages\":[{\"role\":\"user\",\"content\":\"go\"}]}";
    req.prepare_payload();
    http::write(*socket, req);
    return socket;
  }
  // Everything the server sends on `socket` until it closes it.
  static std::string ReadToClose(tcp::socket& socket) {
    std::string all;
    char buf[4096];
    boost::system::error_code ec;
    for (std::size_t n; (n = socket.read_some(net::buffer(buf), ec)) > 0 || !ec;) all.append(buf, n);
    return all;
  }
  // Waits until the gateway has accepted `n` calls (they are in flight).
  void AwaitAccepted(std::uint64_t n) {
    EXPECT_TRUE(testing::Eventually([&] { return gateway_->metrics().accepted.load() >= n; }, std::chrono::seconds(20)));
    ASSERT_EQ(gateway_->metrics().accepted.load(), n);
  }

  net::io_context io_;
  ProfileSet profiles_;
  std::unique_ptr<Gateway> gateway_;
  std::unique_ptr<HttpServer> server_;
  std::uint16_t port_ = 0;
};

TEST_F(ShutdownTest, CallsInFlightFinishAndNewConnectionsAreRefused) {
  Start(10);  // 300 tokens: 0.3 s of wall time
  auto stream = Send(300, /*stream=*/true);
  auto whole = Send(300, /*stream=*/false);
  AwaitAccepted(2);
  auto drained = std::async(std::launch::async, [&] { return server_->Drain(/*drain_s=*/30); });
  const std::string streamed = ReadToClose(*stream);
  const std::string answered = ReadToClose(*whole);
  const HttpServer::DrainReport report = drained.get();
  EXPECT_EQ(report.in_flight, 2u);
  EXPECT_EQ(report.cut, 0u);
  EXPECT_TRUE(report.quiet);
  EXPECT_NE(streamed.find("\"usage\""), std::string::npos) << streamed;
  EXPECT_NE(streamed.find("data: [DONE]"), std::string::npos);
  EXPECT_EQ(answered.rfind("HTTP/1.1 200", 0), 0u) << answered;
  EXPECT_NE(answered.find("Connection: close"), std::string::npos);  // the drain closes it after the answer
  EXPECT_EQ(gateway_->metrics().completed.load(), 2u);
  tcp::socket late(io_);
  boost::system::error_code ec;
  late.connect({net::ip::make_address("127.0.0.1"), port_}, ec);
  EXPECT_TRUE(ec) << "a new connection was accepted after the drain began";
}

TEST_F(ShutdownTest, AtTheDrainTimeCallsAreCutWithAnErrorAndTheStreamStillEndsWithDone) {
  Start(1);  // 4,000 tokens: 40 s
  auto stream = Send(4000, /*stream=*/true);
  auto whole = Send(4000, /*stream=*/false);
  AwaitAccepted(2);
  auto drained = std::async(std::launch::async, [&] { return server_->Drain(/*drain_s=*/0.2); });
  const std::string streamed = ReadToClose(*stream);
  const std::string answered = ReadToClose(*whole);
  const HttpServer::DrainReport report = drained.get();
  EXPECT_EQ(report.in_flight, 2u);
  EXPECT_EQ(report.cut, 2u);
  EXPECT_TRUE(report.quiet);
  const auto error_event = streamed.find("\"code\":\"shutting_down\"");
  ASSERT_NE(error_event, std::string::npos) << streamed;
  EXPECT_NE(streamed.find("data: [DONE]", error_event), std::string::npos) << streamed;
  EXPECT_EQ(answered.rfind("HTTP/1.1 503", 0), 0u) << answered;
  EXPECT_NE(answered.find("\"code\":\"shutting_down\""), std::string::npos);
  EXPECT_EQ(gateway_->metrics().failed.load(), 2u);
  EXPECT_EQ(gateway_->metrics().completed.load(), 0u);
}

TEST_F(ShutdownTest, AnIdleKeptAliveConnectionIsClosedAtOnce) {
  Start(10);
  tcp::socket held(io_);
  held.connect({net::ip::make_address("127.0.0.1"), port_});
  http::request<http::string_body> req{http::verb::get, "/health", 11};
  req.set(http::field::host, "x");
  http::write(held, req);
  beast::flat_buffer buffer;
  http::response<http::string_body> res;
  http::read(held, buffer, res);
  ASSERT_EQ(res.result_int(), 200u);
  ASSERT_TRUE(res.keep_alive());
  const HttpServer::DrainReport report = server_->Drain(/*drain_s=*/30);  // returns once the connection closed
  EXPECT_EQ(report.in_flight, 0u);
  EXPECT_TRUE(report.quiet);
  EXPECT_EQ(ReadToClose(held), "");
}

}  // namespace
}  // namespace talaria
