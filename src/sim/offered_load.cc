#include "sim/offered_load.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "core/error.h"
#include "driver/agent_hints.h"
#include "sim/replay.h"

namespace talaria {

double ArrivalWindowSeconds(const Trace& trace) {
  double first = std::numeric_limits<double>::infinity();
  double last = -first;
  for (const TraceCall& c : trace.calls) {
    if (c.call_index != 0) continue;  // call 0's gap is its session's start offset
    first = std::min(first, c.gap_s);
    last = std::max(last, c.gap_s);
  }
  return last > first ? last - first : 0.0;
}

double StartScaleForUtilisation(double work_s, double window_s, std::int32_t instances, double utilisation) {
  if (!(utilisation > 0) || !std::isfinite(utilisation)) {
    throw InputError("--load", "utilisation must be a positive number, got " + std::to_string(utilisation));
  }
  if (!(window_s > 0)) {
    throw InputError("--load",
                     "a utilisation load needs sessions that start at different times; every session "
                     "of this trace starts at once, so there is no arrival rate to scale (use low, "
                     "medium or high)");
  }
  if (instances <= 0) throw InputError("--load", "a utilisation load needs at least one instance");
  if (!(work_s > 0)) throw InputError("--load", "the pilot replay measured no work: the trace has no calls to serve");
  return work_s / (static_cast<double>(instances) * window_s * utilisation);
}

std::vector<UtilisationScale> ScalesForUtilisations(const ClusterConfig& cluster, const ProfileSet& profiles,
                                                   const Trace& trace, double gap_cap_s,
                                                   const std::vector<double>& utilisations) {
  if (utilisations.empty()) return {};
  const double window_s = ArrivalWindowSeconds(trace);
  const auto instances = static_cast<std::int32_t>(cluster.instances.size());
  for (double u : utilisations) StartScaleForUtilisation(1, window_s, instances, u);  // the checks, before any pilot
  // Without agent hints, so every hint mode compared at a utilisation sees
  // the same arrivals (hints steer holds and leases, and so the busy time).
  const bool hinted = std::any_of(trace.calls.begin(), trace.calls.end(),
                                  [](const TraceCall& c) { return c.expected_tool_s.has_value() || c.session_end; });
  Trace unhinted;
  if (hinted) {
    unhinted = trace;
    ApplyHints(unhinted, HintOptions{}, ReleaseRule{});
  }
  const Trace& pilot_trace = hinted ? unhinted : trace;
  ClusterConfig talaria = cluster;
  Ablation all_on;
  AblationByName("talaria", all_on);
  for (auto& ic : talaria.instances) ic.ablation = all_on;
  ReplayOptions o;
  o.gap_cap_s = gap_cap_s;
  const auto work_at = [&](double x) {
    o.start_scale = std::exp(x);
    return RunReplay("talaria", talaria, profiles, pilot_trace, o).active_s;
  };
  // Every search starts with the pilot at the recorded rate (x = 0): run once.
  const double recorded_work_s = work_at(0);
  std::vector<UtilisationScale> out;
  out.reserve(utilisations.size());
  for (double u : utilisations) {
    // Root of r(x) = log(realised / U) in x = log(scale): realised
    // utilisation falls as the scale grows, so r is decreasing. The pilot
    // at the recorded rate gives the plain update x + r; once two pilots
    // straddle the root, false position (Illinois) keeps the bracket. The
    // work moves with the load (overload preempts and recomputes, light
    // load batches less), so a single update overshoots.
    constexpr std::int32_t kMaxPilots = 16;
    constexpr double kSettled = 0.01;  // |realised / U - 1|, about
    UtilisationScale scale;
    const auto residual = [&](double x, double work_s) {
      ++scale.pilots;
      return std::log(StartScaleForUtilisation(work_s, window_s, instances, u)) - x;  // log(realised/U)
    };
    double x = 0, r = residual(x, recorded_work_s);
    double best_x = x, best_r = r;              // the pilot nearest U: busy time is not smooth in the scale
    double lo = 0, r_lo = 0, hi = 0, r_hi = 0;  // r_lo > 0 > r_hi once bracketed
    bool have_lo = false, have_hi = false;
    int side = 0;  // Illinois: which end stayed twice
    while (std::abs(r) > kSettled && scale.pilots < kMaxPilots) {
      if (r > 0) {
        lo = x, r_lo = r, have_lo = true;
        if (side == 1) r_hi /= 2;
        side = 1;
      } else {
        hi = x, r_hi = r, have_hi = true;
        if (side == -1) r_lo /= 2;
        side = -1;
      }
      x = have_lo && have_hi ? lo + (hi - lo) * r_lo / (r_lo - r_hi) : x + r;
      r = residual(x, work_at(x));
      if (std::abs(r) < std::abs(best_r)) best_x = x, best_r = r;
    }
    scale.start_scale = std::exp(best_x);
    scale.realised = std::exp(best_r) * u;
    out.push_back(scale);
  }
  return out;
}

}  // namespace talaria
