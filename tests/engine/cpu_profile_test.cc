#include "engine/cpu_profile.h"

#include <gtest/gtest.h>

#include <fstream>

#include "engine/test_models.h"
#include "profile/profile.h"

namespace talaria {
namespace {

// A measured profile loads with the same loader as profiles/*.toml, and its
// tables are the measurements: more work takes longer.
TEST(CpuProfileTest, MeasuredProfileLoadsAndGrowsWithWork) {
  const CpuModelConfig c = testing::TinyCpuModel("cpu-test");
  CpuProfileOptions o;
  o.repeats = 3;
  o.prefill_tokens = {16, 256};
  o.decode_batch = {1, 8};
  o.decode_context = {64, 512};
  o.cached_new_tokens = {16, 128};
  o.cached_tokens = {64, 512};
  const std::string path = ::testing::TempDir() + "/cpu-test.toml";
  std::ofstream(path) << MeasureCpuProfile(c, o);
  const ModelProfile p = LoadProfile(path);
  EXPECT_EQ(p.name, "cpu-test");
  EXPECT_EQ(p.tp, 1);
  EXPECT_EQ(p.kv_dtype_bytes, 4);
  EXPECT_EQ(p.weight_bytes_per_rank, c.Parameters() * 4);
  EXPECT_EQ(p.KvBytesPerTokenPerRank(), 2LL * 2 * 2 * 16 * 4);  // K and V, layers, kv heads, head_dim, fp32
  EXPECT_GT(p.PrefillSeconds(256), p.PrefillSeconds(16));
  ASSERT_FALSE(p.prefill_cached_s.empty());
  EXPECT_GT(p.PrefillSeconds(128, 512), p.PrefillSeconds(16, 512));
  EXPECT_GT(p.DecodeStepSeconds(8, 512), p.DecodeStepSeconds(1, 64));
  EXPECT_GT(p.h2d_bytes_per_s, 0);
  EXPECT_GT(p.switch_phases.at(SwitchPath::kH2d).open_weights_s, 0);
}

TEST(CpuProfileTest, TheCatalogueSpansTenToAHundredMillionParameters) {
  ASSERT_EQ(CpuModelCatalog().size(), 3u);
  for (const auto& c : CpuModelCatalog()) {
    EXPECT_GE(c.Parameters(), 10'000'000) << c.name;
    EXPECT_LE(c.Parameters(), 200'000'000) << c.name;
  }
  CpuModelConfig c;
  EXPECT_TRUE(CpuModelByName("cpu-24m", c));
  EXPECT_EQ(c.hidden, 512);
  EXPECT_FALSE(CpuModelByName("cpu-1t", c));
}

}  // namespace
}  // namespace talaria
