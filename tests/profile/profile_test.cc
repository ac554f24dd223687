#include "profile/profile.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <regex>

#include "core/error.h"
#include "core/units.h"

namespace talaria {
namespace {

using ::testing::HasSubstr;

const std::string kProfiles = std::string(TALARIA_SOURCE_DIR) + "/profiles";

// A scratch file holding `text`, removed when the test ends.
class TempFile {
 public:
  explicit TempFile(const std::string& text) {
    path_ = (std::filesystem::temp_directory_path() /
             ("talaria_profile_" + std::to_string(counter_++) + "_" +
              std::to_string(::getpid()) + ".toml"))
                .string();
    std::ofstream(path_) << text;
  }
  ~TempFile() { std::remove(path_.c_str()); }
  const std::string& path() const { return path_; }

 private:
  static inline int counter_ = 0;
  std::string path_;
};

std::string ShippedText(const std::string& file) {
  std::ifstream in(kProfiles + "/" + file);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string LoadError(const std::string& text) {
  TempFile f(text);
  try {
    LoadProfile(f.path());
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

TEST(ProfileTest, EveryShippedProfileLoads) {
  const ProfileSet set = ProfileSet::LoadDirectory(kProfiles);
  for (const char* model : {"qwen3-235b-a22b", "glm-5-nvfp4", "qwen3.5-122b-a10b"}) {
    EXPECT_NE(set.Find(model, 8), nullptr) << model;
  }
  for (const char* model : {"qwen3-32b", "qwen2.5-32b-instruct", "qwen3.5-35b-a3b"}) {
    EXPECT_NE(set.Find(model, 4), nullptr) << model;
  }
  EXPECT_EQ(set.Find("qwen3-235b-a22b", 4), nullptr);
  for (const auto& [key, p] : set.all()) {
    EXPECT_LT(p.weight_bytes_per_rank, p.HbmBytesPerRank()) << p.name;
    EXPECT_GT(p.KvBytesPerTokenPerRank(), 0) << p.name;
    EXPECT_EQ(p.switch_phases.size(), 3u) << p.name;
  }
}

// The paper's measurements the Qwen3-235B profile is anchored to.
TEST(ProfileTest, Qwen235bReproducesPaperAnchors) {
  const ModelProfile p = LoadProfile(kProfiles + "/qwen3-235b-a22b.tp8.toml");
  EXPECT_DOUBLE_EQ(p.PrefillSeconds(25000), 4.3);    // §2.1
  EXPECT_DOUBLE_EQ(p.PrefillSeconds(100000), 10.9);  // §2.1
  EXPECT_NEAR(p.OpenWeightsSeconds(0), 2.5706, 0.001);                       // Table 2 H2D P2
  EXPECT_NEAR(p.OpenWeightsSeconds(p.weight_bytes_per_rank), 0.1096, 0.001);  // Table 2 D2D P2
  EXPECT_DOUBLE_EQ(p.hbm_gib_per_gpu, 183);
  EXPECT_EQ(p.tp, 8);
  EXPECT_NEAR(p.switch_reference_p50_s.at("d2d"), 0.106, 1e-12);
  EXPECT_NEAR(p.switch_reference_p50_s.at("h2d_only"), 1.497, 1e-12);
  // 94 layers x K,V x 1 head per rank (4 heads over 8 ranks) x 128 x 2 B.
  EXPECT_EQ(p.KvBytesPerTokenPerRank(), 94 * 2 * 1 * 128 * 2);
  EXPECT_NEAR(p.switch_phases.at(SwitchPath::kH2d).FixedSeconds(), 0.0219 + 0.0008 + 0.0077 + 0.0002,
              1e-12);
}

TEST(ProfileTest, KvSizesFollowAttentionFamily) {
  const ProfileSet set = ProfileSet::LoadDirectory(kProfiles);
  const auto* glm = set.Find("glm-5-nvfp4", 8);
  ASSERT_NE(glm, nullptr);
  EXPECT_EQ(glm->family, AttentionFamily::kMla);
  EXPECT_EQ(glm->KvBytesPerTokenPerRank(), 78 * 576 * 2);  // latent replicated per rank
  const auto* hybrid = set.Find("qwen3.5-35b-a3b", 4);
  ASSERT_NE(hybrid, nullptr);
  EXPECT_EQ(hybrid->KvBytesPerTokenPerRank(), 2 * 10 * 1 * 256 * 2);
  EXPECT_EQ(hybrid->RecurrentStateBytesPerRank(), 30LL * 2146304 / 4);
  const auto* dense = set.Find("qwen3-32b", 4);
  ASSERT_NE(dense, nullptr);
  EXPECT_EQ(dense->KvBytesPerTokenPerRank(), 2 * 64 * 2 * 128 * 2);  // 8 heads over 4 ranks
}

TEST(ProfileTest, CachedPrefillChargesOnlyTheExtension) {
  const ModelProfile p = LoadProfile(kProfiles + "/qwen3-235b-a22b.tp8.toml");
  const double full = p.PrefillSeconds(25000);
  const double extend = p.PrefillSeconds(1000, 24000);
  EXPECT_LT(extend, 0.2 * full);
  EXPECT_NEAR(extend, p.PrefillSeconds(0) + p.PrefillSeconds(25000) - p.PrefillSeconds(24000), 1e-12);
}

TEST(ProfileTest, MeasuredCachedTableWinsOverTheDerivedRule) {
  std::string text = ShippedText("qwen3-235b-a22b.tp8.toml");
  text += "\n[prefill_cached]\nnew_tokens = [0, 1000]\ncached_tokens = [0, 50000]\n"
          "seconds = [[0.0, 0.0], [0.5, 0.9]]\n";
  TempFile f(text);
  const ModelProfile p = LoadProfile(f.path());
  EXPECT_DOUBLE_EQ(p.PrefillSeconds(1000, 25000), 0.7);
  EXPECT_DOUBLE_EQ(p.PrefillSeconds(25000), 4.3);  // uncached still uses [prefill]
}

TEST(ProfileTest, KvRestoreScalesWithBytes) {
  const ModelProfile p = LoadProfile(kProfiles + "/qwen3-235b-a22b.tp8.toml");
  EXPECT_EQ(p.KvRestoreSeconds(0), 0);
  const double small = p.KvRestoreSeconds(1000);
  const double large = p.KvRestoreSeconds(100000);
  EXPECT_NEAR(large - small, 99000.0 * p.KvBytesPerTokenPerRank() / p.h2d_bytes_per_s, 1e-9);
}

struct BadProfile {
  const char* name;
  std::string from;  // regex on the shipped text
  std::string to;
  std::string expected;
  friend void PrintTo(const BadProfile& p, std::ostream* os) { *os << p.name; }
};

class ProfileErrorTest : public ::testing::TestWithParam<BadProfile> {};

TEST_P(ProfileErrorTest, NamesFileLineAndKey) {
  const std::string text = std::regex_replace(ShippedText("qwen3-235b-a22b.tp8.toml"),
                                              std::regex(GetParam().from), GetParam().to,
                                              std::regex_constants::format_first_only);
  const std::string msg = LoadError(text);
  EXPECT_THAT(msg, HasSubstr(".toml:")) << msg;
  EXPECT_THAT(msg, HasSubstr(GetParam().expected)) << msg;
}

INSTANTIATE_TEST_SUITE_P(
    Errors, ProfileErrorTest,
    ::testing::Values(
        BadProfile{"MissingKey", "layers = 94 *#[^\n]*\n", "", "key 'model.layers': missing"},
        BadProfile{"MissingSection", "\\[transfer\\]", "[transfers]", "key 'transfer': missing"},
        BadProfile{"UnknownKey", "layers = 94", "layerz = 94", "key 'model.layerz': unknown key"},
        BadProfile{"WrongType", "tp = 8", "tp = \"8\"", "key 'deployment.tp': must be an integer"},
        BadProfile{"NotPositive", "h2d_gbps = 22.855", "h2d_gbps = 0",
                   "key 'transfer.h2d_gbps': must be greater than 0"},
        BadProfile{"BadFamily", "family = \"gqa\"", "family = \"sparse\"",
                   "key 'attention.family': 'sparse' is not one of"},
        BadProfile{"NotIncreasing", "  8192, ", "  100, ", "key 'prefill.tokens': entries must be strictly increasing"},
        BadProfile{"LengthMismatch", "  10.9,     # paper", "  10.9, 12.0,  # paper",
                   "key 'prefill.seconds': must have as many entries as prefill.tokens"},
        BadProfile{"RaggedMatrix", "\\[0.026, 0.050, 0.115\\]", "[0.026, 0.050]",
                   "key 'decode.seconds': each row must have 3 numbers"},
        BadProfile{"MissingSwitchPath", "\\[switch.partial\\]", "[switch.partial_]",
                   "key 'switch.partial': missing"},
        BadProfile{"ActiveAboveTotal", "active_params_b = 22", "active_params_b = 300",
                   "key 'model.active_params_b': exceeds total_params_b"},
        BadProfile{"NotToml", "\\[model\\]", "[model", "not valid TOML"}),
    [](const auto& info) { return std::string(info.param.name); });

// Mutated profiles load or raise InputError; they never crash or trip a check.
TEST(ProfileErrorTest, MutatedProfilesLoadOrRaiseInputError) {
  const std::string original = ShippedText("qwen3.5-122b-a10b.tp8.toml");
  std::uint64_t state = 12345;
  auto next = [&](std::uint64_t n) {
    state = state * 6364136223846793005ULL + 1442695040888963407ULL;
    return (state >> 33) % n;
  };
  const char alphabet[] = "[]=\".,-0123456789 \nabz#";
  int rejected = 0;
  for (int round = 0; round < 150; ++round) {
    std::string text = original;
    for (int e = 0; e < 3; ++e) {
      const std::size_t pos = next(text.size());
      if (next(2) == 0) {
        text[pos] = alphabet[next(sizeof(alphabet) - 1)];
      } else {
        text.erase(pos, 1 + next(20));
      }
    }
    if (!LoadError(text).empty()) ++rejected;
  }
  EXPECT_GT(rejected, 50);
}

TEST(ProfileErrorTest, MissingFileAndDuplicateModelAreErrors) {
  EXPECT_THAT(LoadError(""), HasSubstr("key 'model': missing"));
  EXPECT_THROW(LoadProfile("/nonexistent/p.toml"), InputError);
  ProfileSet set;
  set.Add(LoadProfile(kProfiles + "/qwen3-32b.tp4.toml"));
  EXPECT_THROW(set.Add(LoadProfile(kProfiles + "/qwen3-32b.tp4.toml")), InputError);
  EXPECT_THROW(ProfileSet::LoadDirectory("/nonexistent"), InputError);
}

}  // namespace
}  // namespace talaria
