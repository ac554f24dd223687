#include "server/realtime_instance.h"

#include <algorithm>
#include <chrono>

#ifdef __linux__
#include <sys/prctl.h>
#endif

#include "core/error.h"
#include "core/random.h"
#include "memory/block_hashes.h"

namespace talaria {

namespace {

Engine& NonNull(const std::unique_ptr<Engine>& engine) {
  TALARIA_CHECK(engine != nullptr, "a real-time instance needs an engine");
  return *engine;
}

}  // namespace

// Receives a commit's events from the runner, on the driver thread with
// the driver's lock released: looks the call up under the lock, then runs
// the caller's callback unlocked, so a callback may Submit (a session's
// next call) or Cancel without deadlocking.
class RealtimeInstance::Events final : public InstanceEvents {
 public:
  explicit Events(RealtimeInstance& owner) : owner_(owner) {}
  void OnFirstToken(std::int64_t call_id, TimePoint at) override {
    Pending* p = owner_.Find(call_id);
    if (p != nullptr && p->callbacks.on_first_token) p->callbacks.on_first_token(owner_.NewTokens(*p, 1), at);
  }
  void OnTokens(std::int64_t call_id, std::int64_t generated, TimePoint at) override {
    Pending* p = owner_.Find(call_id);
    if (p != nullptr && p->callbacks.on_tokens) p->callbacks.on_tokens(generated, owner_.NewTokens(*p, generated), at);
  }
  void OnFinished(const CallRecord& record) override {
    owner_.engine_->Forget(record.id);
    std::unique_ptr<Pending> done;
    {
      std::lock_guard<std::mutex> lock(owner_.mu_);
      auto it = owner_.in_flight_.find(record.id);
      if (it == owner_.in_flight_.end()) return;  // cancelled
      done = std::move(it->second);
      owner_.in_flight_.erase(it);
    }
    if (done->callbacks.on_finished) done->callbacks.on_finished(record);
  }
  void OnSwitch(const SwitchRecord& record) override {
    if (owner_.on_switch_) owner_.on_switch_(record);
  }
  void OnRound(const RoundRecord& record) override {
    if (owner_.on_round_) owner_.on_round_(record);
  }

 private:
  RealtimeInstance& owner_;
};

RealtimeInstance::RealtimeInstance(InstanceConfig config, const ProfileSet& profiles,
                                   std::unique_ptr<Engine> engine, double time_scale,
                                   std::shared_ptr<const SteadyClock> clock)
    : instance_(std::move(config), profiles),
      engine_(std::move(engine)),
      runner_(instance_, NonNull(engine_)),
      time_scale_(time_scale),
      clock_(clock != nullptr ? std::move(clock) : std::make_shared<const SteadyClock>()),
      timeline_([this](const TimelineSegment& s) {
        if (recent_.size() == kTimelineKept) recent_.pop_front();
        recent_.push_back(s);
      }) {
  runner_.SetTimeline(&timeline_);
  if (!(time_scale > 0)) throw InputError("time_scale", "must be greater than 0");
  if (!engine_->emulated() && time_scale != 1.0) {
    throw InputError("time_scale", "must be 1 for instance '" + instance_.name() +
                                       "': its engine computes in real time");
  }
}

RealtimeInstance::~RealtimeInstance() { Stop(); }

TimePoint RealtimeInstance::Now() const {
  return TimePoint(std::chrono::duration_cast<Duration>(clock_->Now().time_since_epoch() * time_scale_));
}

void RealtimeInstance::Start() {
  const InstanceConfig& c = instance_.config();
  instance_.Warmup(c.resident.empty() ? c.models.front() : c.resident.front(), Now());
  engine_->Attach(instance_.substrate());
  thread_ = std::thread([this] { Loop(); });
}

void RealtimeInstance::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  stop_cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void RealtimeInstance::Submit(CallRequest call, Callbacks callbacks) {
  auto p = std::make_unique<Pending>();
  p->chain.assign(call.chain.begin(), call.chain.end());
  p->prompt.assign(call.prompt_ids.begin(), call.prompt_ids.end());
  if (computes_tokens()) {
    // The context's blocks past the prompt are named when the output is
    // known (NameContext); until then by hashes nothing else has.
    const std::int64_t bt = instance_.config().block_tokens;
    const auto blocks = static_cast<std::size_t>(
        std::max<std::int64_t>(0, call.prompt_tokens + call.output_tokens - 1) / bt);
    for (std::size_t i = p->chain.size(); i < blocks; ++i) {
      p->chain.push_back(Mix64(static_cast<std::uint64_t>(call.id) * 0x9E3779B97F4A7C15ull + i));
    }
  }
  p->call = std::move(call);
  p->call.chain = p->chain;
  p->call.prompt_ids = p->prompt;
  p->callbacks = std::move(callbacks);
  bool wake = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    inbox_.push_back(std::move(p));
    wake = idle_;
  }
  if (wake) cv_.notify_one();
}

bool RealtimeInstance::Cancel(std::int64_t call_id) {
  bool wake = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    // Still waiting in the inbox: never reached the scheduler.
    for (auto it = inbox_.begin(); it != inbox_.end(); ++it) {
      if ((*it)->call.id == call_id) {
        inbox_.erase(it);
        return true;
      }
    }
    auto it = in_flight_.find(call_id);
    if (it == in_flight_.end()) return false;  // finished already
    cancelled_.push_back(std::move(it->second));  // a step in flight may still read it
    in_flight_.erase(it);
    cancels_.push_back(call_id);  // the scheduler drops it between steps
    wake = idle_;
  }
  if (wake) cv_.notify_one();
  return true;
}

InstanceTelemetry RealtimeInstance::Snapshot() {
  InstanceTelemetry t;
  std::lock_guard<std::mutex> lock(mu_);
  instance_.Snapshot(Now(), t);
  return t;
}

RealtimeInstance::TimelineView RealtimeInstance::Timeline(std::uint64_t after) {
  TimelineView view;
  std::lock_guard<std::mutex> lock(mu_);
  view.now = Now();
  // Segments are numbered in order: skip to the first after `after`.
  auto it = std::partition_point(recent_.begin(), recent_.end(),
                                 [after](const TimelineSegment& s) { return s.seq <= after; });
  view.segments.assign(it, recent_.end());
  view.open = timeline_.open();
  return view;
}

InstanceCounters RealtimeInstance::Counters() {
  std::lock_guard<std::mutex> lock(mu_);
  return instance_.counters();
}

StepFidelity RealtimeInstance::Fidelity() {
  std::lock_guard<std::mutex> lock(mu_);
  return runner_.fidelity();
}

Instance::AdminResult RealtimeInstance::Admin(const std::string& model, bool open) {
  Instance::AdminResult r;
  bool wake = false;
  {
    // Residency flags only: safe between steps and while one runs (a switch
    // in flight already made its target active, which Close refuses).
    std::lock_guard<std::mutex> lock(mu_);
    r = open ? instance_.AdminOpen(model) : instance_.AdminClose(model);
    wake = idle_;
  }
  if (wake) cv_.notify_one();
  return r;
}

RealtimeInstance::Pending* RealtimeInstance::Find(std::int64_t call_id) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = in_flight_.find(call_id);
  // A cancelled call's entry stays alive (in cancelled_) until the next
  // step, so the pointer outlives this delivery.
  return it == in_flight_.end() ? nullptr : it->second.get();
}

void RealtimeInstance::Loop() {
#ifdef __linux__
  // Timed waits end within 1 us of their deadline instead of Linux's
  // default 50 us slack: an emulated step sleeps its modelled duration,
  // which at a high time scale is a few microseconds, so the slack made
  // every step last ~50 us longer than its model.
  prctl(PR_SET_TIMERSLACK, 1000UL, 0UL, 0UL, 0UL);
#endif
  Events events(*this);
  std::unique_lock<std::mutex> lock(mu_);
  // The last step's end while the loop has not waited idle since: the time
  // from there to the next step's start is the driver's own (fidelity).
  bool after_step = false;
  TimePoint step_end{};
  const auto count_boundary = [&](TimePoint start) {
    if (!after_step) return;
    StepFidelity& f = runner_.fidelity();
    ++f.boundaries;
    f.boundary_s += ToSeconds(start - step_end);
  };
  while (!stop_) {
    const TimePoint now = Now();
    for (std::int64_t id : cancels_) {
      instance_.Cancel(id);
      engine_->Forget(id);
    }
    cancels_.clear();
    cancelled_.clear();
    while (!inbox_.empty()) {
      std::unique_ptr<Pending> p = std::move(inbox_.front());
      inbox_.pop_front();
      instance_.Enqueue(p->call, now);
      in_flight_.emplace(p->call.id, std::move(p));
    }
    // Arrivals are not known ahead in real time: decode one boundary at a
    // time, so a return is seen at the next boundary.
    const Instance::Step& step = runner_.Plan(now, now);
    if (step.kind == Instance::Step::Kind::kIdle) {
      const auto wake = step.wake_at;
      const auto has_work = [&] { return stop_ || !inbox_.empty() || !cancels_.empty(); };
      idle_ = true;
      after_step = false;
      if (wake == TimePoint::max()) {
        cv_.wait(lock, has_work);
      } else {
        const auto wall = std::chrono::duration_cast<std::chrono::steady_clock::duration>(
            (wake - now) / time_scale_);
        cv_.wait_for(lock, wall, has_work);
      }
      idle_ = false;
      continue;
    }
    if (engine_->emulated()) {
      count_boundary(now);
      const Duration took = runner_.Execute();
      // An emulated step holds the (virtual) GPU for its duration; new
      // submissions queue meanwhile and join at the next boundary.
      const auto wall = std::chrono::duration_cast<std::chrono::steady_clock::duration>(took / time_scale_);
      stop_cv_.wait_for(lock, wall, [&] { return stop_; });
      if (stop_) break;
      step_end = now + took;
      after_step = true;
      runner_.Commit(step_end);
    } else {
      count_boundary(Now());
      // A computing step runs unlocked: submissions, snapshots and admin
      // calls go on meanwhile (they touch neither the step nor the KV pool).
      lock.unlock();
      runner_.Execute();
      lock.lock();
      if (stop_) break;
      NameContexts(step);
      step_end = Now();
      after_step = true;
      runner_.Commit(step_end);
    }
    lock.unlock();
    runner_.Deliver(events);
    lock.lock();
  }
}

void RealtimeInstance::NameContexts(const Instance::Step& step) {
  const auto name = [&](std::int64_t call_id) {
    auto it = in_flight_.find(call_id);
    if (it == in_flight_.end()) return;
    Pending& p = *it->second;
    const auto out = engine_->Output(call_id);
    if (static_cast<std::int64_t>(out.size()) < p.call.output_tokens) return;
    // Finished: its context is the prompt and every output token but the
    // last (the KV the engine holds), named by the same hashes as a prompt.
    std::vector<std::int32_t> context = p.prompt;
    context.insert(context.end(), out.begin(), out.end() - 1);
    std::vector<PrefixHash> hashes;
    HashTokenBlocks(context, instance_.config().block_tokens, hashes);
    std::copy_n(hashes.begin(), std::min(hashes.size(), p.chain.size()), p.chain.begin());
  };
  if (step.kind == Instance::Step::Kind::kDecode) {
    for (const SeqRef& s : step.decode.seqs) name(s.call_id);
  } else if (step.kind == Instance::Step::Kind::kPrefill || step.kind == Instance::Step::Kind::kSessionPrefill) {
    for (const PrefillItem& i : step.prefill.items) name(i.seq.call_id);
  }
}

std::vector<std::int32_t> RealtimeInstance::NewTokens(Pending& p, std::int64_t generated) {
  const auto out = engine_->Output(p.call.id);
  const auto upto = std::min<std::int64_t>(generated, static_cast<std::int64_t>(out.size()));
  if (upto <= p.delivered) return {};
  std::vector<std::int32_t> ids(out.begin() + p.delivered, out.begin() + upto);
  p.delivered = upto;
  return ids;
}

}  // namespace talaria
