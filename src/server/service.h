// What the HTTP front (server/http_server.h) serves: the gateway and an
// instance server both implement this, so one HTTP implementation carries
// the OpenAI-compatible API, telemetry, admin, health and metrics for both.
#pragma once

#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "server/metrics.h"
#include "server/openai_api.h"

namespace talaria {

// Receives one call's output. Exactly one of OnDone / OnError ends a call.
// Methods may run on any thread and must not block.
class CompletionSink {
 public:
  virtual ~CompletionSink() = default;
  virtual void OnDelta(const std::string& text) = 0;
  virtual void OnDone(const Usage& usage, const std::string& finish_reason) = 0;
  virtual void OnError(const ApiError& error) = 0;
};

// Whether `key` may use a server configured with `keys` (none: any key).
bool KeyAccepted(const std::vector<std::string>& keys, const std::string& key);

class CompletionService {
 public:
  virtual ~CompletionService() = default;

  // Runs one call; the sink hears the outcome (possibly before Submit
  // returns). `api_key` scopes the session id. Returns an id for Cancel, or
  // -1 when the call was refused (its sink got the error).
  virtual std::int64_t Submit(const CompletionRequest& request, const std::string& api_key,
                              std::shared_ptr<CompletionSink> sink) = 0;
  // The client went away: drop the call, freeing its slot and KV. Counts it
  // failed unless it had already finished. Returns whether it was dropped.
  virtual bool Cancel(std::int64_t id) = 0;

  // Sorted model names (GET /v1/models).
  virtual std::vector<std::string> Models() const = 0;
  // GET /v1/telemetry.
  virtual nlohmann::json Telemetry() = 0;
  // GET /v1/timeline: what each instance's GPUs did lately (the form is
  // server/timeline_json.h's): {"instances": [...]}, the k-th cursor of
  // `after` applying to the k-th instance (missing: 0, everything kept).
  virtual nlohmann::json Timeline(const std::vector<std::uint64_t>& after) = 0;
  // How many instances Timeline lists (bounds the cursors a query may give).
  virtual std::size_t TimelineInstances() const = 0;
  // POST /admin/models/{model}/{action}: the response body, or an error.
  // Services without admin operations answer 404.
  virtual std::variant<nlohmann::json, ApiError> Admin(const std::string& model, const std::string& action);

  virtual bool RequiresApiKey() const = 0;
  virtual bool ApiKeyAccepted(const std::string& key) const = 0;
  // Whether `key` is the operator's (ServeOptions::operator_key): it sees
  // every tenant's sessions and may call /admin. Any key when no keys are
  // configured.
  virtual bool IsOperator(const std::string& key) const = 0;
  virtual ServerMetrics& metrics() = 0;
  // GET /metrics: the Prometheus text page (docs/serving.md lists the
  // families). Services add their own families to metrics().Render().
  virtual std::string RenderMetrics() { return metrics().Render(); }
};

}  // namespace talaria
