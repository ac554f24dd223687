// Test helpers: one blocking HTTP exchange with a server on loopback, and
// reading a series from a Prometheus text page.
#pragma once

#include <utility>  // before Boost 1.74's asio (see http_server.cc)

#include <boost/asio.hpp>
#include <boost/beast.hpp>
#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdint>
#include <thread>
#include <string>
#include <vector>

namespace talaria::testing {

struct Reply {
  int status = 0;
  std::string body;
  std::string retry_after;
  nlohmann::json Json() const { return nlohmann::json::parse(body); }
};

using Headers = std::vector<std::pair<std::string, std::string>>;

inline Reply HttpCall(std::uint16_t port, boost::beast::http::verb verb, const std::string& target,
                      const std::string& body = "", const Headers& headers = {}) {
  namespace http = boost::beast::http;
  boost::asio::io_context io;
  boost::asio::ip::tcp::socket socket(io);
  socket.connect({boost::asio::ip::make_address("127.0.0.1"), port});
  http::request<http::string_body> req{verb, target, 11};
  req.set(http::field::host, "localhost");
  for (const auto& [k, v] : headers) req.set(k, v);
  if (!body.empty()) {
    req.set(http::field::content_type, "application/json");
    req.body() = body;
    req.prepare_payload();
  }
  http::write(socket, req);
  boost::beast::flat_buffer buffer;
  http::response_parser<http::string_body> parser;
  parser.skip(verb == http::verb::head);  // a HEAD answer has a head only
  http::read(socket, buffer, parser);
  const http::response<http::string_body>& res = parser.get();
  Reply r;
  r.status = static_cast<int>(res.result_int());
  r.body = res.body();
  if (auto it = res.find(http::field::retry_after); it != res.end()) r.retry_after = std::string(it->value());
  return r;
}

// Whether `done()` became true within `limit`: for a state another thread
// reaches (a server noticing a close), checked without sleeping.
template <typename F>
bool Eventually(F done, std::chrono::seconds limit = std::chrono::seconds(10)) {
  const auto give_up = std::chrono::steady_clock::now() + limit;
  while (!done()) {
    if (std::chrono::steady_clock::now() >= give_up) return false;
    std::this_thread::yield();
  }
  return true;
}

// The value of `series` (a name, with labels if any) on a metrics page; 0
// when absent.
inline std::uint64_t MetricValue(const std::string& metrics, const std::string& series) {
  const auto pos = metrics.find("\n" + series + " ");
  if (pos == std::string::npos) return 0;
  return std::stoull(metrics.substr(pos + series.size() + 2));
}

}  // namespace talaria::testing
