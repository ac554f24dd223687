// http_wire renders a message as the bytes Beast's own serializer writes,
// for requests and responses, with and without bodies, at HTTP/1.0 and 1.1.
#include <utility>  // before Boost 1.74's asio (see http_server.cc)

#include "server/http_wire.h"

#include <gtest/gtest.h>

#include <sstream>
#include <string>

namespace talaria {
namespace {

namespace http = boost::beast::http;

template <bool kRequest>
std::string Beast(const http::message<kRequest, http::string_body>& msg) {
  std::ostringstream out;
  out << msg;
  return out.str();
}

template <bool kRequest>
std::string Rendered(const http::message<kRequest, http::string_body>& msg) {
  std::string out;
  http_wire::AppendHead(out, msg.base());
  return out + msg.body();
}

TEST(HttpWireTest, ARequestRendersAsBeastWritesIt) {
  http::request<http::string_body> req{http::verb::post, "/v1/completions?x=1", 11};
  req.set(http::field::host, "127.0.0.1:8101");
  req.set(http::field::authorization, "Bearer k");
  req.set("X-Talaria-Keepalive", "1.000000");
  req.keep_alive(true);
  req.body() = R"({"model":"m","prompt":[1,2,3]})";
  req.prepare_payload();
  EXPECT_EQ(Rendered(req), Beast(req));
  http::request<http::string_body> get{http::verb::get, "/v1/telemetry", 10};
  get.set(http::field::host, "h");
  EXPECT_EQ(Rendered(get), Beast(get));
  EXPECT_EQ(Rendered(get).rfind("GET /v1/telemetry HTTP/1.0\r\n", 0), 0u);
}

TEST(HttpWireTest, AResponseRendersAsBeastWritesIt) {
  for (const auto status : {http::status::ok, http::status::too_many_requests, http::status::service_unavailable}) {
    http::response<http::string_body> res{status, 11};
    res.set(http::field::content_type, "application/json");
    res.set(http::field::server, "talaria");
    res.keep_alive(false);
    res.body() = R"({"error":{"message":"x"}})";
    res.prepare_payload();
    EXPECT_EQ(Rendered(res), Beast(res));
  }
  http::response<http::string_body> empty{http::status::no_content, 11};
  EXPECT_EQ(Rendered(empty), Beast(empty));
  // A reason phrase set by hand is the one written.
  http::response<http::string_body> custom{http::status::ok, 11};
  custom.reason("Fine");
  EXPECT_EQ(Rendered(custom), Beast(custom));
  EXPECT_EQ(Rendered(custom).rfind("HTTP/1.1 200 Fine\r\n", 0), 0u);
}

}  // namespace
}  // namespace talaria
