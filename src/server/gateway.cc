#include "server/gateway.h"

#include <algorithm>
#include <chrono>
#include <set>

#include "core/error.h"
#include "engine/sim_engine.h"
#include "memory/block_hashes.h"

namespace talaria {
namespace {

// Byte-level token ids; 0-2 are reserved for special tokens.
constexpr std::int32_t kFirstByteToken = 3;

void AppendBytes(std::vector<std::int32_t>& out, const std::string& text) {
  for (unsigned char c : text) out.push_back(kFirstByteToken + c);
}

std::vector<std::string> Names(const ClusterConfig& c) {
  std::vector<std::string> out;
  for (const auto& i : c.instances) out.push_back(i.name);
  return out;
}

std::vector<std::int32_t> Tps(const ClusterConfig& c) {
  std::vector<std::int32_t> out;
  for (const auto& i : c.instances) out.push_back(i.tp);
  return out;
}

// One call in flight: what has been emitted, for the sink and the session.
struct CallState {
  std::string scoped_session;
  std::string model;
  std::int32_t instance = -1;
  std::vector<std::int32_t> prompt;
  std::vector<PrefixHash> chain;
  std::int64_t emitted = 0;
  std::string output_text;
  std::shared_ptr<CompletionSink> sink;
};

}  // namespace

std::string Gateway::FillerToken(std::int64_t index) {
  static const char* const kWords[] = {"sim", "engine", "filler", "text", "not", "a", "model", "output"};
  return std::string(kWords[index % 8]) + " ";
}

Gateway::Gateway(const ClusterConfig& cluster, const ProfileSet& profiles)
    : serve_(cluster.serve),
      profiles_(profiles),
      clock_(std::make_shared<const SteadyClock>()),
      heartbeat_s_(cluster.heartbeat_s),
      block_tokens_(cluster.instances.empty() ? 64 : cluster.instances.front().block_tokens),
      router_(cluster.router, Names(cluster), Tps(cluster), profiles) {
  if (cluster.instances.empty()) throw InputError(cluster.source, "no instances to serve");
  for (const auto& ic : cluster.instances) {
    instances_.push_back(std::make_unique<RealtimeInstance>(ic, profiles, std::make_unique<SimEngine>(),
                                                            serve_.time_scale, clock_));
    instances_.back()->SetSwitchObserver(
        [this](const SwitchRecord& r) { metrics_.switches.Add(ToString(r.path)); });
    for (const auto& m : ic.models) {
      const ModelProfile* p = profiles.Find(m, ic.tp);
      const std::int64_t limit = p != nullptr ? p->max_context_tokens : 0;
      auto [it, inserted] = model_context_.try_emplace(m, limit);
      if (!inserted) it->second = std::min(it->second, limit);
    }
  }
}

Gateway::~Gateway() { Stop(); }

TimePoint Gateway::Now() const {
  return TimePoint(std::chrono::duration_cast<Duration>(clock_->Now().time_since_epoch() * serve_.time_scale));
}

void Gateway::Start() {
  for (auto& inst : instances_) inst->Start();
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (std::size_t i = 0; i < instances_.size(); ++i) {
      router_.OnTelemetry(static_cast<std::int32_t>(i), instances_[i]->Snapshot(), Now());
    }
  }
  heartbeat_ = std::thread([this] { HeartbeatLoop(); });
}

void Gateway::Stop() {
  stop_ = true;
  if (heartbeat_.joinable()) heartbeat_.join();
  for (auto& inst : instances_) inst->Stop();
}

void Gateway::HeartbeatLoop() {
  const auto period = std::chrono::duration<double>(heartbeat_s_ / serve_.time_scale);
  auto last = std::chrono::steady_clock::now();
  while (!stop_) {
    // Short sleeps so Stop() is prompt even with a long heartbeat.
    std::this_thread::sleep_for(std::min(period, std::chrono::duration<double>(0.05)));
    if (std::chrono::steady_clock::now() - last < period) continue;
    last = std::chrono::steady_clock::now();
    for (std::size_t i = 0; i < instances_.size(); ++i) {
      InstanceTelemetry t = instances_[i]->Snapshot();
      std::lock_guard<std::mutex> lock(mu_);
      router_.OnTelemetry(static_cast<std::int32_t>(i), std::move(t), Now());
    }
  }
}

std::vector<InstanceTelemetry> Gateway::Telemetry() {
  std::vector<InstanceTelemetry> out;
  for (auto& inst : instances_) out.push_back(inst->Snapshot());
  return out;
}

std::vector<std::string> Gateway::Models() const {
  std::vector<std::string> out;
  for (const auto& [m, limit] : model_context_) out.push_back(m);
  std::sort(out.begin(), out.end());
  return out;
}

bool Gateway::ApiKeyAccepted(const std::string& key) const {
  return serve_.api_keys.empty() ||
         std::find(serve_.api_keys.begin(), serve_.api_keys.end(), key) != serve_.api_keys.end();
}

bool Gateway::Cancel(const CallHandle& handle) {
  if (handle.instance < 0 || handle.instance >= static_cast<std::int32_t>(instances_.size())) return false;
  if (!instances_[static_cast<std::size_t>(handle.instance)]->Cancel(handle.id)) return false;
  ++metrics_.failed;
  return true;
}

CallHandle Gateway::Submit(const CompletionRequest& request, const std::string& api_key,
                           std::shared_ptr<CompletionSink> sink) {
  auto limit = model_context_.find(request.model);
  if (limit == model_context_.end()) {
    ApiError e;
    e.status = 404;
    e.param = "model";
    e.code = "model_not_found";
    e.message = "the model '" + request.model + "' does not exist";
    sink->OnError(e);
    return {};
  }
  auto call = std::make_shared<CallState>();
  call->sink = std::move(sink);
  call->model = request.model;
  if (request.chat) {
    AppendBytes(call->prompt, RenderChat(request.messages));
  } else if (!request.prompt_ids.empty()) {
    call->prompt = request.prompt_ids;
  } else {
    AppendBytes(call->prompt, request.prompt_text);
  }
  const auto prompt_tokens = static_cast<std::int64_t>(call->prompt.size());
  if (prompt_tokens == 0 || prompt_tokens + request.max_tokens > limit->second) {
    ApiError e;
    e.param = request.chat ? "messages" : "prompt";
    e.code = "context_length_exceeded";
    e.message = "this model's maximum context length is " + std::to_string(limit->second) +
                " tokens; the request has " + std::to_string(prompt_tokens) + " prompt tokens and asks for " +
                std::to_string(request.max_tokens);
    call->sink->OnError(e);
    return {};
  }
  HashTokenBlocks(call->prompt, block_tokens_, call->chain);

  CallRequest c;
  RouteDecision d;
  std::int32_t call_index = 0;
  bool full_reuse = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    c.id = next_id_++;
    call->scoped_session = ScopedSessionId(api_key, request.session_id);
    if (call->scoped_session.empty()) call->scoped_session = "call-" + std::to_string(c.id);
    std::int64_t prefix = 0;
    auto s = sessions_.find(call->scoped_session);
    if (s != sessions_.end()) {
      const auto& prev = s->second.context;
      const auto n = std::min(prev.size(), call->prompt.size());
      prefix = std::mismatch(prev.begin(), prev.begin() + static_cast<std::ptrdiff_t>(n), call->prompt.begin()).first -
               prev.begin();
      full_reuse = prefix == static_cast<std::int64_t>(prev.size());
      call_index = 1;
    }
    RouteRequest route;
    route.session_id = call->scoped_session;
    route.model = request.model;
    route.prompt_tokens = prompt_tokens;
    route.prefix_tokens = prefix;
    route.continuation = call_index > 0;
    d = router_.Route(route, Now());
    c.prefix_tokens = prefix;
  }
  if (d.instance < 0) {
    metrics_.rejected.Add(ToString(d.overload));
    ApiError e;
    e.status = 429;
    e.type = "rate_limit_error";
    e.code = "no_capacity";
    e.message = std::string("no instance can take this call now (") + ToString(d.overload) + "); retry later";
    call->sink->OnError(e);
    return {};
  }
  ++metrics_.accepted;
  if (call_index > 0) ++(d.lease_hit ? metrics_.lease_hits : metrics_.lease_misses);
  call->instance = d.instance;
  c.session_id = call->scoped_session;
  c.call_index = call_index;
  c.model = request.model;
  c.prompt_tokens = prompt_tokens;
  c.output_tokens = request.max_tokens;
  c.full_reuse = full_reuse;
  c.chain = call->chain;

  RealtimeInstance::Callbacks cb;
  auto emit_to = [call](std::int64_t generated) {
    std::string delta;
    for (; call->emitted < generated; ++call->emitted) delta += FillerToken(call->emitted);
    if (!delta.empty()) {
      call->output_text += delta;
      call->sink->OnDelta(delta);
    }
  };
  cb.on_first_token = [emit_to](TimePoint) { emit_to(1); };
  cb.on_tokens = [emit_to](std::int64_t generated, TimePoint) { emit_to(generated); };
  cb.on_finished = [this, call, emit_to, output = request.max_tokens](const CallRecord& rec) {
    emit_to(output);
    {
      std::lock_guard<std::mutex> lock(mu_);
      router_.OnCompleted(call->scoped_session, call->model, call->instance,
                          static_cast<std::int64_t>(call->prompt.size()) + output, output, Now());
      auto [it, inserted] = sessions_.try_emplace(call->scoped_session);
      SessionState& s = it->second;
      if (inserted) {
        s.lru = session_lru_.insert(session_lru_.end(), it->first);
        if (sessions_.size() > kMaxSessions) {  // bounded: forget the least recently used
          sessions_.erase(session_lru_.front());
          session_lru_.pop_front();
        }
      } else {
        session_lru_.splice(session_lru_.end(), session_lru_, s.lru);
      }
      s.context = call->prompt;
      AppendBytes(s.context, call->output_text);
    }
    ++metrics_.completed;
    metrics_.kv_source.Add(ToString(rec.kv_source));
    const double ttft = ToSeconds(rec.first_token - rec.arrived);
    metrics_.ttft_s.Observe(ttft);
    metrics_.call_s.Observe(ToSeconds(rec.finished - rec.arrived));
    if (output > 1) metrics_.tpot_s.Observe(ToSeconds(rec.finished - rec.first_token) / static_cast<double>(output - 1));
    Usage u;
    u.prompt_tokens = static_cast<std::int64_t>(call->prompt.size());
    u.completion_tokens = output;
    u.cached_tokens = rec.reused_tokens;
    call->sink->OnDone(u, "length");
  };
  const CallHandle handle{d.instance, c.id};
  instances_[static_cast<std::size_t>(d.instance)]->Submit(c, std::move(cb));
  return handle;
}

}  // namespace talaria
