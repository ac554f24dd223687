#include "core/error.h"

#include <gtest/gtest.h>

#include <string>

namespace talaria {
namespace {

TEST(InputErrorTest, MessageLeadsWithWhere) {
  InputError e("traces/a.jsonl:3", "field 'gap_s': must be a number");
  EXPECT_STREQ(e.what(), "traces/a.jsonl:3: field 'gap_s': must be a number");
  EXPECT_EQ(e.where(), "traces/a.jsonl:3");
}

TEST(ProblemListTest, ReportsEveryProblemUpToTheShownLimit) {
  ProblemList p;
  EXPECT_NO_THROW(p.ThrowIfAny());
  for (int i = 1; i <= 25; ++i) p.Add("f:" + std::to_string(i), "bad");
  try {
    p.ThrowIfAny();
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("f:1: bad"), std::string::npos);
    EXPECT_NE(m.find("f:20: bad"), std::string::npos);
    EXPECT_EQ(m.find("f:21: bad"), std::string::npos);
    EXPECT_NE(m.find("and 5 more problems"), std::string::npos);
  }
}

}  // namespace
}  // namespace talaria
