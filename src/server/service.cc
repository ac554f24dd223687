#include "server/service.h"

#include <algorithm>

namespace talaria {

bool KeyAccepted(const std::vector<std::string>& keys, const std::string& key) {
  return keys.empty() || std::find(keys.begin(), keys.end(), key) != keys.end();
}

std::variant<nlohmann::json, ApiError> CompletionService::Admin(const std::string&, const std::string&) {
  ApiError e;
  e.status = 404;
  e.code = "not_found";
  e.message = "this server has no admin operations";
  return e;
}

}  // namespace talaria
