// Offered load as a utilisation of the cluster, for replays whose traces
// were generated at some session arrival rate that says nothing about the
// cluster they are replayed on.
//
// A trace's sessions start at the offsets its first calls record; a replay
// multiplies those offsets by a start scale (ReplayOptions::start_scale).
// Utilisation U asks for the scale at which the trace's work fills U of the
// cluster's instances over the arrival window:
//
//   U = work_s(scale) / (instances x window_s x scale)
//
// window_s is the span of the session starts at the recorded rate, and
// work_s the instances' busy time (prefill and decode; not switches, not
// idle holds) measured by pilot replays, not predicted, so every model,
// batch shape, prefix reuse and preemption is counted as the simulator runs
// it. The work depends on the load (an overloaded instance preempts and
// recomputes, a lightly loaded one batches less), so the scale is a fixed
// point, found by pilots (a root search in log scale) until the realised
// utilisation is within about 1% of U. Busy time is not smooth in the
// scale (a small trace can flip between schedules at one arrival), so
// where no pilot comes that close the nearest one is taken, and its
// realised utilisation is reported.
#pragma once

#include <cstdint>
#include <vector>

#include "config/cluster_config.h"
#include "profile/profile.h"
#include "trace/trace.h"

namespace talaria {

// The span between the first and the last session start, seconds.
double ArrivalWindowSeconds(const Trace& trace);

// The start scale at which work_s over the window fills `utilisation` of
// `instances`. Throws InputError (field --load) when the window is empty
// (every session starts at once: no arrival rate to scale) or an argument
// is not positive.
double StartScaleForUtilisation(double work_s, double window_s, std::int32_t instances, double utilisation);

struct UtilisationScale {
  double start_scale = 1;
  double realised = 0;  // the utilisation of the pilot at start_scale (the nearest U)
  std::int32_t pilots = 0;  // its search's pilots, the shared one at the recorded rate included
};

// One scale per utilisation, in order. The pilots: replays of `trace`
// without its agent hints on `cluster` in Talaria's configuration (every
// other setting as the cluster config has it), at most 16 per search, the
// first at the recorded rate, which every search shares. Throws as StartScaleForUtilisation, before
// any pilot.
std::vector<UtilisationScale> ScalesForUtilisations(const ClusterConfig& cluster, const ProfileSet& profiles,
                                                   const Trace& trace, double gap_cap_s,
                                                   const std::vector<double>& utilisations);

}  // namespace talaria
