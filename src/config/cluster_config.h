// A simulated (or served) cluster: instances, their pools and models, and the
// profile directory, from a TOML file (docs/cluster-config.md). Every key has
// a documented default; unknown keys and bad values are rejected with the
// file, line and key.
#pragma once

#include <string>
#include <vector>

#include "config/serve_options.h"
#include "instance/config.h"
#include "router/router.h"

namespace talaria {

struct ClusterConfig {
  std::string source;        // file it was loaded from
  std::string profiles_dir;  // resolved against the file's directory
  std::vector<InstanceConfig> instances;
  // [[instance]] address: where its instance server listens (IP:PORT),
  // index-aligned with `instances`; "" when not given. `talaria instance`
  // binds there; `talaria gateway` connects there.
  std::vector<std::string> instance_addresses;
  RouterOptions router;              // [router]
  double heartbeat_s = 0.25;         // [router] heartbeat_s
  double overload_max_wait_s = 60;   // [router] overload_max_wait_s
  ServeOptions serve;                // [serve]
};

// Parses a cluster config from text (`source` names it in messages).
ClusterConfig ParseClusterConfig(const std::string& text, const std::string& source,
                                 const std::string& base_dir);

ClusterConfig LoadClusterConfig(const std::string& path);

// The §5.1 ablations by name: talaria, no-sp, no-hkvr, h2d-only, round-only.
// Returns false for an unknown name.
bool AblationByName(const std::string& name, Ablation& out);
const std::vector<std::string>& AblationNames();

}  // namespace talaria
