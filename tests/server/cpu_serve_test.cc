// Serving on the CPU engine: chat completions through the gateway stream
// the tokens the model really generates (checked against the model run
// alone on the rendered prompt), and a session's next turn reuses its KV.
#include <utility>  // before Boost 1.74's asio (see http_server.cc)

#include "server/gateway.h"
#include "server/http_server.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "engine/cpu_profile.h"
#include "engine/test_models.h"
#include "instance/test_profiles.h"
#include "server/call_prep.h"
#include "server/http_client.h"
#include "server/openai_api.h"

namespace talaria {
namespace {

using nlohmann::json;
using testing::HttpCall;
using testing::Reply;
namespace http = boost::beast::http;

constexpr std::int32_t kBlockTokens = 16;

// What the model alone generates after the rendered `prompt`, as text.
std::string Reference(const CpuModelConfig& c, const std::string& prompt, std::int32_t n) {
  std::vector<std::int32_t> ids;
  AppendByteTokens(ids, prompt);
  std::string text;
  // The engine seeds model i with 1 + i; this instance hosts one model.
  for (std::int32_t id : testing::GreedyAlone(c, 1, ids, n, kBlockTokens)) text += static_cast<char>(id - kFirstByteToken);
  return text;
}

class CpuServeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(CpuModelByName("cpu-11m", model_));
    profiles_.Add(testing::CpuModelProfile(model_, 0.25));
    ClusterConfig c;
    c.source = "test";
    InstanceConfig i = testing::TinyInstance("cpu-0", {"cpu-11m"});
    i.engine = "cpu";
    i.runtime_gib = i.graph_pool_gib = 1.0 / 64;
    i.min_kv_gib = 0;
    i.block_tokens = kBlockTokens;
    i.host_kv_gib_per_rank = 1.0 / 16;
    c.instances.push_back(i);
    c.router.admission_control = false;
    gateway_ = std::make_unique<Gateway>(c, profiles_);
    gateway_->Start();
    server_ = std::make_unique<HttpServer>(*gateway_, "127.0.0.1", 0);
    port_ = server_->Start();
  }
  void TearDown() override {
    server_->Stop();
    gateway_->Stop();
  }
  Reply Chat(const json& body) {
    return HttpCall(port_, http::verb::post, "/v1/chat/completions", body.dump(), {{"X-Session-Id", "task"}});
  }
  static std::string Rendered(const json& body) {
    std::vector<ChatMessage> messages;
    for (const auto& m : body["messages"]) messages.push_back({m["role"], m["content"]});
    return RenderChat(messages);
  }

  CpuModelConfig model_;
  ProfileSet profiles_;
  std::unique_ptr<Gateway> gateway_;
  std::unique_ptr<HttpServer> server_;
  std::uint16_t port_ = 0;
};

// A token id outside the vocabulary is the client's error (400 naming the
// position), never the engine's: the instance survives and serves the next
// call (it used to abort the process).
TEST_F(CpuServeTest, ATokenIdOutsideTheVocabularyIsA400AndTheInstanceStaysUp) {
  for (const char* prompt : {"[259]", "[3, 4, 100000]"}) {
    SCOPED_TRACE(prompt);
    const Reply bad = HttpCall(port_, http::verb::post, "/v1/completions",
                               std::string(R"({"model":"cpu-11m","max_tokens":1,"prompt":)") + prompt + "}");
    EXPECT_EQ(bad.status, 400);
    EXPECT_EQ(bad.Json()["error"]["param"], "prompt");
    EXPECT_NE(bad.Json()["error"]["message"].get<std::string>().find("outside the vocabulary"), std::string::npos);
  }
  const Reply good = HttpCall(port_, http::verb::post, "/v1/completions",
                              R"({"model":"cpu-11m","max_tokens":2,"prompt":[3, 4, 258]})");
  EXPECT_EQ(good.status, 200) << good.body;
}

TEST_F(CpuServeTest, ASessionGetsTheModelsTokensAndReusesItsKv) {
  json turn = {{"model", "cpu-11m"},
               {"max_tokens", 12},
               {"messages", {{{"role", "system"}, {"content", std::string(120, 's')}},
                             {{"role", "user"}, {"content", "list the files"}}}}};
  const Reply a = Chat(turn);
  ASSERT_EQ(a.status, 200) << a.body;
  const std::string first = a.Json()["choices"][0]["message"]["content"];
  const auto context1 = static_cast<std::int64_t>(Rendered(turn).size() + first.size()) - 1;  // K/V held
  EXPECT_EQ(first, Reference(model_, Rendered(turn), 12));
  EXPECT_EQ(first.find("filler"), std::string::npos);

  turn["messages"].push_back({{"role", "assistant"}, {"content", first}});
  turn["messages"].push_back({{"role", "tool"}, {"content", "a.cc b.cc"}});
  turn["stream"] = true;
  const Reply b = Chat(turn);
  ASSERT_EQ(b.status, 200) << b.body;
  // The streamed deltas, joined, are the model's continuation of turn 2.
  std::string streamed;
  json usage, extension;
  for (std::size_t at = b.body.find("data: {"); at != std::string::npos; at = b.body.find("data: {", at + 1)) {
    const json chunk = json::parse(b.body.substr(at + 6, b.body.find('\n', at) - at - 6));
    if (!chunk["choices"].empty() && chunk["choices"][0]["delta"].contains("content")) {
      streamed += chunk["choices"][0]["delta"]["content"].get<std::string>();
    }
    if (chunk.contains("usage") && !chunk["usage"].is_null()) usage = chunk["usage"], extension = chunk["talaria"];
  }
  EXPECT_EQ(streamed, Reference(model_, Rendered(turn), 12));
  ASSERT_FALSE(usage.is_null()) << b.body;
  // Every full block of turn 1's context, output included (named by its
  // real tokens), was reused on device.
  EXPECT_EQ(usage["prompt_tokens_details"]["cached_tokens"], context1 / kBlockTokens * kBlockTokens);
  EXPECT_EQ(extension["kv_source"], "device") << b.body;
}

}  // namespace
}  // namespace talaria
