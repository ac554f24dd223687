#include "instance/prefill_admission.h"

#include <gtest/gtest.h>

#include <limits>
#include <string>
#include <vector>

namespace talaria {
namespace {

// One queued call as the scheduler sees it when a prefill step is planned.
struct Queued {
  bool sp_eligible;
  bool arrived_after_open;
  double cost_s;
  std::int64_t new_tokens;
  bool memory = true;  // Instance::Admit finds KV room for it
};

// Runs the scheduler's loop over the queue with the policy and returns each
// call's verdict ("admit", "defer", ...; "-" for calls never looked at).
std::vector<std::string> Scan(const PrefillAdmission::Limits& limits, const std::vector<Queued>& queue,
                             std::int32_t batched = 0, double predicted_s = 0) {
  PrefillAdmission a(limits, batched, predicted_s);
  std::vector<std::string> out(queue.size(), "-");
  for (std::size_t i = 0; i < queue.size(); ++i) {
    const Queued& q = queue[i];
    auto v = a.Precheck(q.sp_eligible, q.arrived_after_open);
    if (v == PrefillAdmission::Verdict::kAdmit) v = a.Fit(q.cost_s, q.new_tokens);
    out[i] = ToString(v);
    if (v == PrefillAdmission::Verdict::kStop) break;
    if (v == PrefillAdmission::Verdict::kAdmit || v == PrefillAdmission::Verdict::kAdmitOverBudget) {
      if (!q.memory) {
        out[i] = "no-memory";
        break;
      }
      a.Admitted(q.cost_s, q.new_tokens);
    }
  }
  return out;
}

PrefillAdmission::Limits P(double budget_s) {
  PrefillAdmission::Limits l;
  l.session_prefill = false;
  l.cold = true;
  l.budget_s = budget_s;
  l.sp_max_batch = 2;
  l.max_batch_tokens = 1000;
  return l;
}

PrefillAdmission::Limits Sp(double budget_s) {
  PrefillAdmission::Limits l = P(budget_s);
  l.session_prefill = true;
  return l;
}

using V = std::vector<std::string>;

TEST(PrefillAdmissionTest, PAdmitsWhatWasQueuedAtTheOpenInOrderWhileTheBudgetHolds) {
  EXPECT_EQ(Scan(P(3), {{false, false, 1, 100}, {false, false, 1, 100}, {false, false, 2, 100}, {false, false, 0.1, 10}}),
            (V{"admit", "admit", "stop", "-"}));  // the third would take 4 s > 3 s: order is kept
  EXPECT_EQ(Scan(P(10), {{false, false, 1, 100}, {false, true, 1, 100}, {false, false, 1, 100}}),
            (V{"admit", "stop", "-"}));  // arrived after the slot opened: the next slot's
  EXPECT_EQ(Scan(P(10), {{false, false, 1, 600}, {false, false, 1, 500}}),
            (V{"admit", "stop"}));  // 1,100 new tokens > max_batch_tokens
}

TEST(PrefillAdmissionTest, PAlwaysAdmitsItsFirstCallAndReportsTheOverrun) {
  EXPECT_EQ(Scan(P(1), {{false, false, 5, 100}, {false, false, 0.1, 10}}), (V{"admit-over-budget", "stop"}));
  // Swapped-out calls restored first fill the batch: then nothing is "first".
  EXPECT_EQ(Scan(P(1), {{false, false, 5, 100}}, /*batched=*/1, /*predicted_s=*/0.5), (V{"stop"}));
}

TEST(PrefillAdmissionTest, SessionPrefillSkipsIneligibleCallsAndDefersWhatDoesNotFit) {
  EXPECT_EQ(Scan(Sp(3), {{false, true, 1, 100}, {true, true, 2, 100}, {true, true, 2, 100}, {true, true, 1, 100}}),
            (V{"skip", "admit", "defer", "admit"}));  // the scan goes on past a deferral
  EXPECT_EQ(Scan(Sp(10), {{true, true, 1, 10}, {true, true, 1, 10}, {true, true, 1, 10}}),
            (V{"admit", "admit", "defer"}));  // sp_max_batch = 2
}

TEST(PrefillAdmissionTest, SessionPrefillNeverOverrunsTheProtectedDecodeBudget) {
  EXPECT_EQ(Scan(Sp(1), {{true, true, 5, 100}, {true, true, 0.5, 10}}), (V{"defer", "admit"}));
  EXPECT_EQ(Scan(Sp(-1), {{true, true, 0.1, 10}}), (V{"defer"}));  // no budget left at all
}

TEST(PrefillAdmissionTest, AHotInstanceHasNoBudgetAndNoSlotOpen) {
  PrefillAdmission::Limits hot = P(std::numeric_limits<double>::infinity());
  hot.cold = false;
  EXPECT_EQ(Scan(hot, {{false, true, 100, 100}, {false, true, 100, 100}}), (V{"admit", "admit"}));
}

TEST(PrefillAdmissionTest, NoMemoryEndsTheStep) {
  Queued no_room{true, true, 1, 10};
  no_room.memory = false;
  EXPECT_EQ(Scan(Sp(10), {{true, true, 1, 10}, no_room, {true, true, 1, 10}}), (V{"admit", "no-memory", "-"}));
}

}  // namespace
}  // namespace talaria
