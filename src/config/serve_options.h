// How the servers expose a cluster: the [serve] table of a cluster config
// (docs/cluster-config.md), read by `talaria serve`, `talaria gateway` and
// `talaria instance`. Every field has its documented default.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace talaria {

// What the HTTP front lets one client hold ([serve] keys of the same names).
struct HttpLimits {
  std::int64_t max_header_bytes = 16 * 1024;       // a request's header block; above: 431
  std::int64_t max_body_bytes = 8 * 1024 * 1024;   // a request's body; above: 413
  // Wall seconds a connection may wait for the first byte of a request (a new
  // one, or a kept-alive one after its answer) before it is closed.
  double idle_timeout_s = 60;
  // From its first byte, a request's header block must arrive within
  // header_timeout_s and the whole request within request_timeout_s, or the
  // connection closes (slow clients).
  double header_timeout_s = 10;
  double request_timeout_s = 30;
  // A write to a client (an answer, or one event of a stream) that cannot go
  // out for this long closes the connection (a client that stopped reading).
  double write_timeout_s = 30;
  std::int64_t max_connections = 4096;  // open at once; above: 503 and close
};

// How `talaria gateway` sends calls to its instance servers
// ([serve] upstream_protocol): all of an instance's calls on one upgraded
// connection ("link", the instance link), or one HTTP request each ("http").
enum class UpstreamProtocol { kLink, kHttp };

// How `talaria serve` exposes the cluster ([serve]).
struct ServeOptions {
  std::string host = "127.0.0.1";  // loopback unless configured otherwise
  std::int32_t port = 8080;
  double time_scale = 1.0;  // emulated seconds per wall second (sim engine)
  std::vector<std::string> api_keys;  // empty: no authentication
  // The operator's key: the one the gateway presents on its own calls to
  // instance servers (telemetry polls), and the only one that sees every
  // tenant's sessions in /v1/telemetry and may call /admin. Servers accept
  // it beside api_keys. Empty: the first of api_keys (set it to keep that
  // key's holder from seeing the other tenants).
  std::string operator_key;
  // A session with no call for this long (emulated seconds) has ended: its
  // completion time goes into the SCT histogram.
  double session_idle_s = 60;
  // On SIGTERM or SIGINT: wall seconds in-flight calls get to finish after
  // accepting stops; the rest then end with a 503 shutting_down (a stream:
  // an error event and [DONE]) and count failed.
  double drain_timeout_s = 30;
  // `talaria gateway` to its instance servers (wall seconds): each call asks
  // for a keep-alive comment every upstream_keepalive_s while it waits, and
  // an instance that sends no byte for upstream_silence_s counts as hung
  // (the call goes elsewhere if nothing was streamed, else ends with an
  // error event). upstream_keepalive_s 0 turns both off.
  // Over the instance link both sides ping every upstream_keepalive_s
  // instead (every 30 s when it is 0, with no silence bound).
  double upstream_keepalive_s = 1;
  double upstream_silence_s = 5;
  UpstreamProtocol upstream_protocol = UpstreamProtocol::kLink;
  // Gateway replicas: where the session table, leases and live-lease counts
  // are shared ("redis://[[USER]:PASSWORD@]HOST[:PORT][/DB]"; docs/serving.md
  // "Gateway replicas"). Empty: the gateway keeps them in its own process.
  std::string state;
  // Wall seconds the gateway waits for the state store on any operation;
  // past it the call is routed on local state and the store counts as down
  // until a heartbeat finds it back.
  double state_timeout_s = 0.05;
  HttpLimits http;
};

// The keys a server accepts: api_keys and the operator key (none when
// api_keys is empty: no authentication).
inline std::vector<std::string> AcceptedKeys(const ServeOptions& s) {
  std::vector<std::string> keys = s.api_keys;
  if (!keys.empty() && !s.operator_key.empty()) keys.push_back(s.operator_key);
  return keys;
}

// The key a gateway's internal calls carry ("" when none is needed).
inline std::string OperatorKey(const ServeOptions& s) {
  if (!s.operator_key.empty()) return s.operator_key;
  return s.api_keys.empty() ? std::string() : s.api_keys.front();
}

}  // namespace talaria
