#include "trace/generator.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <unordered_map>

#include "core/error.h"
#include "core/random.h"

namespace talaria {
namespace {

constexpr double kZ95 = 1.6448536269514722;  // standard normal 95th percentile

// Every fixed-replay task has at least this many calls, so the routing
// subset (the first four calls of each session) is complete.
constexpr std::int32_t kMinTaskCalls = 4;

double RoundMs(double seconds) { return std::round(seconds * 1000.0) / 1000.0; }

std::uint64_t TokenSeed(std::uint64_t seed, std::uint64_t index) {
  return Mix64(seed ^ Mix64(index + 0x5eed)) & kMaxTokenSeed;
}

// The shape of one session, model-independent.
struct CallShape {
  std::int64_t prompt = 0;
  std::int64_t prefix = 0;
  std::int64_t output = 0;
  double gap_s = 0.0;  // tool gap before this call (unused for call 0)
};

std::int64_t Clamp(double x, std::int64_t lo, std::int64_t hi) {
  return std::clamp(static_cast<std::int64_t>(std::llround(x)), lo, hi);
}

std::vector<CallShape> GenerateShape(Rng& rng, std::int32_t calls, const GeneratorOptions& o) {
  const double gap_sigma = std::log(o.gap_p95_s / o.gap_p50_s) / kZ95;
  std::vector<CallShape> shape(static_cast<std::size_t>(calls));
  const double tool_result_p50 =
      o.tool_result_p50_tokens * rng.LogNormal(1.0, o.session_growth_sigma);
  std::int64_t previous_context = 0;
  for (std::int32_t k = 0; k < calls; ++k) {
    CallShape& c = shape[static_cast<std::size_t>(k)];
    c.output = Clamp(rng.LogNormal(o.output_p50_tokens, o.output_sigma), 1, o.output_max_tokens);
    if (k == 0) {
      c.prompt = Clamp(rng.LogNormal(o.first_prompt_p50_tokens, o.first_prompt_sigma), 256,
                       o.max_context_tokens / 2);
    } else {
      const double u = rng.Uniform();
      const double half = static_cast<double>(previous_context) / 2.0;
      if (u < o.full_reuse_probability) {
        c.prefix = previous_context;
      } else if (u < o.reuse_over_half_probability) {
        c.prefix = static_cast<std::int64_t>(std::floor(half)) + 1 +
                   static_cast<std::int64_t>(rng.Uniform() * (half - 1.0));
      } else {
        c.prefix = static_cast<std::int64_t>(rng.Uniform(0.05, 0.5) * half * 2.0);
      }
      std::int64_t added =
          Clamp(rng.LogNormal(tool_result_p50, o.tool_result_sigma), 16,
                o.tool_result_max_tokens);
      if (c.prefix + added + c.output > o.max_context_tokens) {
        // Compaction: the agent keeps a summary-sized part of its history.
        c.prefix = static_cast<std::int64_t>(rng.Uniform(0.05, 0.3) *
                                             static_cast<double>(previous_context));
      }
      c.prefix = std::clamp<std::int64_t>(c.prefix, 0, previous_context);
      // A tool result too big for what is left of the context is truncated
      // (matters only for small contexts: no draw changes, so traces with
      // room to spare are unchanged).
      added = std::max<std::int64_t>(16, std::min(added, o.max_context_tokens - c.output - c.prefix));
      c.prompt = c.prefix + added;
      if (rng.Bernoulli(k == 1 ? o.env_start_probability : 0.0)) {
        c.gap_s = rng.Uniform(o.env_start_min_s, o.env_start_max_s);
      } else if (rng.Bernoulli(o.long_gap_probability)) {
        c.gap_s = rng.Uniform(o.long_gap_min_s, o.long_gap_max_s);
      } else {
        c.gap_s = rng.LogNormal(o.gap_p50_s, gap_sigma);
      }
      c.gap_s = std::max(0.001, RoundMs(c.gap_s));
    }
    c.output = std::max<std::int64_t>(1, std::min(c.output, o.max_context_tokens - c.prompt));
    previous_context = c.prompt + c.output;
  }
  return shape;
}

void AppendSession(Trace& trace, InternedString session_id, InternedString model,
                   InternedString task, std::uint64_t token_seed, double start_s,
                   const std::vector<CallShape>& shape, double gap_cap_s) {
  for (std::size_t k = 0; k < shape.size(); ++k) {
    TraceCall c;
    c.session_id = session_id;
    c.call_index = static_cast<std::int32_t>(k);
    c.model = model;
    c.prompt_tokens = shape[k].prompt;
    c.prefix_tokens = shape[k].prefix;
    c.output_tokens = shape[k].output;
    c.gap_s = k == 0 ? start_s : shape[k].gap_s;
    if (k > 0 && gap_cap_s > 0 && c.gap_s > gap_cap_s) {
      c.gap_uncapped_s = c.gap_s;
      c.gap_s = gap_cap_s;
    }
    c.token_seed = token_seed;
    c.task = task;
    trace.calls.push_back(std::move(c));
  }
}

std::size_t ZipfPick(Rng& rng, std::size_t n, double s) {
  double total = 0;
  for (std::size_t i = 0; i < n; ++i) total += 1.0 / std::pow(static_cast<double>(i + 1), s);
  double u = rng.Uniform() * total;
  for (std::size_t i = 0; i < n; ++i) {
    u -= 1.0 / std::pow(static_cast<double>(i + 1), s);
    if (u < 0) return i;
  }
  return n - 1;
}

std::vector<double> SessionStarts(Rng& rng, std::size_t n, double rate_per_s, std::int32_t burst = 1) {
  std::vector<double> starts(n, 0.0);
  double t = 0;
  const auto b = static_cast<std::size_t>(std::max(1, burst));
  for (std::size_t i = 0; i < n && rate_per_s > 0; ++i) {
    if (i > 0 && i % b == 0) t += rng.Exponential(static_cast<double>(b) / rate_per_s);
    starts[i] = RoundMs(t);
  }
  return starts;
}

void CheckOptions(const GeneratorOptions& o) {
  ProblemList p;
  if (o.sessions < 1) p.Add("--sessions", "must be at least 1");
  if (o.models.empty()) p.Add("--models", "needs at least one model");
  for (const auto& m : o.models) {
    if (m.empty()) p.Add("--models", "contains an empty model name");
  }
  if (o.zipf_s < 0) p.Add("--zipf", "must be >= 0");
  if (o.session_rate_per_s < 0) p.Add("--session-rate", "must be >= 0");
  if (o.burst_size < 1) p.Add("--burst-size", "must be at least 1");
  const auto& d = o.calls_per_session;
  if (d.size() < 2 || d.front().q != 0.0 || d.back().q != 1.0 || d.front().value < 1) {
    p.Add("--calls-p50/--calls-p95/--calls-max", "need 1 <= p50 <= p95 <= max");
  }
  for (std::size_t i = 1; i < d.size(); ++i) {
    if (d[i].q <= d[i - 1].q || d[i].value < d[i - 1].value) {
      p.Add("--calls-p50/--calls-p95/--calls-max", "need 1 <= p50 <= p95 <= max");
      break;
    }
  }
  if (o.first_prompt_p50_tokens < 1 || o.first_prompt_sigma < 0) {
    p.Add("--first-prompt-p50", "must be at least 1 token (sigma >= 0)");
  }
  if (o.tool_result_p50_tokens < 1) p.Add("--tool-result-p50", "must be at least 1 token");
  if (o.output_p50_tokens < 1) p.Add("--output-p50", "must be at least 1 token");
  if (o.gap_cap_s < 0) p.Add("--gap-cap", "must be >= 0");
  if (o.gap_p50_s <= 0 || o.gap_p95_s < o.gap_p50_s) p.Add("--gap-p50/--gap-p95", "need 0 < p50 <= p95");
  if (o.long_gap_probability < 0 || o.long_gap_probability > 1) {
    p.Add("--long-gap-probability", "must be in [0, 1]");
  }
  if (o.full_reuse_probability > o.reuse_over_half_probability ||
      o.reuse_over_half_probability > 1 || o.full_reuse_probability < 0) {
    p.Add("reuse", "need 0 <= full_reuse_probability <= reuse_over_half_probability <= 1");
  }
  if (o.max_context_tokens < 1024) p.Add("--max-context", "must be at least 1024 tokens");
  p.ThrowIfAny();
}

}  // namespace

LogQuantileCurve::LogQuantileCurve(std::vector<QuantilePoint> points)
    : points_(std::move(points)) {
  TALARIA_CHECK(points_.size() >= 2 && points_.front().q == 0.0 && points_.back().q == 1.0,
                "quantile anchors must span q=0..1");
  for (std::size_t i = 1; i < points_.size(); ++i) {
    TALARIA_CHECK(points_[i].q > points_[i - 1].q && points_[i].value >= points_[i - 1].value &&
                      points_[i - 1].value > 0,
                  "quantile anchors must increase");
  }
}

double LogQuantileCurve::At(double u) const {
  u = std::clamp(u, 0.0, 1.0);
  auto hi = std::upper_bound(points_.begin(), points_.end(), u,
                             [](double x, const QuantilePoint& p) { return x < p.q; });
  if (hi == points_.end()) return points_.back().value;
  auto lo = hi - 1;
  const double t = (u - lo->q) / (hi->q - lo->q);
  return std::exp(std::log(lo->value) + t * (std::log(hi->value) - std::log(lo->value)));
}

Trace GenerateSessions(const GeneratorOptions& o) {
  CheckOptions(o);
  Rng rng(o.seed);
  const LogQuantileCurve depth(o.calls_per_session);
  const auto starts =
      SessionStarts(rng, static_cast<std::size_t>(o.sessions), o.session_rate_per_s, o.burst_size);
  Trace trace;
  for (std::int32_t i = 0; i < o.sessions; ++i) {
    Rng session_rng = rng.Fork(static_cast<std::uint64_t>(i));
    const std::string& model = o.models[ZipfPick(session_rng, o.models.size(), o.zipf_s)];
    const auto calls = static_cast<std::int32_t>(std::llround(depth.At(session_rng.Uniform())));
    char id[32];
    std::snprintf(id, sizeof id, "s%04d", i);
    AppendSession(trace, InternedString(id), InternedString(model), {}, TokenSeed(o.seed, static_cast<std::uint64_t>(i)),
                  starts[static_cast<std::size_t>(i)], GenerateShape(session_rng, calls, o),
                  o.gap_cap_s);
  }
  trace.calls.shrink_to_fit();  // a replay holds it throughout: no doubling slack
  return trace;
}

Trace GenerateFixedReplay(const GeneratorOptions& o, std::int32_t tasks,
                          std::int32_t calls_per_model) {
  CheckOptions(o);
  if (tasks < 1 || calls_per_model < kMinTaskCalls * tasks) {
    throw InputError("--tasks", "need at least one task and four calls per task");
  }
  Rng rng(o.seed);
  const LogQuantileCurve depth(o.calls_per_session);
  // Task depths: i.i.d. draws from the calls-per-session curve (at least
  // kMinTaskCalls each), conditioned on their sum being within 5% of the
  // target by rejection; the deepest task absorbs the small remainder. The
  // condition keeps typical tasks typical and puts the extra depth of a deep
  // replay where a heavy tail puts it: in a few long tasks.
  std::vector<std::int32_t> counts(static_cast<std::size_t>(tasks));
  const double tolerance = 0.05 * calls_per_model;
  bool accepted = false;
  for (int attempt = 0; attempt < 1'000'000 && !accepted; ++attempt) {
    std::int64_t sum = 0;
    for (auto& c : counts) {
      do {
        c = static_cast<std::int32_t>(std::llround(depth.At(rng.Uniform())));
      } while (c < kMinTaskCalls);
      sum += c;
    }
    accepted = std::abs(static_cast<double>(sum - calls_per_model)) <= tolerance;
  }
  if (!accepted) {
    throw InputError("--preset", "could not draw task depths summing to " +
                                     std::to_string(calls_per_model) + " calls per model");
  }
  auto deepest = std::max_element(counts.begin(), counts.end());
  *deepest += calls_per_model - std::accumulate(counts.begin(), counts.end(), 0);
  Trace trace;
  for (std::int32_t t = 0; t < tasks; ++t) {
    Rng task_rng = rng.Fork(static_cast<std::uint64_t>(t));
    const auto shape = GenerateShape(task_rng, counts[static_cast<std::size_t>(t)], o);
    char task[32];
    std::snprintf(task, sizeof task, "task-%02d", t + 1);
    for (const auto& model : o.models) {
      AppendSession(trace, InternedString(std::string(task) + "/" + model), InternedString(model), InternedString(task),
                    TokenSeed(o.seed, static_cast<std::uint64_t>(t)), 0.0, shape, o.gap_cap_s);
    }
  }
  return trace;
}

Trace RoutingSubset(const Trace& fixed, std::int32_t calls_per_session,
                    const std::vector<std::pair<std::string, std::string>>& model_map,
                    double session_rate_per_s, std::uint64_t seed) {
  std::unordered_map<std::string, std::string> rename(model_map.begin(), model_map.end());
  const auto sessions = GroupSessions(fixed);
  Rng rng(seed);
  const auto starts = SessionStarts(rng, sessions.size(), session_rate_per_s);
  Trace trace;
  for (std::size_t s = 0; s < sessions.size(); ++s) {
    const auto& calls = sessions[s].calls;
    const auto n = std::min<std::size_t>(calls.size(), static_cast<std::size_t>(calls_per_session));
    for (std::size_t k = 0; k < n; ++k) {
      TraceCall c = fixed.calls[calls[k]];
      if (auto it = rename.find(c.model); it != rename.end()) {
        const std::string from = c.model;
        c.model = it->second;
        std::string id = c.session_id;
        const auto pos = id.rfind(from);
        if (pos != std::string::npos) c.session_id = id.replace(pos, from.size(), c.model.str());
      }
      if (k == 0) c.gap_s = starts[s];
      trace.calls.push_back(std::move(c));
    }
  }
  return trace;
}

std::vector<QuantilePoint> CallsPerSession(double p50, double p95, double max) {
  return {{0.0, 1}, {0.5, p50}, {0.95, p95}, {1.0, max}};
}

const std::vector<std::string>& PresetNames() {
  static const std::vector<std::string> names = {
      "characterization", "swe-fixed",  "router",          "agent-short",
      "long-gap-tools",   "chat-paced", "burst",           "flat-popularity",
      "steep-popularity"};
  return names;
}

bool PresetOptions(const std::string& name, GeneratorOptions& o) {
  if (name == "characterization") {
    o.sessions = 445;
    return true;
  }
  // The workload families: independent sessions arriving as a Poisson
  // stream (0.5 sessions/s unless a flag says otherwise), each family
  // changing one aspect of the agent shape.
  const bool family = name == "agent-short" || name == "long-gap-tools" || name == "chat-paced" ||
                      name == "burst" || name == "flat-popularity" || name == "steep-popularity";
  if (family) {
    o.sessions = 60;
    o.session_rate_per_s = 0.5;
    o.max_context_tokens = 120000;  // within every shipped model's window
  }
  if (name == "agent-short" || name == "flat-popularity" || name == "steep-popularity") {
    // The characterization's shape (§2.1): sub-second tool gaps, deep sessions.
    o.zipf_s = name == "flat-popularity" ? 0.0 : name == "steep-popularity" ? 2.0 : 1.0;
    return true;
  }
  if (name == "long-gap-tools") {
    // Tools that run for seconds (builds, test suites, browsing): gaps p50
    // 2.5 s, p95 20 s; short sessions (at most 6 calls) on large first
    // prompts (32-48K tokens: repository context).
    o.gap_p50_s = 2.5;
    o.gap_p95_s = 20.0;
    o.long_gap_probability = 0.01;
    o.calls_per_session = CallsPerSession(3, 6, 6);
    o.first_prompt_p50_tokens = 40000;
    o.first_prompt_sigma = 0.11;  // p5..p95 = 33.4K..48K
    return true;
  }
  if (name == "chat-paced") {
    // A person at the other end: minutes between calls (capped at 5 min),
    // short prompts that grow by a message, longer answers.
    o.gap_p50_s = 45.0;
    o.gap_p95_s = 240.0;
    o.gap_cap_s = 300.0;
    o.env_start_probability = 0.0;
    o.calls_per_session = CallsPerSession(4, 15, 40);
    o.first_prompt_p50_tokens = 1500;
    o.first_prompt_sigma = 0.8;
    o.tool_result_p50_tokens = 150;
    o.tool_result_sigma = 0.8;
    o.session_growth_sigma = 0.3;
    o.output_p50_tokens = 300;
    o.output_sigma = 0.7;
    o.session_rate_per_s = 0.2;
    return true;
  }
  if (name == "burst") {
    // Fan-out: an orchestrator starts 20 agents at once.
    o.burst_size = 20;
    return true;
  }
  if (name == "swe-fixed" || name == "router") {
    // Router sessions start as Poisson arrivals, 0.5 per second; replay load
    // regimes rescale these offsets.
    o.session_rate_per_s = name == "router" ? 0.5 : 0.0;
    // The fixed replay (§5.1): ten tasks of one repository replayed on the
    // three TP=8 models; deeper than the average characterization session
    // (960 calls over 30 model-sessions) and bounded by the smallest
    // model's 131K context. Long tool runs make the 10 s cap bind on about
    // 2% of calls (paper: 20 of 960).
    o.gap_cap_s = 10.0;
    o.long_gap_probability = 0.021;
    o.max_context_tokens = 120000;
    return true;
  }
  return false;
}

Trace GeneratePreset(const std::string& name, const GeneratorOptions& options) {
  if (name == "swe-fixed") return GenerateFixedReplay(options, 10, 320);
  if (name == "router") {
    // §5.1: the TP=4 routing testbed maps the three large models to
    // Qwen3-32B, Qwen2.5-32B-Instruct and Qwen3.5-35B-A3B and replays a
    // 120-call, 30-model-session subset: the first four calls of each.
    const Trace fixed = GenerateFixedReplay(options, 10, 320);
    return RoutingSubset(fixed, 4,
                         {{"qwen3-235b-a22b", "qwen3-32b"},
                          {"glm-5-nvfp4", "qwen2.5-32b-instruct"},
                          {"qwen3.5-122b-a10b", "qwen3.5-35b-a3b"}},
                         options.session_rate_per_s, options.seed);
  }
  GeneratorOptions known;
  if (!PresetOptions(name, known)) throw InputError("--preset", "unknown preset '" + name + "'");
  return GenerateSessions(options);
}

}  // namespace talaria
