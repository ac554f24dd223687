// The wire form of an instance's telemetry snapshot (GET /v1/telemetry on an
// instance server, polled by the gateway each heartbeat): every field the
// router reads, keyed by the InstanceTelemetry field names. `taken_at_s` is
// the instance's own emulated clock; the gateway replaces it with its own
// send time, since the two processes' clocks are not comparable.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "telemetry/telemetry.h"

namespace talaria {

nlohmann::json TelemetryToJson(const InstanceTelemetry& t);

// Parses a snapshot; on a missing or wrong-typed field, or a number out of
// the range the router computes with (a negative time, count or size, a
// scale of 0, a coverage above 1, a time past 1e9 s), returns nullopt and
// names the field and the value in `error`. The gateway treats that poll
// as unanswered: the instance is unhealthy until a good snapshot comes.
std::optional<InstanceTelemetry> TelemetryFromJson(const nlohmann::json& j, std::string& error);

}  // namespace talaria
