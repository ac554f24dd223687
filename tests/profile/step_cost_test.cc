#include "profile/step_cost.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace talaria {
namespace {

const std::string kProfiles = std::string(TALARIA_SOURCE_DIR) + "/profiles";

struct Item {
  std::int64_t new_tokens;
  std::int64_t cached_tokens;
  std::int64_t restore_tokens;
};

class StepCostTest : public ::testing::Test {
 protected:
  const ModelProfile m = LoadProfile(kProfiles + "/qwen3-235b-a22b.tp8.toml");
};

TEST_F(StepCostTest, APrefillBatchIsEachItemsRestoreThenItsPrefill) {
  const std::vector<Item> items{{1000, 0, 0}, {200, 4096, 4096}, {0, 512, 512}};
  const double expected = m.PrefillSeconds(1000) + m.KvRestoreSeconds(4096) + m.PrefillSeconds(200, 4096) +
                          m.KvRestoreSeconds(512);  // nothing new to prefill for the last: no prefill charged
  EXPECT_DOUBLE_EQ(step_cost::PrefillBatch(m, items), expected);
  EXPECT_EQ(step_cost::PrefillBatch(m, std::vector<Item>{}), 0.0);
}

TEST_F(StepCostTest, DecodeChargesTheMidPointContext) {
  EXPECT_DOUBLE_EQ(step_cost::Decode(m, 8, 10000, 1), m.DecodeStepSeconds(8, 10000));
  EXPECT_DOUBLE_EQ(step_cost::Decode(m, 8, 10000, 100), 100 * m.DecodeStepSeconds(8, 10050));
}

TEST_F(StepCostTest, ACallsOwnWorkIsItsPrefillPastTheCacheAndItsDecodeAlone) {
  EXPECT_DOUBLE_EQ(step_cost::CallWork(m, 30000, 20000, 50),
                   m.PrefillSeconds(10000, 20000) + 50 * m.DecodeStepSeconds(1, 30000));
  EXPECT_LT(step_cost::CallWork(m, 30000, 20000, 50), step_cost::CallWork(m, 30000, 0, 50));  // reuse pays
  EXPECT_EQ(step_cost::Recompute(m, 0), 0.0);
  EXPECT_EQ(step_cost::Restore(m, 0), 0.0);
  EXPECT_GT(step_cost::Restore(m, 20000), 0.0);
}

}  // namespace
}  // namespace talaria
