#include "router/session_table.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace talaria {
namespace {

// Routes `id` at second `t` (the router sets last_use after the lookup).
SessionEntry& Use(SessionTable& table, const std::string& id, double t, std::size_t max, double idle_s,
                  std::vector<std::string>& dropped) {
  SessionEntry& e = table.Route(id, AtSeconds(t), max, idle_s, [&](SessionEntry& gone) {
    for (const auto& name : {"a", "b", "c", "d", "e"}) {
      if (table.Find(name) == &gone) dropped.push_back(name);
    }
  });
  e.last_use = AtSeconds(t);
  return e;
}

// The least recently used goes first, however recency was reached: a
// session touched after its neighbours outlives them.
TEST(SessionTableTest, DropsTheLeastRecentlyUsedBeyondTheBound) {
  SessionTable table;
  std::vector<std::string> dropped;
  Use(table, "a", 1, 3, 1e9, dropped);
  Use(table, "b", 2, 3, 1e9, dropped);
  Use(table, "c", 3, 3, 1e9, dropped);
  Use(table, "a", 4, 3, 1e9, dropped);  // a is now the most recent
  Use(table, "d", 5, 3, 1e9, dropped);
  EXPECT_EQ(dropped, std::vector<std::string>{"b"});
  Use(table, "c", 6, 3, 1e9, dropped);
  Use(table, "e", 7, 3, 1e9, dropped);
  EXPECT_EQ(dropped, (std::vector<std::string>{"b", "a"}));  // a (4) before d (5); c was used at 6
  EXPECT_EQ(table.size(), 3u);
  EXPECT_NE(table.Find("c"), nullptr);
  EXPECT_NE(table.Find("d"), nullptr);
}

TEST(SessionTableTest, DropsIdleEntriesWhenANewSessionComes) {
  SessionTable table;
  std::vector<std::string> dropped;
  Use(table, "a", 0, 100, 10, dropped);
  Use(table, "b", 5, 100, 10, dropped);
  Use(table, "a", 8, 100, 10, dropped);
  Use(table, "c", 12, 100, 10, dropped);  // nothing idle for 10 s yet
  EXPECT_TRUE(dropped.empty());
  Use(table, "d", 16, 100, 10, dropped);  // b idle 11 s; a used 8 s ago
  EXPECT_EQ(dropped, std::vector<std::string>{"b"});
}

// An erased session's place in the queue is skipped; the same id coming
// back is a new entry with a place of its own.
TEST(SessionTableTest, AnErasedSessionThatComesBackIsNew) {
  SessionTable table;
  std::vector<std::string> dropped;
  Use(table, "a", 1, 2, 1e9, dropped);
  Use(table, "b", 2, 2, 1e9, dropped);
  EXPECT_TRUE(table.Erase("a", [](SessionEntry&) {}));
  EXPECT_FALSE(table.Erase("a", [](SessionEntry&) {}));
  Use(table, "a", 3, 2, 1e9, dropped);
  EXPECT_TRUE(dropped.empty());
  Use(table, "c", 4, 2, 1e9, dropped);  // b (2) is the least recent, not the new a (3)
  EXPECT_EQ(dropped, std::vector<std::string>{"b"});
  Use(table, "d", 5, 2, 1e9, dropped);
  EXPECT_EQ(dropped, (std::vector<std::string>{"b", "a"}));
}

}  // namespace
}  // namespace talaria
