#include "sim/replay.h"

#include <fstream>
#include <limits>
#include <memory>
#include <set>
#include <utility>
#include <vector>

#include "core/error.h"
#include "core/units.h"
#include "driver/control_plane.h"
#include "driver/instance_runner.h"
#include "driver/session_client.h"
#include "engine/sim_engine.h"
#include "memory/block_hashes.h"
#include "sim/event_queue.h"

namespace talaria {
namespace {

// How many of a session's later calls a context's chain makes room for
// when it grows (a copy at most every this many calls, for a few calls' growth
// of spare capacity). At 1,024 instances / 100,000 sessions, 8 calls instead
// of 3 leaves the peak resident set where it was (939 MB) and takes most
// growth copies away (256 / 8,000: 24,172 -> 6,725); room for every later
// call takes them all but peaks at 973 MB (docs/benchmarks.md).
constexpr std::size_t kChainLookahead = 8;

struct SessionRun {
  std::vector<std::uint32_t> calls;  // trace indices in call order
  std::size_t next = 0;              // next call to release
  TraceSessionContext context;       // the call in flight's context blocks
  std::int32_t last_instance = -1;
  TimePoint first_intended;
};

struct CallRun {  // one per trace call: 24 bytes
  std::uint32_t session = 0;
  std::int32_t instance = -1;
  TimePoint intended;
  bool chain_ready = false;  // the session chain was extended for this call
  bool opened_model = false; // placed where its model was not open (an open followed)
  bool lease_hit = false;    // placed by consuming its session's lease
};
static_assert(sizeof(CallRun) <= 24, "a replay holds one per trace call");

enum class EventKind : std::uint8_t { kArrival, kStepDone, kWake, kTimer };
struct Event {
  EventKind kind;
  std::int32_t index;       // trace call index, instance index, or timer slot
  std::uint32_t step = 0;   // kStepDone: which step of the instance (a shortened step's first end is void)
};

// The simulator's Timer (driver/timer.h): callbacks as events in its queue,
// so they interleave with arrivals and steps in (time, sequence) order.
class EventTimer final : public Timer {
 public:
  explicit EventTimer(EventQueue<Event>& events) : events_(events) {}
  void At(TimePoint at, std::function<void()> fn) override {
    std::int32_t slot;
    if (free_.empty()) {
      slot = static_cast<std::int32_t>(callbacks_.size());
      callbacks_.emplace_back();
    } else {
      slot = free_.back();
      free_.pop_back();
    }
    callbacks_[static_cast<std::size_t>(slot)] = std::move(fn);
    events_.Push(at, Event{EventKind::kTimer, slot});
  }
  void Fire(std::int32_t slot) {
    std::function<void()> fn = std::move(callbacks_[static_cast<std::size_t>(slot)]);
    free_.push_back(slot);
    fn();
  }

 private:
  EventQueue<Event>& events_;
  std::vector<std::function<void()>> callbacks_;
  std::vector<std::int32_t> free_;
};

class Driver final : public InstanceEvents {
 public:
  Driver(const ClusterConfig& cluster, const ProfileSet& profiles, const Trace& trace,
         const ReplayOptions& options, ReplayResult& result)
      : trace_(trace), options_(options), result_(result), calls_(trace.calls.size()) {
    release_.gap_cap_s = options.gap_cap_s;
    for (const auto& ic : cluster.instances) {
      instances_.push_back(std::make_unique<Instance>(ic, profiles));
      instances_.back()->SetSizesOnly(true);  // the sim engine times steps from their sizes
      runners_.push_back(std::make_unique<InstanceRunner>(*instances_.back(), engine_));
      if (ic.block_tokens != cluster.instances.front().block_tokens) {
        throw InputError(cluster.source, "every instance must use the same block_tokens");
      }
    }
    block_tokens_ = cluster.instances.front().block_tokens;
    step_seq_.resize(instances_.size());
    if (trace.calls.size() > std::numeric_limits<std::uint32_t>::max()) {
      throw InputError("trace", "2^32 calls or more: the replay indexes calls in 32 bits");
    }
    std::size_t continuations = 0;
    for (const auto& s : GroupSessions(trace)) {
      SessionRun run;
      run.calls.reserve(s.calls.size());
      for (std::size_t i : s.calls) {
        run.calls.push_back(static_cast<std::uint32_t>(i));
        calls_[i].session = static_cast<std::uint32_t>(sessions_.size());
      }
      continuations += s.calls.size() - 1;
      sessions_.push_back(std::move(run));
    }
    result_.sessions = static_cast<std::int64_t>(sessions_.size());
    // Every call gives a TTFT, every session an SCT: held exactly.
    result_.ttft_s.Reserve(trace.calls.size());
    result_.returning_ttft_s.Reserve(continuations);
    result_.sct_s.Reserve(sessions_.size());
    control_ = std::make_unique<ControlPlane>(cluster, profiles);
    for (const auto& c : trace.calls) {
      if (AnyHost(c.model) < 0) {
        throw InputError(cluster.source, "no instance hosts model '" + c.model + "' (session '" +
                                             c.session_id + "')");
      }
    }
    if (!options.records_dir.empty()) {
      calls_out_ = OpenRecordsFile(options.records_dir, "calls.jsonl");
      rounds_out_ = OpenRecordsFile(options.records_dir, "rounds.jsonl");
      switches_out_ = OpenRecordsFile(options.records_dir, "switches.jsonl");
      timeline_out_ = OpenRecordsFile(options.records_dir, "timeline.jsonl");
      // Each instance's segments (driver/slot_timeline.h), as they close.
      for (std::size_t i = 0; i < runners_.size(); ++i) {
        const std::string& name = instances_[i]->name();
        timelines_.push_back(std::make_unique<SlotTimeline>([this, &name](const TimelineSegment& seg) {
          nlohmann::ordered_json j;
          j["instance"] = name;
          j.update(ToJson(seg));
          timeline_out_ << j.dump() << '\n';
        }));
        runners_[i]->SetTimeline(timelines_.back().get());
      }
    }
  }

  void Run() {
    for (const auto& inst : instances_) {
      const InstanceConfig& ic = inst->config();
      inst->Warmup(ic.resident.empty() ? ic.models.front() : ic.resident.front(), TimePoint{});
    }
    control_->StartHeartbeat(
        timer_, now_, [this](std::int32_t i) { Poll(i); },
        [this] { return result_.calls_completed + result_.rejected < result_.calls_total; });
    // Every session's first call, scheduled in one batch (the event queue
    // keeps them apart from its heap).
    std::vector<std::pair<TimePoint, Event>> firsts;
    firsts.reserve(sessions_.size());
    for (std::size_t s = 0; s < sessions_.size(); ++s) {
      const std::size_t first = sessions_[s].calls.front();
      const TimePoint at = AtSeconds(trace_.calls[first].gap_s * options_.start_scale);
      Intend(first, at);
      firsts.emplace_back(at, ArrivalOf(first));
    }
    events_.PushMany(firsts);
    while (!events_.empty()) {
      const auto e = events_.Pop();
      now_ = e.at;
      if (e.payload.kind == EventKind::kArrival) {
        Arrive(static_cast<std::size_t>(e.payload.index));
      } else if (e.payload.kind == EventKind::kWake) {
        Kick(e.payload.index);
      } else if (e.payload.kind == EventKind::kTimer) {
        timer_.Fire(e.payload.index);
      } else if (e.payload.step == step_seq_[static_cast<std::size_t>(e.payload.index)]) {
        InstanceRunner& runner = *runners_[static_cast<std::size_t>(e.payload.index)];
        runner.Commit(now_);
        runner.Deliver(*this);
        Kick(e.payload.index);
      }
    }
    for (const auto& runner : runners_) {
      runner->Flush();
      runner->Deliver(*this);
    }
    for (const auto& t : timelines_) t->Flush();
    if (result_.calls_completed + result_.rejected != result_.calls_total) {
      std::string state;
      for (const auto& inst : instances_) state += "\n  " + inst->Describe();
      TALARIA_CHECK(false, ("replay stalled with calls unfinished:" + state).c_str());
    }
    result_.makespan_s = ToSeconds(now_);
    for (const auto& inst : instances_) {
      result_.counters += inst->counters();
      result_.hbm_cap_bytes = std::max(result_.hbm_cap_bytes, inst->hbm_cap_bytes());
    }
    result_.hbm_peak_bytes = result_.counters.hbm_peak_bytes;
    result_.rounds = result_.counters.rounds;
    result_.router_counters = control_->counters();
  }

  void OnFirstToken(std::int64_t call_id, TimePoint at) override { AddTtft(static_cast<std::size_t>(call_id), at); }

  void OnFinished(const CallRecord& rec) override {
    const auto index = static_cast<std::size_t>(rec.id);
    const CallRun& run = calls_[index];
    SessionRun& s = sessions_[run.session];
    const TraceCall& c = trace_.calls[index];
    ++result_.calls_completed;
    control_->OnCompleted(c.session_id, c.model, run.instance, c.prompt_tokens + c.output_tokens,
                          c.output_tokens, rec.finished, c.expected_tool_s.value_or(-1.0), c.session_end);
    ++result_.kv_sources[ToString(rec.kv_source)];
    ++result_.admit_paths[ToString(rec.path)];
    if (calls_out_.is_open()) {
      nlohmann::ordered_json j;
      j["session_id"] = c.session_id;
      j["call_index"] = c.call_index;
      j["model"] = c.model;
      j["instance"] = rec.instance;
      j["intended_enqueue_s"] = ToSeconds(run.intended);
      j["arrived_s"] = ToSeconds(rec.arrived);
      j["admitted_s"] = ToSeconds(rec.admitted);
      j["first_token_s"] = ToSeconds(rec.first_token);
      j["finished_s"] = ToSeconds(rec.finished);
      j["ttft_s"] = ToSeconds(rec.first_token - run.intended);
      j["admit_path"] = ToString(rec.path);
      j["kv_source"] = ToString(rec.kv_source);
      j["reused_tokens"] = rec.reused_tokens;
      j["preemptions"] = rec.preemptions;
      j["lease_hit"] = run.lease_hit;
      j["opened_model"] = run.opened_model;
      calls_out_ << j.dump() << '\n';
    }
    ReleaseNext(s, rec.finished);
    if (options_.progress && ToSeconds(rec.finished) >= next_progress_s_) {
      next_progress_s_ = ToSeconds(rec.finished) + 60.0;
      options_.progress(result_.calls_completed, result_.calls_total);
    }
  }

  void OnSwitch(const SwitchRecord& rec) override {
    // An open (the model's weights were not resident) is avoidable when
    // another instance has the model open as it starts: whether a placement
    // caused it or the model was closed with work queued and had to come
    // back later.
    if (rec.opened) {
      for (const auto& other : instances_) {
        if (other->name() != rec.instance && other->Resident(rec.to)) {
          ++result_.avoidable_opens;
          break;
        }
      }
    }
    result_.switch_ms.Add(rec.timing.total_s() * 1e3);
    ++result_.switch_paths[ToString(rec.path)];
    if (switches_out_.is_open()) {
      nlohmann::ordered_json j;
      j["instance"] = rec.instance;
      j["from"] = rec.from;
      j["to"] = rec.to;
      j["start_s"] = ToSeconds(rec.start);
      j["path"] = ToString(rec.path);
      j["total_ms"] = rec.timing.total_s() * 1e3;
      j["save_teardown_ms"] = rec.timing.save_teardown_s * 1e3;
      j["open_weights_ms"] = rec.timing.open_weights_s * 1e3;
      j["kv_shell_ms"] = rec.timing.kv_shell_s * 1e3;
      j["runtime_graph_ms"] = rec.timing.runtime_graph_s * 1e3;
      j["publish_ms"] = rec.timing.publish_s * 1e3;
      j["staged_bytes"] = rec.staged_bytes;
      j["weight_bytes"] = rec.weight_bytes;
      j["staged_coverage"] = rec.weight_bytes > 0 ? static_cast<double>(rec.staged_bytes) /
                                                        static_cast<double>(rec.weight_bytes)
                                                  : 0.0;
      j["dirty_bytes"] = rec.dirty_bytes;
      j["recapture"] = rec.recapture;
      j["opened"] = rec.opened;
      switches_out_ << j.dump() << '\n';
    }
  }

  void OnRound(const RoundRecord& rec) override {
    result_.active_s += rec.active_s;
    result_.switch_s += rec.switch_s;
    if (rounds_out_.is_open()) {
      nlohmann::ordered_json j;
      j["instance"] = rec.instance;
      j["round"] = rec.index;
      j["start_s"] = ToSeconds(rec.start);
      j["wall_s"] = rec.active_s + rec.switch_s;
      j["active_s"] = rec.active_s;
      j["switch_s"] = rec.switch_s;
      j["slots"] = rec.slots;
      j["sp_admitted"] = rec.sp_admitted;
      j["sp_deferred"] = rec.sp_deferred;
      rounds_out_ << j.dump() << '\n';
    }
  }

 private:
  std::int32_t AnyHost(const std::string& model) const {
    for (std::size_t i = 0; i < instances_.size(); ++i) {
      if (instances_[i]->Hosts(model)) return static_cast<std::int32_t>(i);
    }
    return -1;
  }

  // A call's schedule-aware TTFT: from its intended release to `at` (its
  // first token, or its rejection).
  void AddTtft(std::size_t call, TimePoint at) {
    const double ttft = ToSeconds(at - calls_[call].intended);
    result_.ttft_s.Add(ttft);
    if (trace_.calls[call].call_index > 0) result_.returning_ttft_s.Add(ttft);
  }

  // The heartbeat's poll of one instance: its snapshot as of now.
  void Poll(std::int32_t i) {
    CatchUp(i);
    instances_[static_cast<std::size_t>(i)]->Snapshot(now_, telemetry_, !control_->WantsFullSnapshot(i));
    control_->OnTelemetry(i, telemetry_, now_);
  }

  // After a session's call ends (finished or rejected), release its next call.
  void ReleaseNext(SessionRun& s, TimePoint done) {
    if (s.next < s.calls.size()) {
      Release(s.calls[s.next], done + FromSeconds(release_.GapSeconds(trace_.calls[s.calls[s.next]])));
    } else {
      result_.sct_s.Add(ToSeconds(done - s.first_intended));
      s.context.End();  // the session is over: free its context
    }
  }

  void Release(std::size_t call, TimePoint at) {
    Intend(call, at);
    events_.Push(at, ArrivalOf(call));
  }
  static Event ArrivalOf(std::size_t call) { return Event{EventKind::kArrival, static_cast<std::int32_t>(call)}; }
  // A call's intended arrival, and its session's next call: what Release
  // does besides scheduling the arrival.
  void Intend(std::size_t call, TimePoint at) {
    CallRun& run = calls_[call];
    run.intended = at;
    SessionRun& s = sessions_[run.session];
    if (s.next == 0) s.first_intended = at;
    ++s.next;
  }

  void Arrive(std::size_t call) {
    const TraceCall& c = trace_.calls[call];
    CallRun& run = calls_[call];
    SessionRun& s = sessions_[run.session];
    if (!run.chain_ready) {
      // Room for the session's next contexts too: a chain an instance holds
      // then grows in place instead of as a copy per call.
      std::int64_t room = 0;
      for (std::size_t k = s.next - 1; k < std::min(s.calls.size(), s.next + kChainLookahead); ++k) {
        const TraceCall& later = trace_.calls[s.calls[k]];
        room = std::max(room, later.prompt_tokens + later.output_tokens);
      }
      s.context.Advance(c, block_tokens_, room);
      run.chain_ready = true;
    }
    RouteRequest route;
    route.session_id = c.session_id;
    route.model = c.model;
    route.prompt_tokens = c.prompt_tokens;
    route.prefix_tokens = c.prefix_tokens;
    route.continuation = c.call_index > 0;
    const ControlPlane::Placement p = control_->Place(route, run.intended, now_);
    if (p.outcome == ControlPlane::Placement::Outcome::kWait) {  // waits at the gateway: arrives again
      events_.Push(p.retry_at, ArrivalOf(call));
      return;
    }
    if (p.outcome == ControlPlane::Placement::Outcome::kRejected) {
      ++result_.rejected;
      ++result_.rejected_by_reason[ToString(p.decision.overload)];
      // Its TTFT counts at the wait it was rejected after, so dropping a
      // call never improves the percentiles (its session's SCT goes on).
      AddTtft(call, now_);
      ReleaseNext(s, now_);
      return;
    }
    const RouteDecision& d = p.decision;
    if (now_ > run.intended) result_.gateway_wait_s.Add(ToSeconds(now_ - run.intended));
    if (p.last_resort) ++result_.last_resort_placements;
    Instance& inst = *instances_[static_cast<std::size_t>(d.instance)];
    if (c.call_index > 0) {
      ++result_.continuations;
      if (s.last_instance == d.instance) ++result_.same_instance_returns;
    }
    run.lease_hit = d.lease_hit;
    run.opened_model = !inst.Resident(c.model);
    if (inst.Resident(c.model)) ++result_.residency_hits;
    s.last_instance = d.instance;
    run.instance = d.instance;
    inst.Enqueue(s.context.Request(c, static_cast<std::int64_t>(call)), now_);
    Interrupt(run.instance);
    Kick(run.instance);
  }

  // A snapshot sees an instance as of its last decode boundary, as a real
  // one would: a long decode step in flight is split at the last boundary
  // before now, its first part committed there.
  void CatchUp(std::int32_t index) {
    Instance& inst = *instances_[static_cast<std::size_t>(index)];
    if (!inst.busy() || inst.step_in_flight().kind != Instance::Step::Kind::kDecode) return;
    DecodeStep part = inst.step_in_flight().decode;
    const TimePoint start = inst.step_started();
    const double step_s = part.model->DecodeStepSeconds(part.batch, part.mean_context_tokens);
    part.iterations = static_cast<std::int32_t>(
        std::min<double>(part.iterations - 1, std::floor(ToSeconds(now_ - start) / step_s)));
    while (part.iterations >= 1 && start + engine_.Decode(part) > now_) --part.iterations;
    if (part.iterations < 1) return;
    InstanceRunner& runner = *runners_[static_cast<std::size_t>(index)];
    runner.SplitDecode(start + engine_.Decode(part), part.iterations);
    runner.Deliver(*this);
    Retime(index);
  }

  // An instance decoding several iterations in one step sees what happened
  // at the next iteration boundary: the step is shortened and timed again,
  // and its first completion event voided. Only the instance concerned is
  // touched, so a step's length does not shrink with the cluster's size.
  void Interrupt(std::int32_t index) {
    Instance& inst = *instances_[static_cast<std::size_t>(index)];
    if (inst.busy() && inst.ShortenDecode(now_)) Retime(index);
  }

  // The decode step in flight changed: a new end event, the old one void.
  void Retime(std::int32_t index) {
    const Instance& inst = *instances_[static_cast<std::size_t>(index)];
    const TimePoint end = std::max(now_, inst.step_started() + engine_.Decode(inst.step_in_flight().decode));
    events_.Push(end, Event{EventKind::kStepDone, index, ++step_seq_[static_cast<std::size_t>(index)]});
  }

  void Kick(std::int32_t index) {
    InstanceRunner& runner = *runners_[static_cast<std::size_t>(index)];
    if (runner.instance().busy()) return;
    // No horizon: arrivals (Interrupt) and heartbeats (CatchUp) cut a long decode.
    const Instance::Step& step = runner.Plan(now_, TimePoint::max());
    if (step.kind == Instance::Step::Kind::kIdle) {
      if (step.wake_at != TimePoint::max()) events_.Push(step.wake_at, Event{EventKind::kWake, index});
      return;
    }
    const Duration took = runner.Execute();
    events_.Push(now_ + took, Event{EventKind::kStepDone, index, ++step_seq_[static_cast<std::size_t>(index)]});
  }

  const Trace& trace_;
  const ReplayOptions& options_;
  ReleaseRule release_;
  ReplayResult& result_;
  SimEngine engine_;  // models every instance's step times (stateless)
  std::vector<std::unique_ptr<Instance>> instances_;
  std::vector<std::unique_ptr<InstanceRunner>> runners_;  // index-aligned with instances_
  std::vector<std::uint32_t> step_seq_;  // per instance: the step whose end is awaited
  std::vector<SessionRun> sessions_;
  std::vector<CallRun> calls_;
  EventQueue<Event> events_;
  EventTimer timer_{events_};
  std::unique_ptr<ControlPlane> control_;
  InstanceTelemetry telemetry_;  // one buffer for every heartbeat's snapshot
  TimePoint now_{};
  std::int32_t block_tokens_ = 64;
  double next_progress_s_ = 60.0;
  std::ofstream calls_out_, rounds_out_, switches_out_, timeline_out_;
  std::vector<std::unique_ptr<SlotTimeline>> timelines_;  // with records only
};

}  // namespace

ReplayResult RunReplay(const std::string& config_name, const ClusterConfig& cluster,
                       const ProfileSet& profiles, const Trace& trace, const ReplayOptions& options) {
  ReplayResult result;
  result.config = config_name;
  result.router = ToString(cluster.router.policy);
  result.tau_s = cluster.router.lease_tau_s;
  result.lease = ToString(cluster.router.lease);
  result.lease_honour = ToString(cluster.router.lease_honour);
  result.calls_total = static_cast<std::int64_t>(trace.calls.size());
  Driver driver(cluster, profiles, trace, options, result);
  driver.Run();
  return result;
}

}  // namespace talaria
