// Boost 1.74's asio/awaitable.hpp needs <utility> first (see http_server.cc).
#include <utility>

#include "server/http_replay.h"

#include <boost/asio.hpp>
#include <boost/beast.hpp>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <thread>

#include "core/error.h"
#include "driver/session_client.h"
#include "server/openai_decode.h"
#include "server/openai_encode.h"
#include "trace/tokens.h"

namespace talaria {
namespace {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = net::ip::tcp;
using Clock = std::chrono::steady_clock;

struct Target {
  std::string host;
  std::string port;
};

Target ParseTarget(const std::string& url) {
  const std::string scheme = "http://";
  if (url.rfind(scheme, 0) != 0) throw InputError("--target", "'" + url + "' must start with http://");
  std::string rest = url.substr(scheme.size());
  if (auto slash = rest.find('/'); slash != std::string::npos) rest = rest.substr(0, slash);
  const auto colon = rest.rfind(':');
  if (colon == std::string::npos || colon + 1 == rest.size()) {
    throw InputError("--target", "'" + url + "' needs a port (http://HOST:PORT)");
  }
  return {rest.substr(0, colon), rest.substr(colon + 1)};
}

struct CallOutcome {
  int status = 0;
  double ttft_wall_s = -1;
  double done_wall_s = 0;
  std::string text;  // the streamed completion text (with echo_output)
  bool keep_alive = true;  // the server keeps the connection
};

// The text of a completion stream: every event's text, joined.
std::string StreamedText(const std::string& body) {
  std::string text;
  SseDecoder sse;
  CompletionEvent event;
  sse.Feed(body.data(), body.size(), [&](std::string_view data) {
    if (data != "[DONE]" && ReadCompletionEvent(data, event)) text += event.text;
  });
  return text;
}

// One streaming completion; times are wall seconds from `release`.
// The call's agent hints go as headers (docs/serving.md "Agent hints").
// Throws on a transport error; `answered` says whether any of the answer
// had arrived by then.
CallOutcome Post(tcp::socket& socket, beast::flat_buffer& buffer, const Target& target,
                 const HttpReplayOptions& o, const TraceCall& call, const std::string& body,
                 Clock::time_point release, bool& answered) {
  answered = false;
  http::request<http::string_body> req{http::verb::post, "/v1/completions", 11};
  req.set(http::field::host, target.host);
  req.set(http::field::content_type, "application/json");
  req.set("X-Session-Id", call.session_id.str());
  if (call.expected_tool_s) req.set("X-Expected-Tool-Seconds", std::to_string(*call.expected_tool_s));
  if (call.session_end) req.set("X-Session-End", "true");
  if (!o.api_key.empty()) req.set(http::field::authorization, "Bearer " + o.api_key);
  req.keep_alive(true);
  req.body() = body;
  req.prepare_payload();
  http::write(socket, req);
  http::response_parser<http::string_body> parser;
  parser.body_limit(std::numeric_limits<std::uint64_t>::max());
  http::read_header(socket, buffer, parser);
  answered = true;
  CallOutcome out;
  out.status = static_cast<int>(parser.get().result_int());
  while (!parser.is_done()) {
    http::read_some(socket, buffer, parser);
    if (out.ttft_wall_s < 0 && parser.get().body().find("data: {") != std::string::npos) {
      out.ttft_wall_s = std::chrono::duration<double>(Clock::now() - release).count();
    }
  }
  out.done_wall_s = std::chrono::duration<double>(Clock::now() - release).count();
  if (out.ttft_wall_s < 0) out.ttft_wall_s = out.done_wall_s;
  if (o.echo_output && out.status == 200) out.text = StreamedText(parser.get().body());
  out.keep_alive = parser.keep_alive();
  return out;
}

// A session's connection to the target: opened when a call needs it, so a
// session that starts late (or waits out a long gap) does not hold one the
// server has closed as idle meanwhile.
class SessionConnection {
 public:
  explicit SessionConnection(const Target& target) : target_(target), socket_(io_) {}

  // Posts the call; a kept-alive connection the server closed before
  // answering (its idle timeout) is replaced once by a fresh one, which is
  // how any HTTP client treats one. Throws when the fresh one fails too.
  CallOutcome Post(const HttpReplayOptions& o, const TraceCall& call, const std::string& body,
                   Clock::time_point release) {
    for (int attempt = 0;; ++attempt) {
      const bool reused = socket_.is_open();
      if (!reused) Connect();
      bool answered = false;
      try {
        CallOutcome out = talaria::Post(socket_, buffer_, target_, o, call, body, release, answered);
        if (!out.keep_alive) Close();
        return out;
      } catch (const std::exception&) {
        Close();
        if (answered || !reused || attempt > 0) throw;
      }
    }
  }

 private:
  void Connect() {
    tcp::resolver resolver(io_);
    net::connect(socket_, resolver.resolve(target_.host, target_.port));
    buffer_.clear();
  }
  void Close() {
    boost::system::error_code ec;
    socket_.close(ec);
  }

  const Target& target_;
  net::io_context io_;
  tcp::socket socket_;
  beast::flat_buffer buffer_;
};

// The replay's call records (HttpReplayOptions::records_dir): one JSON line
// a call as it ends, written under the replay's lock. Times are trace
// seconds from the replay's start.
class CallRecords {
 public:
  explicit CallRecords(const std::string& dir) : dir_(dir) {
    if (!dir.empty()) out_ = OpenRecordsFile(dir, "calls.jsonl");
  }

  void Answered(const TraceCall& c, double intended_s, const CallOutcome& out, double time_scale) {
    if (!out_.is_open()) return;
    nlohmann::ordered_json j = Head(c);
    j["intended_enqueue_s"] = intended_s;
    j["first_token_s"] = intended_s + out.ttft_wall_s * time_scale;
    j["finished_s"] = intended_s + out.done_wall_s * time_scale;
    j["ttft_s"] = out.ttft_wall_s * time_scale;
    j["status"] = out.status;
    out_ << j.dump() << '\n';
  }

  // A call the transport lost; `intended_s` is negative for one never released.
  void Lost(const TraceCall& c, double intended_s, const std::string& error) {
    if (!out_.is_open()) return;
    nlohmann::ordered_json j = Head(c);
    if (intended_s >= 0) j["intended_enqueue_s"] = intended_s;
    j["status"] = 0;
    j["error"] = "transport: " + error;
    out_ << j.dump() << '\n';
  }

  // Throws InputError when a record could not be written.
  void Close() {
    if (!out_.is_open()) return;
    out_.close();
    if (!out_) throw InputError(dir_ + "/calls.jsonl", "writing the replay records failed");
  }

 private:
  static nlohmann::ordered_json Head(const TraceCall& c) {
    nlohmann::ordered_json j;
    j["session_id"] = c.session_id.str();
    j["call_index"] = c.call_index;
    j["model"] = c.model.str();
    return j;
  }

  std::string dir_;
  std::ofstream out_;
};

}  // namespace

ReplayResult ReplayOverHttp(const Trace& trace, const HttpReplayOptions& o) {
  const Target target = ParseTarget(o.target);
  if (!(o.time_scale > 0)) throw InputError("--time-scale", "must be greater than 0");
  ReplayResult result;
  result.config = "http";
  result.calls_total = static_cast<std::int64_t>(trace.calls.size());
  const auto sessions = GroupSessions(trace);
  result.sessions = static_cast<std::int64_t>(sessions.size());
  CallRecords records(o.records_dir);
  std::mutex mu;
  const Clock::time_point start = Clock::now();
  auto since_start_s = [&](Clock::time_point t) {
    return std::chrono::duration<double>(t - start).count() * o.time_scale;
  };
  auto wall = [&](double trace_s) {
    return std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(trace_s / o.time_scale));
  };
  ReleaseRule rule;
  rule.gap_cap_s = o.gap_cap_s;
  std::vector<std::thread> threads;
  std::string first_error;
  std::int64_t lost_calls = 0;
  std::int64_t lost_sessions = 0;
  for (const auto& s : sessions) {
    threads.emplace_back([&, calls = s.calls] {
      std::size_t k = 0;  // the call in hand
      const TraceCall& first = trace.calls[calls.front()];
      Clock::time_point release = start + wall(first.gap_s);  // the call in hand's
      try {
        SessionConnection connection(target);
        SessionTokens tokens(first.token_seed, o.vocab_size + 3, 3);
        std::vector<std::int32_t> context;  // echo_output: the last prompt as sent, then its real output
        const Clock::time_point session_start = release;
        for (; k < calls.size(); ++k) {
          const TraceCall& c = trace.calls[calls[k]];
          if (k > 0) release += wall(rule.GapSeconds(c));
          std::this_thread::sleep_until(release);
          tokens.Advance(c);
          std::vector<std::int32_t> prompt(tokens.prompt().begin(), tokens.prompt().end());
          if (o.echo_output) {
            const auto keep = std::min<std::size_t>(static_cast<std::size_t>(c.prefix_tokens), context.size());
            std::copy_n(context.begin(), std::min(keep, prompt.size()), prompt.begin());
            context = prompt;
          }
          const CallOutcome out =
              connection.Post(o, c, TokenCompletionBody(c.model, prompt, c.output_tokens, /*stream=*/true), release);
          for (unsigned char b : out.text) context.push_back(3 + b);
          std::lock_guard<std::mutex> lock(mu);
          records.Answered(c, since_start_s(release), out, o.time_scale);
          if (out.status != 200) {
            ++result.rejected;
            ++result.rejected_by_reason["http-" + std::to_string(out.status)];
          } else {
            ++result.calls_completed;
          }
          // A refused call's TTFT counts at its answer, as in the simulated replay.
          result.ttft_s.Add(out.ttft_wall_s * o.time_scale);
          if (c.call_index > 0) result.returning_ttft_s.Add(out.ttft_wall_s * o.time_scale);
          release = Clock::now();  // the next gap counts from this call's finish
        }
        std::lock_guard<std::mutex> lock(mu);
        result.sct_s.Add(std::chrono::duration<double>(Clock::now() - session_start).count() * o.time_scale);
      } catch (const std::exception& e) {
        // The session cannot go on: the call in hand and every later one
        // are lost, and counted so (never dropped from the totals).
        const auto lost = static_cast<std::int64_t>(calls.size() - k);
        std::lock_guard<std::mutex> lock(mu);
        result.rejected += lost;
        result.rejected_by_reason["transport"] += lost;
        lost_calls += lost;
        ++lost_sessions;
        if (first_error.empty()) first_error = e.what();
        for (std::size_t i = k; i < calls.size(); ++i) {
          records.Lost(trace.calls[calls[i]], i == k ? since_start_s(release) : -1.0, e.what());
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  records.Close();
  if (!first_error.empty() && result.calls_completed == 0) {
    throw InputError(o.target, "replay failed: " + first_error);
  }
  if (lost_calls > 0) {
    std::fprintf(stderr, "talaria replay: %lld calls of %lld sessions lost to transport errors (first: %s)\n",
                 static_cast<long long>(lost_calls), static_cast<long long>(lost_sessions), first_error.c_str());
  }
  result.makespan_s = std::chrono::duration<double>(Clock::now() - start).count() * o.time_scale;
  return result;
}

}  // namespace talaria
