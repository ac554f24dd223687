#include "telemetry/telemetry.h"

namespace talaria {

const char* ToString(KvState s) {
  switch (s) {
    case KvState::kMissing: return "missing";
    case KvState::kHost: return "host";
    case KvState::kDevice: return "device";
  }
  return "?";
}

}  // namespace talaria
