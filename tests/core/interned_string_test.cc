#include "core/interned_string.h"

#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

namespace talaria {
namespace {

TEST(InternedStringTest, EqualStringsShareOnePooledCopy) {
  const std::string built = std::string("session-") + "interned-1";
  const InternedString a(built);
  InternedString b;
  b = "session-interned-1";
  EXPECT_EQ(a, b);
  EXPECT_EQ(&a.str(), &b.str());  // one copy, whatever the source
  EXPECT_EQ(a, std::string_view("session-interned-1"));
  EXPECT_EQ(a.str(), built);

  const InternedString other("session-interned-2");
  EXPECT_NE(a, other);
  EXPECT_LT(a, other);  // ordered by content, not by address
  EXPECT_EQ(sizeof(InternedString), sizeof(void*));
}

TEST(InternedStringTest, DefaultIsTheEmptyStringAndPoolsNothing) {
  const std::size_t before = InternedString::PoolSize();
  const InternedString none;
  InternedString empty("");
  EXPECT_TRUE(none.empty());
  EXPECT_EQ(none, empty);
  EXPECT_EQ(InternedString::PoolSize(), before);
  empty = "interned-test-new";
  EXPECT_EQ(InternedString::PoolSize(), before + 1);
  empty = std::string("interned-test-new");
  EXPECT_EQ(InternedString::PoolSize(), before + 1);
}

TEST(InternedStringTest, ReadsAsAStringWherePassed) {
  const InternedString model("qwen2.5-32b-instruct");  // past the small-string size
  const std::string& ref = model;
  const std::string_view view = model;
  EXPECT_EQ(ref, "qwen2.5-32b-instruct");
  EXPECT_EQ(view.size(), model.size());
  EXPECT_EQ("model '" + model + "'", "model 'qwen2.5-32b-instruct'");
  std::ostringstream out;
  out << model;
  EXPECT_EQ(out.str(), "qwen2.5-32b-instruct");
}

TEST(InternedStringTest, ThreadsInterningTheSameNamesGetTheSameCopies) {
  constexpr int kNames = 200;
  std::vector<std::vector<const std::string*>> seen(4, std::vector<const std::string*>(kNames));
  std::vector<std::thread> threads;
  for (std::size_t t = 0; t < seen.size(); ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kNames; ++i) seen[t][static_cast<std::size_t>(i)] = &InternedString("mt-" + std::to_string(i)).str();
    });
  }
  for (auto& th : threads) th.join();
  for (std::size_t t = 1; t < seen.size(); ++t) EXPECT_EQ(seen[t], seen[0]);
}

}  // namespace
}  // namespace talaria
