#include "driver/agent_hints.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "core/error.h"
#include "core/random.h"
#include "core/strings.h"

namespace talaria {

HintOptions ParseHintOptions(const std::string& spec) {
  HintOptions o;
  if (spec == "none") return o;
  if (spec == "trace") {
    o.mode = HintOptions::Mode::kTrace;
    return o;
  }
  if (spec == "exact") {
    o.mode = HintOptions::Mode::kExact;
    return o;
  }
  if (spec.rfind("noisy:", 0) == 0) {
    const std::string f = spec.substr(6);
    char* end = nullptr;
    const double v = std::strtod(f.c_str(), &end);
    if (!f.empty() && end == f.c_str() + f.size() && std::isfinite(v) && v >= 1) {
      o.mode = HintOptions::Mode::kNoisy;
      o.noise = v;
      return o;
    }
    throw InputError("--hints", "noisy:F needs a factor F >= 1, got '" + f + "'");
  }
  throw InputError("--hints", "unknown hints '" + spec + "' (choose none, trace, exact or noisy:F)");
}

std::string ToString(const HintOptions& o) {
  switch (o.mode) {
    case HintOptions::Mode::kNone:
      return "none";
    case HintOptions::Mode::kTrace:
      return "trace";
    case HintOptions::Mode::kExact:
      return "exact";
    case HintOptions::Mode::kNoisy: {
      char text[32];
      std::snprintf(text, sizeof text, "noisy:%g", o.noise);
      return text;
    }
  }
  return "?";
}

void ApplyHints(Trace& trace, const HintOptions& o, const ReleaseRule& release) {
  if (o.mode == HintOptions::Mode::kTrace) return;
  for (TraceCall& c : trace.calls) {
    c.expected_tool_s.reset();
    c.session_end = false;
  }
  if (o.mode == HintOptions::Mode::kNone) return;
  const double log_f = std::log(o.noise);
  for (const SessionCalls& s : GroupSessions(trace)) {
    Rng rng = Rng(o.seed).Fork(StringHash{}(s.session_id));
    for (std::size_t k = 0; k < s.calls.size(); ++k) {
      TraceCall& c = trace.calls[s.calls[k]];
      if (k + 1 == s.calls.size()) {
        c.session_end = true;
        continue;
      }
      double hint = release.GapSeconds(trace.calls[s.calls[k + 1]]);
      if (o.mode == HintOptions::Mode::kNoisy) hint *= std::exp(rng.Uniform(-log_f, log_f));
      c.expected_tool_s = hint;
    }
  }
}

}  // namespace talaria
