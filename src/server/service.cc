#include "server/service.h"

namespace talaria {

std::variant<nlohmann::json, ApiError> CompletionService::Admin(const std::string&, const std::string&) {
  ApiError e;
  e.status = 404;
  e.code = "not_found";
  e.message = "this server has no admin operations";
  return e;
}

}  // namespace talaria
