#include "core/choices.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace talaria {
namespace {

enum class Colour { kRed, kGreen, kBlue };
constexpr Choices<Colour, 2> kColours{{{{"red", Colour::kRed}, {"green", Colour::kGreen}}}};

TEST(ChoicesTest, NamesAndParsesEveryValueOfTheTable) {
  for (const auto& [name, value] : kColours.names) {
    Colour parsed = Colour::kBlue;
    ASSERT_TRUE(kColours.Parse(name, parsed)) << name;
    EXPECT_EQ(parsed, value);
    EXPECT_EQ(std::string_view(kColours.Name(value)), name);
  }
  EXPECT_THAT(kColours.Names(), ::testing::ElementsAre("red", "green"));
}

TEST(ChoicesTest, AnUnknownNameLeavesTheValueAlone) {
  Colour c = Colour::kGreen;
  EXPECT_FALSE(kColours.Parse("Red", c));  // names are exact
  EXPECT_FALSE(kColours.Parse("", c));
  EXPECT_EQ(c, Colour::kGreen);
  EXPECT_STREQ(kColours.Name(Colour::kBlue), "");  // a value the table lacks
}

}  // namespace
}  // namespace talaria
