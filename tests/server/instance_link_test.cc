// The instance link (server/link_frames.h): its frames however the bytes
// arrive, the gateway's end against scripted instances (what the upgrade
// and a call frame carry; a hung, dying, refusing or erring instance), and
// an instance server's end against a real gateway link (many calls on one
// connection, cancel) and against a hostile peer (bad frames close the
// link, bad calls get an error frame and leave it open).
#include <utility>  // before Boost 1.74's asio (see http_server.cc)

#include <sys/socket.h>
#include <sys/time.h>

#include <boost/asio.hpp>
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "instance/test_profiles.h"
#include "server/http_server.h"
#include "server/instance_service.h"
#include "server/link_frames.h"
#include "server/openai_encode.h"
#include "server/remote_instance.h"
#include "server/scripted_instance.h"

namespace talaria {
namespace {

namespace net = boost::asio;
using tcp = net::ip::tcp;
using link::FrameType;
using testing::CallRecorder;
using testing::ScriptedInstance;

// --- Frames -----------------------------------------------------------------

TEST(LinkFramesTest, FramesArriveWholeHoweverTheBytesAreSplit) {
  std::string bytes;
  const std::string body = TokenCompletionBody("m", std::vector<std::int32_t>{1, 2, 3}, 4, true, "s1");
  link::AppendCall(bytes, 7, {true, 2.5, "key-1", body});
  link::AppendFrame(bytes, FrameType::kDelta, 7, "tok");
  Usage usage{12, 3, 8, "host", "i0"};
  link::AppendDone(bytes, 7, usage, "stop");
  link::AppendFrame(bytes, FrameType::kPing, 0);
  link::AppendFrame(bytes, FrameType::kError, 9,
                    ErrorBodyWithStatus(ApiError{429, "server_error", "", "no_capacity", "busy"}));
  for (const std::size_t step : {1u, 3u, 7u, 1000u}) {
    SCOPED_TRACE("fed " + std::to_string(step) + " bytes at a time");
    link::FrameReader reader(1 << 20);
    std::vector<std::pair<FrameType, std::uint64_t>> seen;
    for (std::size_t at = 0; at < bytes.size(); at += step) {
      const std::size_t n = std::min(step, bytes.size() - at);
      std::memcpy(reader.Prepare(n), bytes.data() + at, n);
      reader.Commit(n);
      while (auto f = reader.Next()) {
        seen.emplace_back(f->type, f->id);
        if (f->type == FrameType::kCall) {
          link::CallFields call;
          std::string error;
          ASSERT_TRUE(link::ReadCall(f->payload, call, error)) << error;
          EXPECT_TRUE(call.session_end);
          EXPECT_EQ(call.expected_tool_s, 2.5);
          EXPECT_EQ(call.api_key, "key-1");
          EXPECT_EQ(call.body, body);
        } else if (f->type == FrameType::kDelta) {
          EXPECT_EQ(f->payload, "tok");
        } else if (f->type == FrameType::kDone) {
          Usage read;
          std::string finish;
          ASSERT_TRUE(link::ReadDone(f->payload, read, finish));
          EXPECT_EQ(read.prompt_tokens, 12);
          EXPECT_EQ(read.completion_tokens, 3);
          EXPECT_EQ(read.cached_tokens, 8);
          EXPECT_EQ(read.kv_source, "host");
          EXPECT_EQ(read.instance, "i0");
          EXPECT_EQ(finish, "stop");
        } else if (f->type == FrameType::kError) {
          EXPECT_EQ(ApiError::FromResponse(502, f->payload).status, 429);
        }
      }
    }
    EXPECT_FALSE(reader.Failed()) << reader.error();
    EXPECT_FALSE(reader.Partial());
    const std::vector<std::pair<FrameType, std::uint64_t>> want = {{FrameType::kCall, 7},
                                                                   {FrameType::kDelta, 7},
                                                                   {FrameType::kDone, 7},
                                                                   {FrameType::kPing, 0},
                                                                   {FrameType::kError, 9}};
    EXPECT_EQ(seen, want);
  }
}

TEST(LinkFramesTest, AFrameTooLongOrOfUnknownTypeFailsTheReader) {
  const auto feed = [](const std::string& bytes) {
    auto reader = std::make_unique<link::FrameReader>(64);
    std::memcpy(reader->Prepare(bytes.size()), bytes.data(), bytes.size());
    reader->Commit(bytes.size());
    EXPECT_FALSE(reader->Next().has_value());
    return reader;
  };
  std::string fits;
  link::AppendFrame(fits, FrameType::kDelta, 1, std::string(51, 'x'));  // 13 + 51 = 64 bytes
  link::FrameReader ok(64);
  std::memcpy(ok.Prepare(fits.size()), fits.data(), fits.size());
  ok.Commit(fits.size());
  EXPECT_TRUE(ok.Next().has_value());

  std::string too_long;
  link::AppendFrame(too_long, FrameType::kDelta, 1, std::string(52, 'x'));
  auto r = feed(too_long.substr(0, 13));  // the head alone tells
  EXPECT_TRUE(r->Failed());
  EXPECT_NE(r->error().find("65 bytes"), std::string::npos) << r->error();

  std::string unknown;
  link::AppendFrame(unknown, FrameType::kPing, 0);
  unknown[4] = 9;
  EXPECT_TRUE(feed(unknown)->Failed());
  unknown[4] = 0;
  EXPECT_TRUE(feed(unknown)->Failed());

  std::string short_head(4, '\0');  // a length below the type and id
  short_head[0] = 3;
  short_head += std::string(9, '\0');
  EXPECT_TRUE(feed(short_head)->Failed());
}

TEST(LinkFramesTest, ACallFrameWithABadHintOrCutShortIsRefused) {
  for (const double hint : {-0.5, 3600.5, std::nan(""), std::numeric_limits<double>::infinity()}) {
    std::string bytes;
    link::AppendCall(bytes, 1, {false, hint, "", "{}"});
    link::CallFields call;
    std::string error;
    EXPECT_FALSE(link::ReadCall(std::string_view(bytes).substr(13), call, error)) << hint;
    EXPECT_NE(error.find("expected tool time"), std::string::npos) << error;
  }
  std::string bytes;
  link::AppendCall(bytes, 1, {false, -1, "a-key", "{}"});
  const std::string_view payload = std::string_view(bytes).substr(13);
  link::CallFields call;
  std::string error;
  EXPECT_TRUE(link::ReadCall(payload, call, error)) << error;
  EXPECT_FALSE(link::ReadCall(payload.substr(0, 10), call, error));  // inside the key
  std::string flags(payload);
  flags[0] = 4;
  EXPECT_FALSE(link::ReadCall(flags, call, error));
  Usage usage;
  std::string finish;
  std::string done;
  link::AppendDone(done, 1, Usage{}, "stop");
  EXPECT_FALSE(link::ReadDone(std::string_view(done).substr(13, done.size() - 14), usage, finish));
  EXPECT_FALSE(link::ReadDone(std::string(done.substr(13)) + "x", usage, finish));  // bytes left over
}

// --- The gateway's end, against scripted instances ----------------------------

constexpr std::string_view kSwitched =
    "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: talaria-link/1\r\n\r\n";

struct TestFrame {
  FrameType type;
  std::uint64_t id;
  std::string payload;
};

// Reads one frame (5 s at most); nullopt when the connection ended first.
std::optional<TestFrame> ReadFrame(tcp::socket& s) {
  timeval tv{5, 0};
  ::setsockopt(s.native_handle(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  boost::system::error_code ec;
  std::uint32_t length = 0;
  net::read(s, net::buffer(&length, 4), ec);
  if (ec || length < 9) return std::nullopt;
  std::string rest(length, '\0');
  net::read(s, net::buffer(rest), ec);
  if (ec) return std::nullopt;
  TestFrame f{static_cast<FrameType>(rest[0]), 0, rest.substr(9)};
  std::memcpy(&f.id, rest.data() + 1, 8);
  return f;
}

std::shared_ptr<const LinkCall> Call(std::int64_t id, bool stream = false) {
  auto call = std::make_shared<LinkCall>();
  call->id = id;
  call->model = "m";
  call->prompt = {7, 8};
  call->max_tokens = 2;
  call->stream = stream;
  return call;
}

// Runs `call` on a link to `address` (pings every 0.1 s, hung after 0.3 s
// of silence); returns its recorder once it ended.
std::shared_ptr<CallRecorder> RunOnLink(const std::string& address, std::shared_ptr<const LinkCall> call,
                                        std::optional<ApiError>& end) {
  RemoteLinkOptions options;
  options.keepalive_s = 0.1;
  options.silence_s = 0.3;
  options.poll_key = "operator";
  RemoteInstanceLink link("i0", address, options);
  link.Start();
  auto sink = std::make_shared<CallRecorder>();
  link.Submit(std::move(call), sink);
  end = sink->End();
  link.Stop();
  return sink;
}

TEST(InstanceLinkTest, TheUpgradeAndTheCallFrameCarryTheKeysSessionAndHints) {
  std::optional<TestFrame> got;
  ScriptedInstance instance([&](tcp::socket& s) {
    ScriptedInstance::Write(s, std::string(kSwitched));
    do {
      got = ReadFrame(s);
    } while (got && got->type == FrameType::kPing);
    if (!got) return;
    std::string out;
    link::AppendFrame(out, FrameType::kDelta, got->id, "hi");
    link::AppendDone(out, got->id, Usage{2, 1, 0, "recompute", "i0"}, "length");
    ScriptedInstance::Write(s, out);
  });
  auto call = std::make_shared<LinkCall>(*Call(5));
  call->session_id = "agent-1";
  call->api_key = "k1";
  call->expected_tool_s = 0.5;
  call->session_end = true;
  std::optional<ApiError> end;
  auto sink = RunOnLink(instance.address(), call, end);
  EXPECT_FALSE(end.has_value()) << end->message;
  EXPECT_EQ(sink->text(), "hi");
  const auto& req = instance.request();
  EXPECT_EQ(req.target(), "/v1/link");
  EXPECT_EQ(req[boost::beast::http::field::upgrade], "talaria-link/1");
  EXPECT_EQ(req[boost::beast::http::field::authorization], "Bearer operator");  // the link's own key
  EXPECT_EQ(req[kKeepaliveHeader], "0.100000");
  ASSERT_TRUE(got.has_value());
  ASSERT_EQ(got->type, FrameType::kCall);
  link::CallFields fields;
  std::string error;
  ASSERT_TRUE(link::ReadCall(got->payload, fields, error)) << error;
  EXPECT_EQ(fields.api_key, "k1");  // each call's own key
  EXPECT_TRUE(fields.session_end);
  EXPECT_EQ(fields.expected_tool_s, 0.5);
  EXPECT_EQ(fields.body, TokenCompletionBody("m", call->prompt, 2, false, "agent-1"));
}

TEST(InstanceLinkTest, AnInstanceSilentAfterTakingTheCallIsHung) {
  ScriptedInstance instance([](tcp::socket& s) {
    ScriptedInstance::Write(s, std::string(kSwitched));
    (void)ReadFrame(s);  // then nothing, not even a ping
  });
  std::optional<ApiError> end;
  RunOnLink(instance.address(), Call(1), end);
  ASSERT_TRUE(end.has_value());
  EXPECT_EQ(end->code, kUnreachableCode) << end->message;  // the gateway places it elsewhere
  EXPECT_NE(end->message.find("hung"), std::string::npos) << end->message;
}

TEST(InstanceLinkTest, AnInstanceThatDiesAfterTakingTheCallFailsIt) {
  ScriptedInstance instance([](tcp::socket& s) {
    ScriptedInstance::Write(s, std::string(kSwitched));
    (void)ReadFrame(s);
    s.close();
  });
  std::optional<ApiError> end;
  RunOnLink(instance.address(), Call(1), end);
  ASSERT_TRUE(end.has_value());
  EXPECT_EQ(end->code, kInstanceFailedCode) << end->message;  // never retried
  EXPECT_EQ(end->status, 502);
}

// An HTTP answer with the servers' error body.
std::string ErrorAnswer(int status, std::string_view reason, std::string_view code) {
  const std::string body = ErrorBodyWithStatus(ApiError{status, "invalid_request_error", "", std::string(code), "no"});
  return "HTTP/1.1 " + std::to_string(status) + " " + std::string(reason) +
         "\r\nContent-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
}

TEST(InstanceLinkTest, AnInstanceThatRefusesTheLinkSendsTheCallElsewhere) {
  // A draining server refuses the upgrade: the call goes to another instance.
  ScriptedInstance instance(
      [](tcp::socket& s) { ScriptedInstance::Write(s, ErrorAnswer(503, "Service Unavailable", "shutting_down")); });
  std::optional<ApiError> end;
  RunOnLink(instance.address(), Call(1), end);
  ASSERT_TRUE(end.has_value());
  EXPECT_EQ(end->code, kUnreachableCode) << end->message;
  EXPECT_NE(end->message.find("refused the link (503)"), std::string::npos) << end->message;
}

// An instance that predates the link answers its upgrade 404; behind a
// proxy that drops the Upgrade header a current one answers 400
// bad_upgrade. Either way the calls go over HTTP (and the next call does
// not try the link again).
TEST(InstanceLinkTest, AnInstanceWithoutTheLinkGetsItsCallsOverHttp) {
  const std::vector<std::string> refusals = {ErrorAnswer(404, "Not Found", "not_found"),
                                             ErrorAnswer(400, "Bad Request", "bad_upgrade")};
  for (const std::string& refusal : refusals) {
    SCOPED_TRACE(refusal.substr(0, 16));
    const auto answer = [](tcp::socket& s) {
      const std::string body = CompletionBody(AnswerHead{false, "cmpl-1", 0, "m"}, "over http", "length",
                                              Usage{2, 2, 0, "recompute", "i0"});
      ScriptedInstance::Write(s, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: " +
                                     std::to_string(body.size()) + "\r\n\r\n" + body);
    };
    ScriptedInstance instance(
        std::vector<ScriptedInstance::Script>{[&](tcp::socket& s) { ScriptedInstance::Write(s, refusal); }, answer,
                                              answer});
    RemoteLinkOptions options;
    options.keepalive_s = 0.1;
    options.silence_s = 0.3;
    options.max_idle_connections = 0;  // one connection a call, so each shows in requests()
    RemoteInstanceLink link("i0", instance.address(), options);
    link.Start();
    for (std::int64_t id : {1, 2}) {
      auto sink = std::make_shared<CallRecorder>();
      link.Submit(Call(id), sink);
      const std::optional<ApiError> end = sink->End();
      EXPECT_FALSE(end.has_value()) << end->message;
      EXPECT_EQ(sink->text(), "over http");
    }
    link.Stop();
    const auto requests = instance.requests();
    ASSERT_EQ(requests.size(), 3u);
    EXPECT_EQ(requests[0].target(), "/v1/link");
    EXPECT_EQ(requests[1].target(), "/v1/completions");
    EXPECT_EQ(requests[2].target(), "/v1/completions");
  }
}

TEST(InstanceLinkTest, AnErrorFrameKeepsItsStatus) {
  ScriptedInstance instance([](tcp::socket& s) {
    ScriptedInstance::Write(s, std::string(kSwitched));
    auto f = ReadFrame(s);
    if (!f) return;
    std::string out;
    link::AppendFrame(
        out, FrameType::kError, f->id,
        ErrorBodyWithStatus(ApiError{400, "invalid_request_error", "", "context_length_exceeded", "too long"}));
    ScriptedInstance::Write(s, out);
  });
  std::optional<ApiError> end;
  RunOnLink(instance.address(), Call(1, /*stream=*/true), end);
  ASSERT_TRUE(end.has_value());
  EXPECT_EQ(end->status, 400);
  EXPECT_EQ(end->code, "context_length_exceeded");
}

// --- The instance server's end ------------------------------------------------

class InstanceLinkServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    profiles_.Add(talaria::testing::TinyProfile("m"));
    serve_.time_scale = 1000;
    serve_.api_keys = {"tenant", "operator"};
    serve_.operator_key = "operator";
    service_ = std::make_unique<InstanceService>(talaria::testing::TinyInstance("i0", {"m"}), profiles_, serve_);
    service_->Start();
    server_ = std::make_unique<HttpServer>(*service_, "127.0.0.1", 0);
    port_ = server_->Start();
  }
  void TearDown() override {
    server_->Drain(2);
    service_->Stop();
  }
  std::string address() const { return "127.0.0.1:" + std::to_string(port_); }
  std::uint64_t Requests(const std::string& label) { return service_->metrics().requests.Get(label); }

  // A raw connection upgraded to the link (as a hostile gateway would).
  std::unique_ptr<tcp::socket> Upgraded(const std::string& extra_headers = "X-Talaria-Keepalive: 1\r\n",
                                        int* status = nullptr) {
    auto s = std::make_unique<tcp::socket>(io_);
    s->connect({net::ip::make_address("127.0.0.1"), port_});
    ScriptedInstance::Write(*s,
                            "GET /v1/link HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: talaria-link/1\r\n"
                            "Authorization: Bearer operator\r\n" +
                                extra_headers + "\r\n");
    boost::beast::flat_buffer buffer;  // nothing follows the answer until this side sends
    boost::beast::http::response_parser<boost::beast::http::empty_body> answer;
    boost::system::error_code ec;
    boost::beast::http::read_header(*s, buffer, answer, ec);
    if (status != nullptr) *status = ec ? -1 : static_cast<int>(answer.get().result_int());
    if (!ec && answer.get().result_int() == 101) {
      EXPECT_EQ(buffer.size(), 0u);
    }
    return s;
  }

  ProfileSet profiles_;
  ServeOptions serve_;
  std::unique_ptr<InstanceService> service_;
  std::unique_ptr<HttpServer> server_;
  std::uint16_t port_ = 0;
  net::io_context io_;
};

TEST_F(InstanceLinkServerTest, ManyCallsShareOneConnection) {
  RemoteLinkOptions options;
  options.poll_key = "operator";
  RemoteInstanceLink link("i0", address(), options);
  link.Start();
  constexpr int kCalls = 48;
  std::vector<std::shared_ptr<CallRecorder>> sinks;
  for (int i = 0; i < kCalls; ++i) {
    auto call = std::make_shared<LinkCall>(*Call(i + 1, /*stream=*/i % 2 == 0));
    call->api_key = "tenant";
    call->max_tokens = 3;
    sinks.push_back(std::make_shared<CallRecorder>());
    link.Submit(call, sinks.back());
  }
  for (auto& sink : sinks) {
    const std::optional<ApiError> end = sink->End();
    EXPECT_FALSE(end.has_value()) << end->message;
    EXPECT_FALSE(sink->text().empty());
  }
  link.Stop();
  EXPECT_EQ(Requests("/v1/link,101"), 1u);  // one connection
  EXPECT_EQ(Requests("/v1/link,200"), static_cast<std::uint64_t>(kCalls));
}

TEST_F(InstanceLinkServerTest, ACancelledCallIsDroppedThere) {
  RemoteLinkOptions options;
  options.poll_key = "operator";
  RemoteInstanceLink link("i0", address(), options);
  link.Start();
  auto call = std::make_shared<LinkCall>(*Call(1, true));
  call->api_key = "tenant";
  call->max_tokens = 30000;  // tens of seconds even at time scale 1000
  auto sink = std::make_shared<CallRecorder>();
  link.Submit(call, sink);
  ASSERT_TRUE(sink->WaitForText());  // running there
  EXPECT_TRUE(link.Cancel(1));
  // The instance reads a link's frames in order and cancels as it reads:
  // once a later call on the same link has ended, the cancel was done.
  auto later = std::make_shared<LinkCall>(*Call(2));
  later->api_key = "tenant";
  auto later_sink = std::make_shared<CallRecorder>();
  link.Submit(later, later_sink);
  EXPECT_FALSE(later_sink->End().has_value());
  EXPECT_EQ(service_->metrics().failed.load(), 1u);  // cancelled there: its slot and KV freed
  link.Stop();
}

TEST_F(InstanceLinkServerTest, BadCallsGetAnErrorFrameAndTheLinkStaysOpen) {
  auto s = Upgraded();
  std::string out;
  link::AppendCall(out, 1, {false, -1, "wrong-key", TokenCompletionBody("m", std::vector<std::int32_t>{1}, 2, false)});
  link::AppendCall(out, 2, {false, -1, "tenant", "{\"model\":"});
  link::AppendCall(out, 3, {false, -1, "tenant", TokenCompletionBody("nope", std::vector<std::int32_t>{1}, 2, false)});
  std::string bad_hint;
  link::AppendCall(bad_hint, 4,
                   {false, 7200, "tenant", TokenCompletionBody("m", std::vector<std::int32_t>{1}, 2, false)});
  out += bad_hint;
  link::AppendCall(out, 5, {false, 1.5, "tenant", TokenCompletionBody("m", std::vector<std::int32_t>{1, 2}, 2, false)});
  ScriptedInstance::Write(*s, out);
  std::map<std::uint64_t, int> status;  // by call: 200 done, else the error's
  while (status.size() < 5) {
    auto f = ReadFrame(*s);
    ASSERT_TRUE(f.has_value()) << "the link closed with " << status.size() << " calls answered";
    if (f->type == FrameType::kError) status[f->id] = ApiError::FromResponse(502, f->payload).status;
    if (f->type == FrameType::kDone) status[f->id] = 200;
  }
  EXPECT_EQ(status[1], 401);
  EXPECT_EQ(status[2], 400);
  EXPECT_EQ(status[3], 404);
  EXPECT_EQ(status[4], 400);
  EXPECT_EQ(status[5], 200);  // the link carried on
}

TEST_F(InstanceLinkServerTest, MalformedFramesCloseTheLink) {
  std::string unknown;
  link::AppendFrame(unknown, FrameType::kPing, 0);
  unknown[4] = 42;
  std::string output_frame;  // a gateway never sends output
  link::AppendFrame(output_frame, FrameType::kDelta, 1, "x");
  const std::string huge = std::string("\xff\xff\xff\x7f", 4) + std::string(9, '\0');
  for (const std::string& bytes : {unknown, output_frame, huge}) {
    int status = 0;
    auto s = Upgraded("X-Talaria-Keepalive: 1\r\n", &status);
    ASSERT_EQ(status, 101);
    ScriptedInstance::Write(*s, bytes);
    std::optional<TestFrame> f;
    do {
      f = ReadFrame(*s);  // pings, then the end
    } while (f && f->type == FrameType::kPing);
    EXPECT_FALSE(f.has_value());
  }
  // An upgrade without the ping period is refused with a 400.
  int status = 0;
  auto s = Upgraded("", &status);
  EXPECT_EQ(status, 400);
  EXPECT_EQ(Requests("/v1/link,400"), 1u);
}

}  // namespace
}  // namespace talaria
