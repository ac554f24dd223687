#include "server/realtime_instance.h"

#include <chrono>

#include "core/error.h"

namespace talaria {

class RealtimeInstance::Events final : public InstanceEvents {
 public:
  explicit Events(RealtimeInstance& owner) : owner_(owner) {}
  // Callbacks are deferred until the driver releases its lock, so one may
  // Submit (a session's next call) without deadlocking.
  void OnFirstToken(std::int64_t call_id, TimePoint at) override {
    auto it = owner_.in_flight_.find(call_id);
    if (it != owner_.in_flight_.end() && it->second->callbacks.on_first_token) {
      owner_.deferred_.push_back([cb = it->second->callbacks.on_first_token, at] { cb(at); });
    }
  }
  void OnTokens(std::int64_t call_id, std::int64_t generated, TimePoint at) override {
    auto it = owner_.in_flight_.find(call_id);
    if (it != owner_.in_flight_.end() && it->second->callbacks.on_tokens) {
      owner_.deferred_.push_back([cb = it->second->callbacks.on_tokens, generated, at] { cb(generated, at); });
    }
  }
  void OnFinished(const CallRecord& record) override {
    auto it = owner_.in_flight_.find(record.id);
    if (it == owner_.in_flight_.end()) return;
    std::shared_ptr<Pending> done(std::move(it->second));
    owner_.in_flight_.erase(it);
    if (done->callbacks.on_finished) {
      owner_.deferred_.push_back([done, record] { done->callbacks.on_finished(record); });
    }
  }
  void OnSwitch(const SwitchRecord& record) override {
    if (owner_.on_switch_) owner_.deferred_.push_back([f = owner_.on_switch_, record] { f(record); });
  }
  void OnRound(const RoundRecord&) override {}

 private:
  RealtimeInstance& owner_;
};

RealtimeInstance::RealtimeInstance(InstanceConfig config, const ProfileSet& profiles,
                                   std::unique_ptr<Engine> engine, double time_scale,
                                   std::shared_ptr<const SteadyClock> clock)
    : instance_(std::move(config), profiles),
      engine_(std::move(engine)),
      time_scale_(time_scale),
      clock_(clock != nullptr ? std::move(clock) : std::make_shared<const SteadyClock>()) {
  TALARIA_CHECK(engine_ != nullptr, "a real-time instance needs an engine");
  if (!(time_scale > 0)) throw InputError("time_scale", "must be greater than 0");
}

RealtimeInstance::~RealtimeInstance() { Stop(); }

TimePoint RealtimeInstance::Now() const {
  return TimePoint(std::chrono::duration_cast<Duration>(clock_->Now().time_since_epoch() * time_scale_));
}

void RealtimeInstance::Start() {
  const InstanceConfig& c = instance_.config();
  instance_.Warmup(c.resident.empty() ? c.models.front() : c.resident.front(), Now());
  thread_ = std::thread([this] { Loop(); });
}

void RealtimeInstance::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void RealtimeInstance::Submit(CallRequest call, Callbacks callbacks) {
  auto p = std::make_unique<Pending>();
  p->chain.assign(call.chain.begin(), call.chain.end());
  p->call = std::move(call);
  p->call.chain = p->chain;
  p->callbacks = std::move(callbacks);
  {
    std::lock_guard<std::mutex> lock(mu_);
    inbox_.push_back(std::move(p));
  }
  cv_.notify_all();
}

bool RealtimeInstance::Cancel(std::int64_t call_id) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    // Still waiting in the inbox: never reached the scheduler.
    for (auto it = inbox_.begin(); it != inbox_.end(); ++it) {
      if ((*it)->call.id == call_id) {
        inbox_.erase(it);
        return true;
      }
    }
    if (in_flight_.erase(call_id) == 0) return false;  // finished already
    cancels_.push_back(call_id);  // the scheduler drops it between steps
  }
  cv_.notify_all();
  return true;
}

InstanceTelemetry RealtimeInstance::Snapshot() {
  InstanceTelemetry t;
  std::lock_guard<std::mutex> lock(mu_);
  instance_.Snapshot(Now(), t);
  return t;
}

Instance::AdminResult RealtimeInstance::Admin(const std::string& model, bool open) {
  Instance::AdminResult r;
  {
    // Residency flags only: safe between steps and while one runs (a switch
    // in flight already made its target active, which Close refuses).
    std::lock_guard<std::mutex> lock(mu_);
    r = open ? instance_.AdminOpen(model) : instance_.AdminClose(model);
  }
  cv_.notify_all();
  return r;
}

void RealtimeInstance::Loop() {
  Events events(*this);
  std::unique_lock<std::mutex> lock(mu_);
  while (!stop_) {
    const TimePoint now = Now();
    for (std::int64_t id : cancels_) instance_.Cancel(id);
    cancels_.clear();
    while (!inbox_.empty()) {
      std::unique_ptr<Pending> p = std::move(inbox_.front());
      inbox_.pop_front();
      instance_.Enqueue(p->call, now);
      in_flight_.emplace(p->call.id, std::move(p));
    }
    // Arrivals are not known ahead in real time: decode one boundary at a
    // time, so a return is seen at the next boundary.
    const Instance::Step& step = instance_.Plan(now, now);
    if (step.kind == Instance::Step::Kind::kIdle) {
      const auto wake = step.wake_at;
      const auto has_work = [&] { return stop_ || !inbox_.empty() || !cancels_.empty(); };
      if (wake == TimePoint::max()) {
        cv_.wait(lock, has_work);
      } else {
        const auto wall = std::chrono::duration_cast<std::chrono::steady_clock::duration>(
            (wake - now) / time_scale_);
        cv_.wait_for(lock, wall, has_work);
      }
      continue;
    }
    Duration took{};
    SwitchTiming timing;
    switch (step.kind) {
      case Instance::Step::Kind::kPrefill:
      case Instance::Step::Kind::kSessionPrefill:
        took = engine_->Prefill(step.prefill);
        break;
      case Instance::Step::Kind::kDecode:
        took = engine_->Decode(step.decode);
        break;
      case Instance::Step::Kind::kSwitch:
        timing = engine_->Switch(step.switch_step);
        took = FromSeconds(timing.total_s());
        break;
      case Instance::Step::Kind::kIdle:
        break;
    }
    // An emulated step holds the (virtual) GPU for its duration; new
    // submissions queue meanwhile and join at the next boundary.
    const auto wall = std::chrono::duration_cast<std::chrono::steady_clock::duration>(took / time_scale_);
    cv_.wait_for(lock, wall, [&] { return stop_; });
    if (stop_) break;
    instance_.Commit(now + took, timing, events);
    if (!deferred_.empty()) {
      std::vector<std::function<void()>> run;
      run.swap(deferred_);
      lock.unlock();
      for (auto& f : run) f();
      lock.lock();
    }
  }
}

}  // namespace talaria
