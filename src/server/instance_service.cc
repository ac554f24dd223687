#include "server/instance_service.h"

#include <algorithm>

#include "core/error.h"
#include "core/units.h"
#include "engine/cpu_engine.h"
#include "engine/cpu_profile.h"
#include "engine/sim_engine.h"
#include "memory/block_hashes.h"
#include "server/telemetry_json.h"
#include "server/timeline_json.h"

namespace talaria {
namespace {

// One call in flight: the prompt and chain the scheduler reads, and what
// has been emitted.
struct CallState {
  std::string session;
  std::vector<std::int32_t> prompt;
  std::vector<PrefixHash> chain;
  std::int64_t emitted = 0;
  std::string output_text;
  std::shared_ptr<CompletionSink> sink;
  bool computed = false;  // the engine computes tokens: never filler

  // An engine that computes sends the token ids it generated (byte tokens:
  // the text is their bytes); one that models time sends none, and the
  // deterministic filler stands in for them.
  void Emit(std::int64_t generated, std::span<const std::int32_t> ids) {
    std::string delta;
    if (computed) {
      for (std::int32_t id : ids) {
        if (id >= kFirstByteToken) delta += static_cast<char>(id - kFirstByteToken);
      }
      emitted += static_cast<std::int64_t>(ids.size());
    } else {
      for (; emitted < generated; ++emitted) delta += InstanceService::FillerToken(emitted);
    }
    if (delta.empty()) return;
    output_text += delta;
    sink->OnDelta(delta);
  }
};

std::unique_ptr<Engine> MakeEngine(const InstanceConfig& config) {
  if (config.engine != "cpu") return std::make_unique<SimEngine>();
  if (config.tp != 1) throw InputError("instance '" + config.name + "'", "the cpu engine runs tp = 1");
  std::vector<CpuModelConfig> models;
  for (const std::string& name : config.models) {
    CpuModelConfig c;
    if (!CpuModelByName(name, c)) {
      std::string known;
      for (const auto& k : CpuModelCatalog()) known += (known.empty() ? "" : ", ") + k.name;
      throw InputError("instance '" + config.name + "'",
                       "model '" + name + "' is not a cpu engine model (known: " + known + ")");
    }
    models.push_back(c);
  }
  CpuEngineOptions o;
  o.host_kv_bytes = static_cast<std::int64_t>(config.host_kv_gib_per_rank * static_cast<double>(kGiB));
  return std::make_unique<CpuEngine>(std::move(models), o);
}

ApiError AdminError(int status, std::string code, std::string message) {
  ApiError e;
  e.status = status;
  e.param = "model";
  e.code = std::move(code);
  e.message = std::move(message);
  return e;
}

}  // namespace

std::string InstanceService::FillerToken(std::int64_t index) {
  static const char* const kWords[] = {"sim", "engine", "filler", "text", "not", "a", "model", "output"};
  return std::string(kWords[index % 8]) + " ";
}

InstanceService::InstanceService(InstanceConfig config, const ProfileSet& profiles, const ServeOptions& serve,
                                 std::shared_ptr<const SteadyClock> clock)
    : catalog_(std::span<const InstanceConfig>(&config, 1), profiles),
      block_tokens_(config.block_tokens),
      api_keys_(AcceptedKeys(serve)),
      operator_key_(OperatorKey(serve)),
      driver_(config, profiles, MakeEngine(config), serve.time_scale, std::move(clock)),
      sessions_(100'000, serve.session_idle_s, [this](Duration sct) { metrics_.session_s.Observe(ToSeconds(sct)); }) {
  driver_.SetSwitchObserver([this](const SwitchRecord& r) {
    metrics_.switches.Add(ToString(r.path));
    histograms_.OnSwitch(r);
    if (switch_observer_) switch_observer_(r);
  });
  driver_.SetRoundObserver([this](const RoundRecord& r) { histograms_.OnRound(r); });
}

InstanceService::~InstanceService() { Stop(); }

std::string InstanceService::RenderMetrics() {
  std::string out = metrics_.Render();
  const InstanceTelemetry snapshot = Snapshot();
  const InstanceCounters counters = Counters();
  const StepFidelity fidelity = driver_.Fidelity();
  const InstanceSample self{&snapshot, name(), &counters, &histograms_, snapshot.sessions.size(), &fidelity};
  RenderInstanceMetrics(out, std::span(&self, 1));
  return out;
}

void InstanceService::SetSwitchObserver(std::function<void(const SwitchRecord&)> observer) {
  switch_observer_ = std::move(observer);
}

void InstanceService::Start() { driver_.Start(); }
void InstanceService::Stop() { driver_.Stop(); }

std::int64_t InstanceService::Submit(const CompletionRequest& request, const std::string& api_key,
                                     std::shared_ptr<CompletionSink> sink) {
  auto prompt = catalog_.PromptTokens(request);
  if (auto* e = std::get_if<ApiError>(&prompt)) {
    sink->OnError(*e);
    return -1;
  }
  return SubmitTokens(request.model, std::move(std::get<std::vector<std::int32_t>>(prompt)), request.max_tokens,
                      ScopedSessionId(api_key, request.session_id), std::move(sink),
                      AgentHints{request.expected_tool_s, request.session_end});
}

std::int64_t InstanceService::SubmitTokens(const std::string& model, std::vector<std::int32_t> prompt,
                                           std::int64_t max_tokens, const std::string& session,
                                           std::shared_ptr<CompletionSink> sink, AgentHints hints) {
  auto call = std::make_shared<CallState>();
  call->sink = std::move(sink);
  call->computed = driver_.computes_tokens();
  call->prompt = std::move(prompt);
  HashTokenBlocks(call->prompt, block_tokens_, call->chain);
  const std::int64_t id = next_id_++;
  call->session = session.empty() ? "call-" + std::to_string(id) : session;
  SessionContexts::Match match;
  {
    std::lock_guard<std::mutex> lock(mu_);
    match = sessions_.Find(call->session, call->prompt);
  }
  CallRequest c = PromptRequest(id, call->session, model, call->prompt, call->chain, max_tokens, match);
  c.expected_tool_s = hints.expected_tool_s;
  c.session_end = hints.session_end;
  ++metrics_.accepted;

  RealtimeInstance::Callbacks cb;
  cb.on_first_token = [call](std::span<const std::int32_t> ids, TimePoint) { call->Emit(1, ids); };
  cb.on_tokens = [call](std::int64_t generated, std::span<const std::int32_t> ids, TimePoint) {
    call->Emit(generated, ids);
  };
  cb.on_finished = [this, call, max_tokens](const CallRecord& rec) {
    if (!call->computed) call->Emit(max_tokens, {});
    {
      std::vector<std::int32_t> context = call->prompt;
      AppendByteTokens(context, call->output_text);
      std::lock_guard<std::mutex> lock(mu_);
      sessions_.Update(call->session, std::move(context), rec.arrived, rec.finished);
    }
    ++metrics_.completed;
    metrics_.kv_source.Add(ToString(rec.kv_source));
    metrics_.ttft_s.Observe(ToSeconds(rec.first_token - rec.arrived));
    metrics_.call_s.Observe(ToSeconds(rec.finished - rec.arrived));
    if (max_tokens > 1) {
      metrics_.tpot_s.Observe(ToSeconds(rec.finished - rec.first_token) / static_cast<double>(max_tokens - 1));
    }
    Usage u;
    u.prompt_tokens = static_cast<std::int64_t>(call->prompt.size());
    u.completion_tokens = max_tokens;
    u.cached_tokens = rec.reused_tokens;
    u.kv_source = ToString(rec.kv_source);
    u.instance = rec.instance;
    call->sink->OnDone(u, "length");
  };
  driver_.Submit(c, std::move(cb));
  return id;
}

bool InstanceService::Cancel(std::int64_t id) {
  if (id < 0 || !driver_.Cancel(id)) return false;
  ++metrics_.failed;
  return true;
}

nlohmann::json InstanceService::Telemetry() { return TelemetryToJson(driver_.Snapshot()); }

nlohmann::json InstanceService::TimelineEntry(std::uint64_t after) {
  const RealtimeInstance::TimelineView v = driver_.Timeline(after);
  return TimelineToJson(name(), v.now, v.segments, v.open);
}

nlohmann::json InstanceService::Timeline(const std::vector<std::uint64_t>& after) {
  return nlohmann::json{{"instances", nlohmann::json::array({TimelineEntry(after.empty() ? 0 : after.front())})}};
}

std::variant<nlohmann::json, ApiError> InstanceService::Admin(const std::string& model, const std::string& action) {
  if (action != "open" && action != "close") {
    ApiError e = AdminError(404, "not_found", "unknown admin action '" + action + "' (use open or close)");
    e.param.clear();
    return e;
  }
  const bool open = action == "open";
  switch (driver_.Admin(model, open)) {
    case Instance::AdminResult::kUnknownModel:
      return AdminError(404, "model_not_found", "the model '" + model + "' is not in this instance's catalogue");
    case Instance::AdminResult::kBusy:
      return AdminError(409, "model_busy",
                        "the model '" + model + "' is active or has calls queued or running; close it when idle");
    case Instance::AdminResult::kAlready:
    case Instance::AdminResult::kDone:
      break;
  }
  return nlohmann::json{{"instance", driver_.name()}, {"model", model}, {"resident", open}};
}

}  // namespace talaria
