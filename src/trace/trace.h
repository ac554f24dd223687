// Session traces: one model call per record, grouped into sessions.
//
// A session is one agent task on one model (a "model-session"). Its calls are
// numbered 0, 1, 2, ... and each continuation carries the length of the
// prefix it shares with the previous call's prompt plus output, so replay
// knows how much KV is reusable. The on-disk form is JSON Lines, specified in
// docs/trace-format.md; ReadTrace validates every record and every
// cross-record rule and reports all problems with file, line and field.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <string>
#include <string_view>
#include <vector>

#include "core/interned_string.h"
#include "core/optional_seconds.h"

namespace talaria {

// 96 bytes: a replay holds millions of these, so names are interned (one
// pooled copy each, core/interned_string.h), optional times are NaN-absent
// doubles, and the two small fields share one word.
struct TraceCall {
  InternedString session_id;
  InternedString model;
  std::int64_t prompt_tokens = 0;
  // Tokens at the start of this prompt identical to the start of the previous
  // call's prompt + output. 0 for call 0.
  std::int64_t prefix_tokens = 0;
  std::int64_t output_tokens = 0;
  // Call 0: delay from the trace's origin to the session's first call.
  // Later calls: tool gap between the previous response and this enqueue.
  double gap_s = 0.0;
  // The recorded gap before a cap was applied; present only when it differs.
  OptionalSeconds gap_uncapped_s;
  // Recorded enqueue time relative to the trace's origin, when known.
  OptionalSeconds enqueue_s;
  // Seed from which replay materialises token ids (trace/tokens.h); the same
  // for every call of a session. At most 2^53 - 1 so any JSON reader keeps it.
  std::uint64_t token_seed = 0;
  // Task identity shared by model-sessions that replay the same task; may be empty.
  InternedString task;
  // Agent hints the call carried, optional (`talaria replay --hints`): the
  // tool time it expected before the session's next call, seconds, and
  // whether it said it was the session's last.
  OptionalSeconds expected_tool_s;
  std::int32_t call_index = 0;
  bool session_end = false;
};
static_assert(sizeof(TraceCall) <= 96, "a replay holds millions of trace calls");

// Calls in file order. Sessions may interleave; within a session the calls
// appear in call_index order.
struct Trace {
  std::vector<TraceCall> calls;
};

// A session's calls, by index into Trace::calls, in call order.
struct SessionCalls {
  std::string session_id;
  std::vector<std::size_t> calls;
};

// Sessions in order of first appearance.
std::vector<SessionCalls> GroupSessions(const Trace& trace);

inline constexpr std::uint64_t kMaxTokenSeed = (std::uint64_t{1} << 53) - 1;

// Reads and validates JSON Lines. `source` names the input in messages.
// Throws InputError listing every problem ("source:line: field 'x': ...").
Trace ReadTrace(std::istream& in, std::string_view source);
// "-" reads standard input.
Trace ReadTraceFile(const std::string& path);

// One JSON object per line, keys in the documented order, no spaces.
void WriteTraceCall(std::ostream& out, const TraceCall& call);
void WriteTrace(std::ostream& out, const Trace& trace);

}  // namespace talaria
