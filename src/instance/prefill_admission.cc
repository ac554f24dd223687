#include "instance/prefill_admission.h"

namespace talaria {

PrefillAdmission::Verdict PrefillAdmission::Precheck(bool sp_eligible, bool arrived_after_open) const {
  if (limits_.session_prefill) {
    if (!sp_eligible) return Verdict::kSkip;
    if (batched_ >= limits_.sp_max_batch) return Verdict::kDefer;
  } else if (limits_.cold && arrived_after_open) {
    return Verdict::kStop;  // P admits what was queued when the slot opened
  }
  return Verdict::kAdmit;
}

PrefillAdmission::Verdict PrefillAdmission::Fit(double cost_s, std::int64_t new_tokens) const {
  const Verdict no = limits_.session_prefill ? Verdict::kDefer : Verdict::kStop;
  if (batched_ > 0) {
    if (predicted_s_ + cost_s > limits_.budget_s || tokens_ + new_tokens > limits_.max_batch_tokens) return no;
    return Verdict::kAdmit;
  }
  if (cost_s > limits_.budget_s) {
    // SP never overruns the protected decode budget; P makes progress.
    return limits_.session_prefill ? Verdict::kDefer : Verdict::kAdmitOverBudget;
  }
  return Verdict::kAdmit;
}

const char* ToString(PrefillAdmission::Verdict v) {
  switch (v) {
    case PrefillAdmission::Verdict::kAdmit: return "admit";
    case PrefillAdmission::Verdict::kAdmitOverBudget: return "admit-over-budget";
    case PrefillAdmission::Verdict::kSkip: return "skip";
    case PrefillAdmission::Verdict::kDefer: return "defer";
    case PrefillAdmission::Verdict::kStop: return "stop";
  }
  return "?";
}

}  // namespace talaria
