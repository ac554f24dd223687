// The serving commands, all OpenAI-compatible over HTTP:
//   talaria serve     the gateway (router) and its instances in one process
//   talaria instance  one instance server (the sim engine on one [[instance]])
//   talaria gateway   the gateway alone, in front of `talaria instance` servers
#include <cstdio>
#include <fstream>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "commands.h"
#include "core/error.h"
#include "server/gateway.h"
#include "server/http_server.h"
#include "server/instance_service.h"
#include "server/remote_instance.h"
#include "embedded_configs.h"
#include "config/cluster_config.h"

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
  std::string engine;  // "", "sim" or "cpu"; overrides every instance's
  std::string host;
  int port = -1;
  double time_scale = 0;
  std::string port_file;
  std::string name;                           // talaria instance
  std::vector<std::string> instance_address;  // talaria gateway: NAME=IP:PORT
  std::string state;                          // talaria gateway / serve: [serve] state
};

// Where session state lives, for the start-up line.
std::string StateNote(const ClusterConfig& c) {
  return c.serve.state.empty() ? "session state in this process" : "session state shared on " + c.serve.state;
}

ClusterConfig LoadWithOverrides(const ServeArgs& a) {
  ClusterConfig cluster = !a.config.empty()  ? LoadClusterConfig(a.config)
                          : a.engine == "cpu" ? ParseClusterConfig(kCpuConfig, "<embedded configs/cpu-three-models.toml>",
                                                                   "configs")
                                              : ParseClusterConfig(kDefaultConfig, "<embedded default>", ".");
  if (!a.engine.empty()) {
    for (auto& i : cluster.instances) i.engine = a.engine;
  }
  if (!a.host.empty()) cluster.serve.host = a.host;
  if (a.time_scale > 0) cluster.serve.time_scale = a.time_scale;
  if (!a.state.empty()) cluster.serve.state = a.state;
  cluster.instance_addresses.resize(cluster.instances.size());
  return cluster;
}

std::string HostOf(const std::string& address) { return address.substr(0, address.rfind(':')); }
int PortOf(const std::string& address) { return std::stoi(address.substr(address.rfind(':') + 1)); }

// Serves until SIGINT or SIGTERM, then shuts down in order: drains the
// HTTP front (drain_timeout_s), stops the service (`stop_service`: its
// threads stop reporting), and only then the server's loop. `what` names
// the server in messages.
void ServeUntilSignal(CompletionService& service, const std::function<void()>& stop_service, const std::string& host,
                      int port, const ServeArgs& a, const std::string& what, const std::string& detail,
                      const ServeOptions& serve, std::shared_ptr<IoLoop> loop = nullptr) {
  HttpServer server(service, host, static_cast<std::uint16_t>(port), std::move(loop), serve.http);
  if (!IsLoopbackAddress(host) && serve.api_keys.empty()) {
    std::fprintf(stderr,
                 "talaria %s: warning: listening on %s with no api_keys: anyone who can reach this address can "
                 "use it (set [serve] api_keys, docs/serving.md)\n",
                 what.c_str(), host.c_str());
  }
  const std::uint16_t bound = server.Start();
  if (!a.port_file.empty()) {
    std::ofstream out(a.port_file);
    out << bound << "\n";
    if (!out) throw InputError("--port-file", "cannot write '" + a.port_file + "'");
  }
  std::printf("talaria %s: listening on http://%s:%u (%s)\n", what.c_str(), host.c_str(),
              static_cast<unsigned>(bound), detail.c_str());
  std::fflush(stdout);
  server.WaitForSignal();
  std::printf("talaria %s: stopping: draining calls in flight (up to %g s)\n", what.c_str(), serve.drain_timeout_s);
  std::fflush(stdout);
  const HttpServer::DrainReport d = server.Drain(serve.drain_timeout_s);
  std::printf("talaria %s: drained: %zu call%s in flight, %zu finished, %zu cut%s\n", what.c_str(), d.in_flight,
              d.in_flight == 1 ? "" : "s", d.in_flight - d.cut, d.cut,
              d.quiet ? "" : "; some clients did not read their last answer");
  std::fflush(stdout);
  stop_service();
  server.Stop();
}

std::string KeysNote(const ClusterConfig& c) { return c.serve.api_keys.empty() ? "no API keys" : "API keys required"; }

// What runs the steps of `instances`, for the start-up line.
std::string EngineNote(std::span<const InstanceConfig> instances, double time_scale) {
  bool sim = false, cpu = false;
  for (const auto& i : instances) (i.engine == "cpu" ? cpu : sim) = true;
  char buf[128];
  std::snprintf(buf, sizeof buf, "sim engine emulating the GPUs at time scale %g", time_scale);
  const std::string cpu_note = "cpu engine computing real tokens in real time";
  if (sim && cpu) return std::string(buf) + ", " + cpu_note;
  return cpu ? cpu_note : buf;
}

void RunServe(const ServeArgs& a) {
  ClusterConfig cluster = LoadWithOverrides(a);
  if (a.port >= 0) cluster.serve.port = a.port;
  const ProfileSet profiles = ProfileSet::LoadDirectory(cluster.profiles_dir);
  Gateway gateway(cluster, profiles);
  gateway.Start();
  char detail[512];
  std::snprintf(detail, sizeof detail, "%zu instance%s in this process; %s; %s; %s", cluster.instances.size(),
                cluster.instances.size() == 1 ? "" : "s",
                EngineNote(cluster.instances, cluster.serve.time_scale).c_str(), KeysNote(cluster).c_str(),
                StateNote(cluster).c_str());
  ServeUntilSignal(gateway, [&] { gateway.Stop(); }, cluster.serve.host, cluster.serve.port, a, "serve", detail,
                   cluster.serve);
}

void RunInstance(const ServeArgs& a) {
  ClusterConfig cluster = LoadWithOverrides(a);
  std::size_t index = cluster.instances.size();
  if (a.name.empty() && cluster.instances.size() == 1) index = 0;
  for (std::size_t i = 0; i < cluster.instances.size() && !a.name.empty(); ++i) {
    if (cluster.instances[i].name == a.name) index = i;
  }
  if (index == cluster.instances.size()) {
    std::string names;
    for (const auto& ic : cluster.instances) names += (names.empty() ? "" : ", ") + ic.name;
    throw InputError("--name", a.name.empty() ? "the config has several instances; name one of: " + names
                                              : "no instance '" + a.name + "' in " + cluster.source + " (it has: " +
                                                    names + ")");
  }
  const std::string& address = cluster.instance_addresses[index];
  std::string host = a.host.empty() && !address.empty() ? HostOf(address) : cluster.serve.host;
  int port = a.port >= 0 ? a.port : !address.empty() ? PortOf(address) : -1;
  if (port < 0) {
    throw InputError("instance '" + cluster.instances[index].name + "'",
                     "no address to listen on: set its address = \"IP:PORT\" in the config or pass --port");
  }
  const ProfileSet profiles = ProfileSet::LoadDirectory(cluster.profiles_dir);
  InstanceService service(cluster.instances[index], profiles, cluster.serve);
  service.Start();
  char detail[512];
  std::snprintf(detail, sizeof detail, "instance '%s'; %s; %s", service.name().c_str(),
                EngineNote(std::span(&cluster.instances[index], 1), cluster.serve.time_scale).c_str(),
                KeysNote(cluster).c_str());
  ServeUntilSignal(service, [&] { service.Stop(); }, host, port, a, "instance", detail, cluster.serve);
}

void RunGateway(const ServeArgs& a) {
  ClusterConfig cluster = LoadWithOverrides(a);
  if (a.port >= 0) cluster.serve.port = a.port;
  for (const auto& flag : a.instance_address) {
    const auto eq = flag.find('=');
    bool found = false;
    for (std::size_t i = 0; i < cluster.instances.size() && eq != std::string::npos; ++i) {
      if (cluster.instances[i].name == flag.substr(0, eq)) {
        cluster.instance_addresses[i] = flag.substr(eq + 1);
        found = true;
      }
    }
    if (!found) throw InputError("--instance-address", "'" + flag + "' does not name an instance of the config (NAME=IP:PORT)");
  }
  // One I/O thread for the client side and the instance side: a call's
  // hops between the two never wake another thread.
  auto loop = std::make_shared<IoLoop>();
  std::vector<std::unique_ptr<InstanceLink>> links;
  for (std::size_t i = 0; i < cluster.instances.size(); ++i) {
    if (cluster.instance_addresses[i].empty()) {
      throw InputError("instance '" + cluster.instances[i].name + "'",
                       "the gateway needs its address: set address = \"IP:PORT\" or pass --instance-address");
    }
    RemoteLinkOptions options;
    // A poll answered later than two heartbeats is a missed heartbeat.
    options.poll_timeout_s = std::max(0.05, 2 * cluster.heartbeat_s / cluster.serve.time_scale);
    options.poll_key = OperatorKey(cluster.serve);
    options.keepalive_s = cluster.serve.upstream_keepalive_s;
    options.silence_s = cluster.serve.upstream_silence_s;
    options.protocol = cluster.serve.upstream_protocol;
    links.push_back(
        std::make_unique<RemoteInstanceLink>(cluster.instances[i].name, cluster.instance_addresses[i], options, loop));
  }
  const ProfileSet profiles = ProfileSet::LoadDirectory(cluster.profiles_dir);
  Gateway gateway(cluster, profiles, std::move(links));
  gateway.Start();
  char detail[512];
  std::snprintf(detail, sizeof detail, "gateway over %zu instance server%s; %s; %s", cluster.instances.size(),
                cluster.instances.size() == 1 ? "" : "s", KeysNote(cluster).c_str(), StateNote(cluster).c_str());
  ServeUntilSignal(gateway, [&] { gateway.Stop(); }, cluster.serve.host, cluster.serve.port, a, "gateway", detail,
                   cluster.serve, loop);
}

void AddCommonOptions(CLI::App* cmd, ServeArgs& args, const char* config_help) {
  cmd->add_option("--config", args.config, config_help);
  cmd->add_option("--engine", args.engine,
                  "engine of every instance, overriding the config's `engine`: sim (a model of a GPU, timed "
                  "from the profiles) or cpu (the CPU reference models computing real tokens; without --config, "
                  "the built-in configs/cpu-three-models.toml)")
      ->check(CLI::IsMember({"sim", "cpu"}));
  cmd->add_option("--host", args.host, "address to bind (overrides the config; default 127.0.0.1)");
  cmd->add_option("--time-scale", args.time_scale,
                  "emulated seconds per wall second (overrides [serve] time_scale; default 1)");
  cmd->add_option("--port-file", args.port_file, "write the bound port to this file once listening (with --port 0)");
}

void AddStateOption(CLI::App* cmd, ServeArgs& args) {
  cmd->add_option("--state", args.state,
                  "redis://[[USER]:PASSWORD@]HOST[:PORT][/DB]: share session state (session table, leases, live-lease "
                  "counts) with other gateway replicas on this Redis (overrides [serve] state; default: in this "
                  "process)");
}

}  // namespace

void AddServeCommand(CLI::App& app) {
  auto serve = std::make_shared<ServeArgs>();
  auto* cmd = app.add_subcommand(
      "serve", "Serve the OpenAI-compatible API: gateway (router) and instances in one process; the sim "
               "engine emulates the GPUs (an emulation, not a GPU), the cpu engine computes real tokens");
  AddCommonOptions(cmd, *serve, "cluster config with a [serve] table (default: the embedded TP=8 three-model server)");
  cmd->add_option("--port", serve->port, "port to bind, 0 for any (overrides [serve] port; default 8080)");
  AddStateOption(cmd, *serve);
  cmd->callback([serve] { RunServe(*serve); });

  auto inst = std::make_shared<ServeArgs>();
  cmd = app.add_subcommand("instance",
                           "Run one instance server: the scheduler of one [[instance]] on its engine (sim: an "
                           "emulation of its GPUs; cpu: the CPU reference models), with the completion API, /v1/telemetry, /admin/models/{m}/open|close, "
                           "/health and /metrics");
  AddCommonOptions(cmd, *inst, "cluster config (default: the embedded TP=8 three-model server)");
  cmd->add_option("--name", inst->name, "which [[instance]] to run (default: the only one)");
  cmd->add_option("--port", inst->port, "port to bind, 0 for any (default: the port of the instance's address)");
  cmd->callback([inst] { RunInstance(*inst); });

  auto gw = std::make_shared<ServeArgs>();
  cmd = app.add_subcommand("gateway",
                           "Run the gateway alone: the router in front of `talaria instance` servers at each "
                           "[[instance]]'s address, with the OpenAI-compatible API");
  AddCommonOptions(cmd, *gw, "cluster config whose [[instance]] tables have addresses");
  cmd->add_option("--port", gw->port, "port to bind, 0 for any (overrides [serve] port; default 8080)");
  cmd->add_option("--instance-address", gw->instance_address,
                  "NAME=IP:PORT: where instance NAME listens (overrides its address; repeatable)");
  AddStateOption(cmd, *gw);
  cmd->callback([gw] { RunGateway(*gw); });
}

}  // namespace talaria::cli
