#include <utility>  // before Boost 1.74's asio (see http_server.cc)

#include "server/http_responses.h"

#include <cstdlib>

#include "server/openai_encode.h"
#include "web/web_assets.h"

namespace talaria::http_front {

namespace http = boost::beast::http;
using nlohmann::json;

Response TextResponse(const Request& req, http::status status, std::string body) {
  Response res{status, req.version()};
  res.set(http::field::content_type, "application/json");
  res.set(http::field::server, "talaria");
  res.keep_alive(req.keep_alive());
  res.body() = std::move(body);
  res.prepare_payload();
  return res;
}

Response JsonResponse(const Request& req, http::status status, const json& body) {
  // Replace, never throw: no byte a client sent can make an answer unwritable.
  return TextResponse(req, status, body.dump(-1, ' ', false, json::error_handler_t::replace));
}

Response ErrorResponse(const Request& req, const ApiError& e) {
  Response res = JsonResponse(req, static_cast<http::status>(e.status), e.Body());
  if (e.status == 429) res.set(http::field::retry_after, "1");
  return res;
}

Response HealthResponse(const Request& req) { return JsonResponse(req, http::status::ok, json{{"status", "ok"}}); }

Response ModelsResponse(const Request& req, const std::vector<std::string>& models) {
  json data = json::array();
  for (const auto& m : models) {
    data.push_back(json{{"id", m}, {"object", "model"}, {"created", 0}, {"owned_by", "talaria"}});
  }
  return JsonResponse(req, http::status::ok, json{{"object", "list"}, {"data", data}});
}

Response MetricsResponse(const Request& req, std::string text) {
  Response res{http::status::ok, req.version()};
  res.set(http::field::content_type, "text/plain; version=0.0.4");
  res.keep_alive(req.keep_alive());
  res.body() = std::move(text);
  res.prepare_payload();
  return res;
}

Response AdminResponse(const Request& req, const std::variant<json, ApiError>& result) {
  if (const auto* e = std::get_if<ApiError>(&result)) return ErrorResponse(req, *e);
  return JsonResponse(req, http::status::ok, std::get<json>(result));
}

Response DashboardAssetResponse(const Request& req, DashboardAsset asset) {
  const bool page = asset == DashboardAsset::kPage;
  Response res{http::status::ok, req.version()};
  res.set(http::field::content_type, page ? "text/html; charset=utf-8" : "text/javascript; charset=utf-8");
  res.set(http::field::server, "talaria");
  res.set(http::field::cache_control, page ? "no-cache" : "max-age=3600");
  res.set("X-Content-Type-Options", "nosniff");
  if (page) {
    res.set("Content-Security-Policy",
            "default-src 'none'; script-src 'self' 'unsafe-inline'; style-src 'unsafe-inline'; connect-src 'self'; "
            "img-src 'self' data:; frame-ancestors 'none'");
  }
  res.keep_alive(req.keep_alive());
  const std::string_view body = page ? web::DashboardHtml() : web::ChartJs();
  res.body().assign(body.data(), body.size());
  res.prepare_payload();
  return res;
}

ApiError MakeError(int status, std::string type, std::string code, std::string message) {
  ApiError e;
  e.status = status;
  e.type = std::move(type);
  e.code = std::move(code);
  e.message = std::move(message);
  return e;
}

ApiError NotFound(const std::string& path) {
  return MakeError(404, "invalid_request_error", "not_found", "unknown path " + path);
}

ApiError MethodNotAllowed(const char* use) {
  return MakeError(405, "invalid_request_error", "method_not_allowed", std::string("use ") + use);
}

ApiError Forbidden() {
  return MakeError(403, "invalid_request_error", "permission_denied", "only the operator key may use /admin");
}

ApiError Unauthorized(bool missing) {
  return MakeError(401, "invalid_request_error", "invalid_api_key",
                   missing ? "missing API key (Authorization: Bearer ...)" : "incorrect API key");
}

ApiError ShuttingDown(const std::string& why) { return MakeError(503, "server_error", "shutting_down", why); }

double KeepaliveSeconds(const Request& req) {
  auto it = req.find(kKeepaliveHeader);
  if (it == req.end()) return 0;
  const std::string value(it->value());
  char* end = nullptr;
  const double s = std::strtod(value.c_str(), &end);
  if (value.empty() || end != value.c_str() + value.size() || !(s >= 0.1 && s <= 60)) return 0;
  return s;
}

std::string SessionHeader(const Request& req) {
  for (const char* name : kSessionHeaders) {
    if (auto it = req.find(name); it != req.end()) return std::string(it->value());
  }
  return {};
}

std::optional<ApiError> ReadHintHeaders(const Request& req, CompletionRequest& request) {
  if (auto it = req.find("X-Session-End"); it != req.end()) {
    const auto v = it->value();
    request.session_end |= v == "1" || boost::beast::iequals(v, "true");
  }
  if (auto it = req.find("X-Expected-Tool-Seconds"); it != req.end()) {
    ApiError bad;
    const auto v = ParseExpectedToolSeconds(std::string_view(it->value().data(), it->value().size()),
                                            "X-Expected-Tool-Seconds", bad);
    if (!v) return bad;
    request.expected_tool_s = *v;
  }
  return std::nullopt;
}

bool ParseAdminPath(const std::string& path, std::string& model, std::string& action) {
  static const std::string kPrefix = "/admin/models/";
  if (path.rfind(kPrefix, 0) != 0) return false;
  const auto slash = path.rfind('/');
  if (slash <= kPrefix.size()) return false;
  model = path.substr(kPrefix.size(), slash - kPrefix.size());
  action = path.substr(slash + 1);
  return !model.empty() && model.find('/') == std::string::npos;
}

void ScopeSessions(json& telemetry, const std::string& scope) {
  auto keep_own = [&](json& t, const char* field) {
    auto s = t.find(field);
    if (s == t.end() || !s->is_object()) return;
    for (auto it = s->begin(); it != s->end();) {
      it = it.key().rfind(scope, 0) == 0 ? std::next(it) : s->erase(it);
    }
  };
  keep_own(telemetry, "sessions");
  keep_own(telemetry, "leases");
  if (auto list = telemetry.find("instances"); list != telemetry.end() && list->is_array()) {
    for (json& t : *list) keep_own(t, "sessions");
  }
}

}  // namespace talaria::http_front
