// The gateway's link to an instance server over HTTP against a scripted instance (a
// raw socket on loopback that answers as the test says): a hung instance is
// found by its silence before and after the first token (or a whole
// answer's leading spaces), keep-alives keep a slow call alive (against a
// real instance server), an instance that dies after taking the request
// fails the call without a retry, and a draining one sends it elsewhere. (A stopped instance used to hold its calls with no timeout.)
#include <utility>  // before Boost 1.74's asio (see http_server.cc)

#include "server/remote_instance.h"

#include <boost/asio.hpp>
#include <boost/beast.hpp>
#include <gtest/gtest.h>

#include <functional>
#include <future>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "instance/test_profiles.h"
#include "server/http_server.h"
#include "server/instance_service.h"
#include "server/openai_encode.h"
#include "server/scripted_instance.h"

namespace talaria {
namespace {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = net::ip::tcp;
using testing::CallRecorder;
using testing::ScriptedInstance;

AnswerHead Head() {
  AnswerHead h;
  h.chat = false;
  h.id = "cmpl-0";
  h.model = "m";
  return h;
}

// Runs one call through a link to `instance` (keep-alives every 0.1 s, hung
// after 0.3 s of silence) and returns its sink once it ended. The scripted
// instances here speak HTTP (tests/server/instance_link_test.cc scripts
// the instance link).
std::shared_ptr<CallRecorder> RunCall(const std::string& address, std::optional<ApiError>& end, bool stream,
                                       std::vector<std::int32_t> prompt = {1, 2, 3},
                                       UpstreamProtocol protocol = UpstreamProtocol::kHttp) {
  RemoteLinkOptions options;
  options.protocol = protocol;
  options.keepalive_s = 0.1;
  options.silence_s = 0.3;
  RemoteInstanceLink link("i0", address, options);
  link.Start();
  auto call = std::make_shared<LinkCall>();
  call->model = "m";
  call->prompt = std::move(prompt);
  call->max_tokens = 4;
  call->stream = stream;  // the client's choice, which the link passes on
  auto sink = std::make_shared<CallRecorder>();
  link.Submit(call, sink);
  end = sink->End();
  link.Stop();
  return sink;
}

TEST(RemoteLinkTest, AnInstanceThatNeverAnswersIsHungAfterTheSilence) {
  for (const bool stream : {false, true}) {
    SCOPED_TRACE(stream ? "stream" : "whole answer");
    ScriptedInstance instance([](tcp::socket&) {});
    std::optional<ApiError> end;
    RunCall(instance.address(), end, stream);
    ASSERT_TRUE(end.has_value());
    EXPECT_EQ(end->code, kUnreachableCode) << end->message;  // the gateway places it elsewhere
    EXPECT_NE(end->message.find("hung"), std::string::npos) << end->message;
    // It asked for keep-alives, and streams only when its client does.
    EXPECT_EQ(instance.request()[kKeepaliveHeader], "0.100000");
    const std::string asked = stream ? "\"stream\":true" : "\"stream\":false";
    EXPECT_NE(instance.request().body().find(asked), std::string::npos) << instance.request().body();
  }
}

TEST(RemoteLinkTest, SilenceAfterTheFirstTokenEndsTheCallWithAnError) {
  ScriptedInstance instance([](tcp::socket& s) {
    ScriptedInstance::StreamHead(s);
    ScriptedInstance::Chunk(s, StreamDelta(Head(), "tok", true));
  });
  std::optional<ApiError> end;
  auto sink = RunCall(instance.address(), end, /*stream=*/true);
  EXPECT_EQ(sink->text(), "tok");
  ASSERT_TRUE(end.has_value());
  EXPECT_EQ(end->code, kUnreachableCode) << end->message;
  EXPECT_NE(end->message.find("mid-call"), std::string::npos) << end->message;
}

// A whole answer's keep-alive spaces prove the instance alive only while
// they come: silence after them is a hung instance too.
TEST(RemoteLinkTest, SilenceAfterAWholeAnswersSpacesIsHung) {
  ScriptedInstance instance([](tcp::socket& s) {
    ScriptedInstance::Write(s, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n");
    ScriptedInstance::Chunk(s, " ");  // then nothing more
  });
  std::optional<ApiError> end;
  RunCall(instance.address(), end, /*stream=*/false);
  ASSERT_TRUE(end.has_value());
  EXPECT_EQ(end->code, kUnreachableCode) << end->message;
  EXPECT_NE(end->message.find("mid-answer"), std::string::npos) << end->message;
}

// A real instance server: a 900-token prefill on the tiny emulated model
// takes about 0.9 s of wall time at time scale 1, three times the 0.3 s of
// silence allowed, and the server's keep-alive comments (every 0.1 s) carry
// the call through it to its tokens.
TEST(RemoteLinkTest, KeepalivesKeepASlowCallAlive) {
  ProfileSet profiles;
  profiles.Add(testing::TinyProfile("m"));
  ServeOptions serve;
  serve.time_scale = 1;
  InstanceService service(testing::TinyInstance("i0", {"m"}), profiles, serve);
  service.Start();
  HttpServer server(service, "127.0.0.1", 0);
  const std::uint16_t port = server.Start();
  for (const UpstreamProtocol protocol : {UpstreamProtocol::kHttp, UpstreamProtocol::kLink}) {
    for (const bool stream : {false, true}) {  // spaces before a whole answer, comments in a stream (HTTP)
      SCOPED_TRACE(std::string(stream ? "stream" : "whole answer") +
                   (protocol == UpstreamProtocol::kLink ? ", instance link" : ", HTTP"));
      std::optional<ApiError> end;
      auto sink =
          RunCall("127.0.0.1:" + std::to_string(port), end, stream, std::vector<std::int32_t>(900, 'x'), protocol);
      EXPECT_FALSE(end.has_value()) << end->message;
      EXPECT_FALSE(sink->text().empty());
    }
  }
  server.Drain(5);
  service.Stop();
}

// The request carries the client's key, its session and its agent hints to
// the instance (the link renders the request's bytes itself).
TEST(RemoteLinkTest, TheRequestCarriesTheKeySessionAndHints) {
  ScriptedInstance instance([](tcp::socket& s) { s.close(); });
  RemoteLinkOptions options;
  options.protocol = UpstreamProtocol::kHttp;
  RemoteInstanceLink link("i0", instance.address(), options);
  link.Start();
  auto call = std::make_shared<LinkCall>();
  call->model = "m";
  call->prompt = {7, 8};
  call->max_tokens = 2;
  call->stream = false;
  call->session_id = "agent-1";
  call->api_key = "k1";
  call->expected_tool_s = 0.5;
  call->session_end = true;
  auto sink = std::make_shared<CallRecorder>();
  link.Submit(call, sink);
  (void)sink->End();
  link.Stop();
  const auto& req = instance.request();
  EXPECT_EQ(req.method(), http::verb::post);
  EXPECT_EQ(req.target(), "/v1/completions");
  EXPECT_EQ(req[http::field::authorization], "Bearer k1");
  EXPECT_EQ(req["X-Expected-Tool-Seconds"], "0.500000");
  EXPECT_EQ(req["X-Session-End"], "true");
  EXPECT_EQ(req[kKeepaliveHeader], "1.000000");
  EXPECT_EQ(req[http::field::content_type], "application/json");
  EXPECT_TRUE(req.keep_alive());
  EXPECT_EQ(req.body(), TokenCompletionBody("m", call->prompt, 2, false, "agent-1"));
}

TEST(RemoteLinkTest, AnInstanceThatDiesAfterTakingTheRequestFailsTheCall) {
  ScriptedInstance instance([](tcp::socket& s) { s.close(); });
  std::optional<ApiError> end;
  RunCall(instance.address(), end, /*stream=*/false);
  ASSERT_TRUE(end.has_value());
  EXPECT_EQ(end->code, kInstanceFailedCode) << end->message;  // never retried
  EXPECT_EQ(end->status, 502);
}

TEST(RemoteLinkTest, ADrainingInstanceSendsTheCallElsewhere) {
  ScriptedInstance instance([](tcp::socket& s) {
    const std::string body = R"({"error":{"message":"shutting down","type":"server_error","code":"shutting_down"}})";
    ScriptedInstance::Write(s, "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nContent-Length: " +
                                   std::to_string(body.size()) + "\r\n\r\n" + body);
  });
  std::optional<ApiError> end;
  RunCall(instance.address(), end, /*stream=*/false);
  ASSERT_TRUE(end.has_value());
  EXPECT_EQ(end->code, kUnreachableCode) << end->message;
}

ApiError TooLong() {
  ApiError e;
  e.status = 400;
  e.code = "context_length_exceeded";
  e.message = "too long";
  return e;
}

TEST(RemoteLinkTest, AnErrorEventKeepsItsStatus) {
  ScriptedInstance instance([](tcp::socket& s) {
    ScriptedInstance::StreamHead(s);
    ScriptedInstance::Chunk(s, StreamError(TooLong()));
    ScriptedInstance::Chunk(s, kStreamDone);
    ScriptedInstance::Write(s, "0\r\n\r\n");
  });
  std::optional<ApiError> end;
  RunCall(instance.address(), end, /*stream=*/true);
  ASSERT_TRUE(end.has_value());
  EXPECT_EQ(end->status, 400);
  EXPECT_EQ(end->code, "context_length_exceeded");
}

// An error that ends a whole answer after its head went out (with spaces)
// keeps the status it carries in the body.
TEST(RemoteLinkTest, AnErrorAfterAWholeAnswersSpacesKeepsItsStatus) {
  ScriptedInstance instance([](tcp::socket& s) {
    ScriptedInstance::Write(s, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n");
    ScriptedInstance::Chunk(s, " ");
    ScriptedInstance::Chunk(s, ErrorBodyWithStatus(TooLong()));
    ScriptedInstance::Write(s, "0\r\n\r\n");
  });
  std::optional<ApiError> end;
  RunCall(instance.address(), end, /*stream=*/false);
  ASSERT_TRUE(end.has_value());
  EXPECT_EQ(end->status, 400);
  EXPECT_EQ(end->code, "context_length_exceeded");
}

}  // namespace
}  // namespace talaria
