// How the servers expose a cluster: the [serve] table of a cluster config
// (docs/cluster-config.md), read by `talaria serve`, `talaria gateway` and
// `talaria instance`. Every field has its documented default.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace talaria {

// How `talaria serve` exposes the cluster ([serve]).
struct ServeOptions {
  std::string host = "127.0.0.1";  // loopback unless configured otherwise
  std::int32_t port = 8080;
  double time_scale = 1.0;  // emulated seconds per wall second (sim engine)
  std::vector<std::string> api_keys;  // empty: no authentication
  // A session with no call for this long (emulated seconds) has ended: its
  // completion time goes into the SCT histogram.
  double session_idle_s = 60;
};

}  // namespace talaria
