// Which queued calls a prefill step admits (paper §3.4): the P phase that
// opens a model's slot, or a session-prefill (SP) batch at a decode
// boundary. A pure policy over the queue in order, the slot's budget and
// each call's predicted restore + prefill cost (from the reuse found for
// it); the scheduler asks it about each call, then commits memory for the
// ones it admits (Instance::Admit), stopping when memory runs out.
//
//   P   admits the calls queued when the slot opened, in order, while the
//       batch's predicted cost fits the budget and its new tokens fit
//       max_prefill_batch_tokens; the first call is always admitted (P makes
//       progress) and an overrun is reported as deadline risk. A call that
//       does not fit ends the phase: order is kept.
//   SP  admits only eligible calls (continuations of the active model with
//       a device-resident or host-restorable prefix, arrived after P), at
//       most sp_max_batch, and never beyond the budget left after protected
//       decode, not even the first; a call that does not fit is deferred
//       (to a later SP or its next slot) and the scan goes on.
//
// No clock, no I/O, no memory: a table of calls in, verdicts out
// (tests/instance/prefill_admission_test.cc).
#pragma once

#include <cstdint>

namespace talaria {

class PrefillAdmission {
 public:
  struct Limits {
    bool session_prefill = false;  // an SP batch (else a P phase)
    bool cold = true;              // a cold instance's slot (a hot one has no budget)
    double budget_s = 0;           // predicted prefill seconds the step may take
    std::int32_t sp_max_batch = 0;
    std::int64_t max_batch_tokens = 0;
  };
  enum class Verdict : std::uint8_t {
    kAdmit,
    kAdmitOverBudget,  // P's first call, beyond the budget: admitted, a deadline risk
    kSkip,             // SP: not eligible; look at the next call
    kDefer,            // SP: eligible, but not in this batch; look at the next call
    kStop,             // P: this call and the rest wait for a later phase
  };

  // The batch may already hold calls (P restores swapped-out calls first):
  // `batched` of them, predicted at `predicted_s`.
  PrefillAdmission(const Limits& limits, std::int32_t batched, double predicted_s)
      : limits_(limits), batched_(batched), predicted_s_(predicted_s) {}

  // Before its cost is known: whether the call is a candidate at all.
  // `sp_eligible` matters only for SP; `arrived_after_open` only for P.
  Verdict Precheck(bool sp_eligible, bool arrived_after_open) const;
  // With its predicted cost and the tokens it would prefill.
  Verdict Fit(double cost_s, std::int64_t new_tokens) const;
  // The call was admitted (its memory committed).
  void Admitted(double cost_s, std::int64_t new_tokens) {
    ++batched_;
    predicted_s_ += cost_s;
    tokens_ += new_tokens;
  }

  std::int32_t batched() const { return batched_; }
  double predicted_s() const { return predicted_s_; }

 private:
  Limits limits_;
  std::int32_t batched_ = 0;
  double predicted_s_ = 0;
  std::int64_t tokens_ = 0;  // new tokens of the calls admitted from the queue
};

const char* ToString(PrefillAdmission::Verdict v);

}  // namespace talaria
