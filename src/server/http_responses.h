// The HTTP front's answers that are not a call's output: JSON and error
// responses (OpenAI-style bodies), health, models, metrics and admin
// answers, the errors of each refusal, and a tenant's view of telemetry.
// Pure functions over Beast messages (server/http_server.cc serves them).
#pragma once

#include <boost/beast/http.hpp>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "server/openai_api.h"

namespace talaria::http_front {

using Request = boost::beast::http::request<boost::beast::http::string_body>;
using Response = boost::beast::http::response<boost::beast::http::string_body>;

// A JSON response whose body is already serialized; keep-alive as the request.
Response TextResponse(const Request& req, boost::beast::http::status status, std::string body);
// Never throws: bytes that are not UTF-8 are replaced.
Response JsonResponse(const Request& req, boost::beast::http::status status, const nlohmann::json& body);
// The error's status and body; 429 carries Retry-After.
Response ErrorResponse(const Request& req, const ApiError& e);
Response HealthResponse(const Request& req);
Response ModelsResponse(const Request& req, const std::vector<std::string>& models);
Response MetricsResponse(const Request& req, std::string text);
Response AdminResponse(const Request& req, const std::variant<nlohmann::json, ApiError>& result);
// GET /dashboard (the page) and /dashboard/chart.js, built into the binary;
// the page may load only its own origin's script and data (a strict
// Content-Security-Policy).
enum class DashboardAsset { kPage, kChartJs };
Response DashboardAssetResponse(const Request& req, DashboardAsset asset);

ApiError MakeError(int status, std::string type, std::string code, std::string message);
ApiError NotFound(const std::string& path);
ApiError MethodNotAllowed(const char* use);
ApiError Forbidden();  // /admin without the operator key
ApiError Unauthorized(bool missing);
// 503 shutting_down: a request or a call the server ends because it stops.
ApiError ShuttingDown(const std::string& why);

// The keep-alive period a stream's client asked for (kKeepaliveHeader,
// seconds), or 0: none asked, or not a number in [0.1, 60].
double KeepaliveSeconds(const Request& req);

// The session a request names by header (kSessionHeaders, first found), or "".
std::string SessionHeader(const Request& req);
// The agent hints a request's headers carry, into `request` (they add to
// its body's): X-Session-End: true (or 1), and X-Expected-Tool-Seconds, a
// number of seconds in [0, 3600]; the 400 for a bad one.
std::optional<ApiError> ReadHintHeaders(const Request& req, CompletionRequest& request);

// "/admin/models/{model}/{action}" -> model, action; false for other paths.
bool ParseAdminPath(const std::string& path, std::string& model, std::string& action);

// A tenant's view of telemetry: only the sessions whose scoped ids start
// with `scope` (the instance's own snapshot, or each instance's in the
// gateway's list), and only those sessions' live leases (the gateway's
// "leases").
void ScopeSessions(nlohmann::json& telemetry, const std::string& scope);

}  // namespace talaria::http_front
