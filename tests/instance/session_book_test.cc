#include "instance/session_book.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

namespace talaria {
namespace {

std::vector<std::string> Reported(SessionBook& book, bool all) {
  std::vector<std::string> ids;
  book.ReportChanged(all, [&](InstanceSession& s) { ids.push_back(s.id); });
  std::sort(ids.begin(), ids.end());
  return ids;
}

TEST(SessionBookTest, ADeltaReportsOnlyWhatChangedUntilEverythingMayHave) {
  SessionBook book;
  InstanceSession& a = book.Add("a");
  InstanceSession& b = book.Add("b");
  EXPECT_EQ(Reported(book, false), (std::vector<std::string>{"a", "b"}));  // the first report walks everyone
  EXPECT_TRUE(Reported(book, false).empty());
  book.MarkDirty(b);
  book.MarkDirty(b);  // once
  EXPECT_EQ(Reported(book, false), (std::vector<std::string>{"b"}));
  a.host_blocks = 3;
  book.MarkAllDirty();  // a registry drop that names no session
  EXPECT_EQ(Reported(book, false), (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(a.host_blocks, -1);  // probed afresh
  EXPECT_EQ(Reported(book, true), (std::vector<std::string>{"a", "b"}));  // a full snapshot
}

TEST(SessionBookTest, DeviceHoldersFollowTheirBlocks) {
  SessionBook book;
  InstanceSession& a = book.Add("a");
  InstanceSession& b = book.Add("b");
  InstanceSession& c = book.Add("c");
  for (InstanceSession* s : {&a, &b, &c}) {
    s->blocks.Append(1, 1);
    book.TrackDevice(*s);
  }
  a.blocks.clear();
  book.TrackDevice(a);
  EXPECT_EQ(book.device_holders().size(), 2u);
  EXPECT_EQ(a.device_index, -1);
  for (InstanceSession* s : book.device_holders()) {
    EXPECT_EQ(book.device_holders()[static_cast<std::size_t>(s->device_index)], s);
  }
  book.ClearDeviceHolders();
  EXPECT_TRUE(book.device_holders().empty());
  EXPECT_EQ(b.device_index, -1);
}

TEST(SessionBookTest, IdleSessionsHoldingNothingAreForgottenLeastRecentFirst) {
  SessionBook book;
  std::vector<std::string> forgotten;
  auto forget = [&](const InstanceSession& s) { forgotten.push_back(s.id); };
  InstanceSession& a = book.Add("a");
  InstanceSession& b = book.Add("b");
  InstanceSession& c = book.Add("c");
  book.Finished(a, AtSeconds(1), FromSeconds(1));
  a.last_use = AtSeconds(1);
  book.Finished(b, AtSeconds(2), FromSeconds(1));
  b.last_use = AtSeconds(2);
  b.blocks.Append(7, 1);  // holds device KV: kept
  book.Finished(c, AtSeconds(3), FromSeconds(1));
  c.last_use = AtSeconds(3);
  EXPECT_EQ(book.recent_finishes().size(), 1u);  // a 1 s hold keeps only the latest
  book.ForgetIdle(AtSeconds(12.5), 10, forget);
  EXPECT_EQ(forgotten, (std::vector<std::string>{"a"}));
  EXPECT_EQ(book.Find("a"), nullptr);
  book.ForgetIdle(AtSeconds(13.5), 10, forget);  // within idle / 8 of the last sweep: none
  EXPECT_EQ(forgotten.size(), 1u);
  book.ForgetIdle(AtSeconds(14), 10, forget);
  EXPECT_EQ(forgotten, (std::vector<std::string>{"a", "c"}));
  EXPECT_NE(book.Find("b"), nullptr);
  EXPECT_EQ(book.size(), 1u);
  EXPECT_EQ(book.ByOwner(b.owner), &b);
}

}  // namespace
}  // namespace talaria
