// Test doubles for the gateway's links to instance servers: a scripted
// instance (a raw socket on loopback that reads one HTTP request, then does
// what the test says) and a sink that records a call's text and its end.
#pragma once

#include <utility>  // before Boost 1.74's asio (see http_server.cc)

#include <boost/asio.hpp>
#include <boost/beast.hpp>
#include <gtest/gtest.h>

#include <condition_variable>
#include <cstdio>
#include <functional>
#include <future>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "server/service.h"

namespace talaria::testing {

// One connection's worth of an instance (or several, one after another):
// reads a request, then runs the script on the socket; holds the sockets
// open until the test ends.
class ScriptedInstance {
 public:
  using Script = std::function<void(boost::asio::ip::tcp::socket&)>;
  explicit ScriptedInstance(Script script) : ScriptedInstance(std::vector<Script>{std::move(script)}) {}
  // The i-th connection it accepts runs scripts[i].
  explicit ScriptedInstance(std::vector<Script> scripts)
      : acceptor_(io_, {boost::asio::ip::make_address("127.0.0.1"), 0}) {
    thread_ = std::thread([this, scripts = std::move(scripts)] {
      std::vector<boost::asio::ip::tcp::socket> sockets;
      sockets.reserve(scripts.size());
      for (const Script& script : scripts) {
        boost::asio::ip::tcp::socket& socket = sockets.emplace_back(io_);
        boost::system::error_code ec;
        acceptor_.accept(socket, ec);
        if (ec) break;
        boost::beast::flat_buffer buffer;
        boost::beast::http::request<boost::beast::http::string_body> request;
        boost::beast::http::read(socket, buffer, request, ec);
        if (ec) break;
        {
          std::lock_guard<std::mutex> lock(mu_);
          requests_.push_back(std::move(request));
        }
        script(socket);
      }
      std::unique_lock<std::mutex> lock(mu_);
      done_cv_.wait(lock, [&] { return done_; });  // the sockets stay open until then
    });
  }
  ~ScriptedInstance() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      done_ = true;
    }
    done_cv_.notify_all();
    // A thread still waiting for a connection that never came (the test
    // failed) gets one that closes at once, and stops.
    boost::system::error_code ec;
    {
      boost::asio::ip::tcp::socket wake(io_);
      wake.connect(acceptor_.local_endpoint(), ec);
    }
    acceptor_.close(ec);
    thread_.join();
  }
  std::string address() const { return "127.0.0.1:" + std::to_string(acceptor_.local_endpoint().port()); }
  // The request it read on the first connection (empty before).
  boost::beast::http::request<boost::beast::http::string_body> request() {
    std::lock_guard<std::mutex> lock(mu_);
    return requests_.empty() ? boost::beast::http::request<boost::beast::http::string_body>{} : requests_.front();
  }
  // Those of every connection so far, in order.
  std::vector<boost::beast::http::request<boost::beast::http::string_body>> requests() {
    std::lock_guard<std::mutex> lock(mu_);
    return requests_;
  }

  static void Write(boost::asio::ip::tcp::socket& socket, const std::string& bytes) {
    boost::system::error_code ec;
    boost::asio::write(socket, boost::asio::buffer(bytes), ec);
  }
  static void Chunk(boost::asio::ip::tcp::socket& socket, std::string_view data) {
    char size[16];
    std::snprintf(size, sizeof size, "%zx\r\n", data.size());
    Write(socket, size + std::string(data) + "\r\n");
  }
  static void StreamHead(boost::asio::ip::tcp::socket& socket) {
    Write(socket, "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n");
  }

 private:
  boost::asio::io_context io_;
  boost::asio::ip::tcp::acceptor acceptor_;
  std::vector<boost::beast::http::request<boost::beast::http::string_body>> requests_;  // guarded by mu_
  std::mutex mu_;
  std::condition_variable done_cv_;
  bool done_ = false;
  std::thread thread_;
};

class CallRecorder final : public CompletionSink {
 public:
  void OnDelta(const std::string& text) override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      text_ += text;
    }
    text_cv_.notify_all();
  }
  // Waits for the call's first output; false past 10 s.
  bool WaitForText() {
    std::unique_lock<std::mutex> lock(mu_);
    return text_cv_.wait_for(lock, std::chrono::seconds(10), [&] { return !text_.empty(); });
  }
  void OnDone(const Usage&, const std::string&) override { end_.set_value(std::nullopt); }
  void OnError(const ApiError& e) override { end_.set_value(e); }
  // The call's end: nullopt when it completed. Fails the test past 10 s.
  std::optional<ApiError> End() {
    auto f = end_.get_future();
    if (f.wait_for(std::chrono::seconds(10)) != std::future_status::ready) {
      ADD_FAILURE() << "the call never ended";
      return ApiError{};
    }
    return f.get();
  }
  std::string text() {
    std::lock_guard<std::mutex> lock(mu_);
    return text_;
  }

 private:
  std::mutex mu_;
  std::condition_variable text_cv_;
  std::string text_;
  std::promise<std::optional<ApiError>> end_;
};

}  // namespace talaria::testing
