// The closed-loop replay over HTTP: the same per-session rules as the
// simulated replay (sim/replay.h) — calls in trace order, call k+1 released
// when call k has finished and its capped gap has elapsed — driven against a
// live OpenAI-compatible server (`talaria serve` or any other). Prompts are
// sent to /v1/completions as token-id arrays materialised from the trace
// (trace/tokens.h), so every call carries exactly the recorded prompt length
// and reusable prefix; responses stream, so TTFT is measured at the first
// event, from the call's intended release.
//
// `time_scale` is the server's: trace gaps are divided by it on the wall,
// and measured times are multiplied by it, so reports are in the trace's
// (emulated) seconds. One client thread per session.
#pragma once

#include <string>

#include "driver/replay_result.h"
#include "trace/trace.h"

namespace talaria {

struct HttpReplayOptions {
  std::string target;        // http://HOST:PORT
  std::string api_key;       // sent as a bearer token when set
  double time_scale = 1.0;
  double gap_cap_s = 10.0;
  std::int32_t vocab_size = 256;  // token ids are drawn from [3, vocab_size + 3)
  // Continue each session on what the server generated: a continuation's
  // prefix (its first prefix_tokens) is the previous prompt as sent followed
  // by the previous call's streamed text read as byte tokens (byte b is id
  // 3 + b), instead of the trace's materialised output. For byte-level
  // servers that generate (`talaria serve --engine cpu`), so the reusable
  // prefix is the one the trace records; other servers' text is not their
  // token ids.
  bool echo_output = false;
  // When set, each call's record goes to DIR/calls.jsonl as the call ends
  // (docs/replay.md "Records"): the keys of the simulated replay's call
  // records that a client can measure, and the answer's HTTP status.
  std::string records_dir;
};

// Throws InputError for a bad target. Calls the server refuses are counted
// in `rejected` (by HTTP status, "http-429") and the session continues. A
// session's connection is opened when a call needs it, and a kept-alive one
// the server closed meanwhile is replaced once. A transport error it cannot
// get past ends the session: its call in hand and the calls after it are
// counted in `rejected` ("transport") and reported on stderr; never dropped
// (calls_completed + rejected = calls_total), and each has a record (status
// 0, its error) with records_dir. Throws when no call completed, and
// InputError when records_dir cannot be written.
ReplayResult ReplayOverHttp(const Trace& trace, const HttpReplayOptions& options);

}  // namespace talaria
