// How long work reports its progress: one line of text from what is done,
// what there is in all and how long it has taken, with the rate and the
// time left. A pure formatter (no clock, no I/O): the CLI's reporter
// (apps/talaria/progress.h) times it and writes it.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace talaria {

// "LABEL [#####.....] 50% 10/20 UNIT, 2.5 UNIT/s, ETA 4 s" with a bar of
// `bar_width` characters, or without the bar when `bar_width` is 0. The rate
// and ETA appear once something is done; a `total` of 0 or less is unknown
// (no percentage, bar or ETA).
std::string FormatProgress(std::string_view label, std::int64_t done, std::int64_t total, std::string_view unit,
                           double elapsed_s, int bar_width);

// A duration for people: "42 s", "3 min 5 s", "2 h 4 min".
std::string FormatDuration(double seconds);

}  // namespace talaria
