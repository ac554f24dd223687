#include "config/cluster_config.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "core/error.h"

namespace talaria {
namespace {

using ::testing::HasSubstr;

std::string LoadError(const std::string& text) {
  // One file per process: ctest runs this binary's tests in parallel.
  const auto path = std::filesystem::temp_directory_path() /
                    ("talaria_cluster_test_" + std::to_string(getpid()) + ".toml");
  std::ofstream(path) << text;
  try {
    LoadClusterConfig(path.string());
  } catch (const InputError& e) {
    std::filesystem::remove(path);
    return e.what();
  }
  std::filesystem::remove(path);
  return "";
}

TEST(ClusterConfigTest, ShippedConfigLoadsWithDefaults) {
  const ClusterConfig c = LoadClusterConfig(std::string(TALARIA_SOURCE_DIR) + "/configs/tp8-three-models.toml");
  ASSERT_EQ(c.instances.size(), 1u);
  EXPECT_EQ(c.instances[0].tp, 8);
  EXPECT_EQ(c.instances[0].models.size(), 3u);
  EXPECT_EQ(c.instances[0].pool, Pool::kCold);
  EXPECT_DOUBLE_EQ(c.instances[0].bump_fraction, 0.8);
  EXPECT_EQ(c.instances[0].state_checkpoints, StateCheckpoints::kDoubling);
  EXPECT_EQ(c.instances[0].hold, HoldPolicy::kFixed);
  EXPECT_EQ(c.router.lease_honour, LeaseHonour::kRank);  // not the paper's Algorithm 1 (route)
  EXPECT_TRUE(c.instances[0].hold_charges_decode);
  EXPECT_TRUE(c.instances[0].hold_within_share);
  EXPECT_THAT(c.profiles_dir, HasSubstr("profiles"));
}

TEST(ClusterConfigTest, ErrorsNameFileLineAndKey) {
  EXPECT_THAT(LoadError("[[instance]]\nmodels = [\"a\"]\ngamma = 1.5\n"),
              HasSubstr(".toml:3: key 'instance[0].gamma': must be in"));
  EXPECT_THAT(LoadError("[[instance]]\nmodels = [\"a\"]\nsp = \"yes\"\n"),
              HasSubstr("key 'instance[0].sp': must be true or false"));
  EXPECT_THAT(LoadError("[[instance]]\nmodels = [\"a\"]\nttft = 3\n"),
              HasSubstr("key 'instance[0].ttft': unknown key"));
  EXPECT_THAT(LoadError("[[instance]]\npool = \"warm\"\nmodels = [\"a\"]\n"),
              HasSubstr("must be \"hot\" or \"cold\""));
  EXPECT_THAT(LoadError("[[instance]]\nmodels = [\"a\"]\nstate_checkpoints = \"every\"\n"),
              HasSubstr(".toml:3: key 'instance[0].state_checkpoints': must be \"doubling\" or \"context_end\""));
  EXPECT_THAT(LoadError("[router]\nlease = \"sometimes\"\n[[instance]]\nmodels = [\"a\"]\n"),
              HasSubstr(".toml:2: key 'router.lease': must be \"fixed\" (lease_tau_s) or \"adaptive\""));
  EXPECT_THAT(LoadError("[router]\nlease_replica_check = 1\n[[instance]]\nmodels = [\"a\"]\n"),
              HasSubstr(".toml:2: key 'router.lease_replica_check': must be true or false"));
  EXPECT_THAT(LoadError("[router]\nlease_honour = \"always\"\n[[instance]]\nmodels = [\"a\"]\n"),
              HasSubstr(".toml:2: key 'router.lease_honour': must be \"route\" or \"rank\""));
  EXPECT_THAT(LoadError("[[instance]]\nmodels = [\"a\"]\nhold = \"adaptive\"\nhold_charges_decode = \"on\"\n"),
              HasSubstr(".toml:4: key 'instance[0].hold_charges_decode': must be true or false"));
  EXPECT_THAT(LoadError("[[instance]]\nmodels = [\"a\"]\nhold_within_share = 1\n"),
              HasSubstr(".toml:3: key 'instance[0].hold_within_share': must be true or false"));
  EXPECT_THAT(LoadError("profiles = \"p\"\n"), HasSubstr("needs at least one [[instance]]"));
  EXPECT_THAT(LoadError("[[instance]]\nmodels = [\"a\"]\n[[instance]]\nname = \"instance-0\"\nmodels = [\"b\"]\n"),
              HasSubstr("duplicate instance name"));
  EXPECT_THAT(LoadError("[[instance]\n"), HasSubstr("not valid TOML"));
}

TEST(ClusterConfigTest, ServeTimeoutsHaveDefaultsAndTheirBoundsAreChecked) {
  const ClusterConfig c = LoadClusterConfig(std::string(TALARIA_SOURCE_DIR) + "/configs/tp8-three-models.toml");
  EXPECT_DOUBLE_EQ(c.serve.drain_timeout_s, 30);
  EXPECT_DOUBLE_EQ(c.serve.http.idle_timeout_s, 60);
  EXPECT_DOUBLE_EQ(c.serve.http.header_timeout_s, 10);
  EXPECT_DOUBLE_EQ(c.serve.upstream_keepalive_s, 1);
  const std::string instance = "[[instance]]\nmodels = [\"a\"]\n";
  EXPECT_THAT(LoadError("[serve]\nupstream_keepalive_s = 3\n" + instance),
              HasSubstr("key 'serve.upstream_silence_s': must be at least twice upstream_keepalive_s"));
  EXPECT_THAT(LoadError("[serve]\nupstream_keepalive_s = 0.01\n" + instance),
              HasSubstr("key 'serve.upstream_keepalive_s': must be 0 (off) or at least 0.1"));
  EXPECT_THAT(LoadError("[serve]\nidle_timeout_s = 0\n" + instance), HasSubstr("key 'serve.idle_timeout_s'"));
  EXPECT_EQ(LoadError("[serve]\nupstream_keepalive_s = 0\ndrain_timeout_s = 0\n" + instance), "");
}

TEST(ClusterConfigTest, SharedStateIsOffByDefaultAndItsTimeoutBounded) {
  const ClusterConfig c = LoadClusterConfig(std::string(TALARIA_SOURCE_DIR) + "/configs/tp8-three-models.toml");
  EXPECT_EQ(c.serve.state, "");
  EXPECT_DOUBLE_EQ(c.serve.state_timeout_s, 0.05);
  const std::string instance = "[[instance]]\nmodels = [\"a\"]\n";
  EXPECT_THAT(LoadError("[serve]\nstate_timeout_s = 0\n" + instance), HasSubstr("key 'serve.state_timeout_s'"));
  EXPECT_THAT(LoadError("[serve]\nstate = 6379\n" + instance), HasSubstr("key 'serve.state'"));
  EXPECT_EQ(LoadError("[serve]\nstate = \"redis://cache:6379/1\"\nstate_timeout_s = 0.2\n" + instance), "");
}

TEST(AblationTest, NamesMapToTheSection51Switches) {
  Ablation a;
  ASSERT_TRUE(AblationByName("round-only", a));
  EXPECT_FALSE(a.sp || a.hkvr || a.d2d_staging);
  ASSERT_TRUE(AblationByName("h2d-only", a));
  EXPECT_TRUE(a.sp && a.hkvr && !a.d2d_staging);
  ASSERT_TRUE(AblationByName("no-sp", a));
  EXPECT_TRUE(!a.sp && a.hkvr && a.d2d_staging);
  ASSERT_TRUE(AblationByName("no-hkvr", a));
  EXPECT_TRUE(a.sp && !a.hkvr && a.d2d_staging);
  EXPECT_FALSE(AblationByName("fast", a));
  EXPECT_EQ(AblationNames().size(), 5u);
}

}  // namespace
}  // namespace talaria
