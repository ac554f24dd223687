// talaria serve: the gateway and its instances in one process, OpenAI-compatible.
#include <cstdio>
#include <memory>
#include <string>

#include "commands.h"
#include "core/error.h"
#include "server/http_server.h"
#include "sim/cluster_config.h"

namespace talaria::cli {
namespace {

// The embedded default: the paper's TP=8 server with its three models,
// emulated by the sim engine in real time, on loopback port 8080, no keys.
// Profiles are read from ./profiles (run from the repository root).
constexpr const char* kDefaultConfig = R"toml(
profiles = "profiles"

[serve]
host = "127.0.0.1"
port = 8080
time_scale = 1.0

[router]
policy = "full"

[[instance]]
name = "tp8-0"
pool = "cold"
tp = 8
models = ["qwen3-235b-a22b", "glm-5-nvfp4", "qwen3.5-122b-a10b"]
)toml";

struct ServeArgs {
  std::string config;
  std::string host;
  int port = -1;
  double time_scale = 0;
};

void RunServe(const ServeArgs& a) {
  ClusterConfig cluster = a.config.empty() ? ParseClusterConfig(kDefaultConfig, "<embedded default>", ".")
                                           : LoadClusterConfig(a.config);
  if (!a.host.empty()) cluster.serve.host = a.host;
  if (a.port >= 0) cluster.serve.port = a.port;
  if (a.time_scale > 0) cluster.serve.time_scale = a.time_scale;
  const ProfileSet profiles = ProfileSet::LoadDirectory(cluster.profiles_dir);
  Gateway gateway(cluster, profiles);
  HttpServer server(gateway, cluster.serve.host, static_cast<std::uint16_t>(cluster.serve.port));
  const std::uint16_t port = server.Start();
  gateway.Start();
  std::printf("talaria serve: listening on http://%s:%u (%zu instance%s; sim engine emulating the GPUs at "
              "time scale %g; %s)\n",
              cluster.serve.host.c_str(), static_cast<unsigned>(port), cluster.instances.size(),
              cluster.instances.size() == 1 ? "" : "s", cluster.serve.time_scale,
              cluster.serve.api_keys.empty() ? "no API keys" : "API keys required");
  std::fflush(stdout);
  server.WaitForSignal();
  std::printf("talaria serve: stopping\n");
  server.Stop();
  gateway.Stop();
}

}  // namespace

void AddServeCommand(CLI::App& app) {
  auto args = std::make_shared<ServeArgs>();
  auto* cmd = app.add_subcommand(
      "serve", "Serve the OpenAI-compatible API: gateway (router) and instances in one process; the sim "
               "engine emulates the GPUs (an emulation, not a GPU)");
  cmd->add_option("--config", args->config,
                  "cluster config with a [serve] table (default: the embedded TP=8 three-model server)");
  cmd->add_option("--host", args->host, "address to bind (overrides [serve] host; default 127.0.0.1)");
  cmd->add_option("--port", args->port, "port to bind, 0 for any (overrides [serve] port; default 8080)");
  cmd->add_option("--time-scale", args->time_scale,
                  "emulated seconds per wall second (overrides [serve] time_scale; default 1)");
  cmd->callback([args] { RunServe(*args); });
}

}  // namespace talaria::cli
