// allocs/'s listing kept between NVML calls (common/watched_listing.hpp): every change of a
// name is in the next answer, and without a watch every call lists. And config.json, looked at
// again only after its name's events.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "common/file_io.hpp"
#include "common/watched_listing.hpp"
#include "harness.hpp"

namespace gpusim::test {
namespace {

void create(const std::string& path) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
  ASSERT_GE(fd, 0) << path;
  ::close(fd);
}

std::vector<std::string> names_of(const std::vector<DirEntry>& entries) {
  std::vector<std::string> names;
  for (const DirEntry& e : entries) names.push_back(e.name);
  std::sort(names.begin(), names.end());
  return names;
}

TEST(WatchedListing, ListsAgainOnlyAfterANameChanged) {
  TempDir dir;
  create(dir.path() + "/a.json");
  WatchedListing listing;
  auto first = listing.list_if_changed(dir.path());
  ASSERT_TRUE(first.ok());
  ASSERT_TRUE(first->has_value());
  EXPECT_EQ(names_of(**first), std::vector<std::string>{"a.json"});
  EXPECT_TRUE(listing.watching());
  auto same = listing.list_if_changed(dir.path());
  ASSERT_TRUE(same.ok());
  EXPECT_FALSE(same->has_value());

  create(dir.path() + "/b.json");
  auto grown = listing.list_if_changed(dir.path());
  ASSERT_TRUE(grown.ok() && grown->has_value());
  EXPECT_EQ(names_of(**grown), (std::vector<std::string>{"a.json", "b.json"}));

  ASSERT_EQ(::unlink((dir.path() + "/a.json").c_str()), 0);
  auto shrunk = listing.list_if_changed(dir.path());
  ASSERT_TRUE(shrunk.ok() && shrunk->has_value());
  EXPECT_EQ(names_of(**shrunk), std::vector<std::string>{"b.json"});
}

// A record is published by rename over nothing, or replaced by rename: the inode differs.
TEST(WatchedListing, ARenameIntoPlaceIsSeenWithItsInode) {
  TempDir dir;
  create(dir.path() + "/a.json");
  WatchedListing listing;
  auto first = listing.list_if_changed(dir.path());
  ASSERT_TRUE(first.ok() && first->has_value());
  const unsigned long long old_ino = (**first)[0].ino;
  create(dir.path() + "/.a.tmp");
  ASSERT_EQ(::rename((dir.path() + "/.a.tmp").c_str(), (dir.path() + "/a.json").c_str()), 0);
  auto renamed = listing.list_if_changed(dir.path());
  ASSERT_TRUE(renamed.ok() && renamed->has_value());
  ASSERT_EQ((**renamed).size(), 1u);
  EXPECT_NE((**renamed)[0].ino, old_ino);
}

// The directory removed and made again: the watch ended with it, and is set on the new one.
TEST(WatchedListing, ADirectoryMadeAgainIsWatchedAgain) {
  TempDir parent;
  const std::string dir = parent.path() + "/allocs";
  ASSERT_TRUE(make_dir(dir, 0755).ok());
  create(dir + "/a.json");
  WatchedListing listing;
  ASSERT_TRUE(listing.list_if_changed(dir).ok());
  ASSERT_TRUE(remove_tree(dir).ok());
  ASSERT_TRUE(make_dir(dir, 0755).ok());
  create(dir + "/b.json");
  auto again = listing.list_if_changed(dir);
  ASSERT_TRUE(again.ok() && again->has_value());
  EXPECT_EQ(names_of(**again), std::vector<std::string>{"b.json"});
  create(dir + "/c.json");
  auto grown = listing.list_if_changed(dir);
  ASSERT_TRUE(grown.ok() && grown->has_value());
  EXPECT_EQ(names_of(**grown), (std::vector<std::string>{"b.json", "c.json"}));
}

// No watch to be had (here: no directory yet): every call lists, and sees what appears.
TEST(WatchedListing, WithoutAWatchEveryCallLists) {
  TempDir parent;
  const std::string dir = parent.path() + "/allocs";
  WatchedListing listing;
  auto none = listing.list_if_changed(dir);
  ASSERT_TRUE(none.ok() && none->has_value());
  EXPECT_TRUE((**none).empty());
  EXPECT_FALSE(listing.watching());
  ASSERT_TRUE(make_dir(dir, 0755).ok());
  create(dir + "/a.json");
  auto seen = listing.list_if_changed(dir);
  ASSERT_TRUE(seen.ok() && seen->has_value());
  EXPECT_EQ(names_of(**seen), std::vector<std::string>{"a.json"});
  auto still = listing.list_if_changed(dir);
  ASSERT_TRUE(still.ok());
  EXPECT_TRUE(still->has_value());
}

// A driver library's client: no watch in its first kClientWatchAfter (closing one waits for
// the kernel, watched_listing.hpp), so every call lists and sees each change; the watch once
// that time has passed, and from then on a listing only after a change.
TEST(WatchedListing, AWatchIsSetOnlyOnceItsDelayHasPassed) {
  TempDir dir;
  create(dir.path() + "/a.json");
  const auto delay = std::chrono::milliseconds(30);
  WatchedListing listing(delay);
  const auto first_call = std::chrono::steady_clock::now();
  auto first = listing.list_if_changed(dir.path());
  ASSERT_TRUE(first.ok() && first->has_value());
  if (std::chrono::steady_clock::now() - first_call < delay) {
    EXPECT_FALSE(listing.watching()) << "a watch at the first call";
    auto again = listing.list_if_changed(dir.path());
    ASSERT_TRUE(again.ok());
    EXPECT_TRUE(again->has_value()) << "without a watch every call lists";
  }
  create(dir.path() + "/b.json");
  // Every call lists until the delay has passed; the first after it sets the watch.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  std::optional<std::vector<DirEntry>> latest;
  while (!listing.watching() && std::chrono::steady_clock::now() < deadline) {
    auto listed = listing.list_if_changed(dir.path());
    ASSERT_TRUE(listed.ok());
    ASSERT_TRUE(listed->has_value()) << "a call without a watch said nothing changed";
    latest = std::move(**listed);
  }
  ASSERT_TRUE(listing.watching()) << "no watch 10 s after a 30 ms delay";
  EXPECT_GE(std::chrono::steady_clock::now() - first_call, delay);
  ASSERT_TRUE(latest.has_value());
  EXPECT_EQ(names_of(*latest), (std::vector<std::string>{"a.json", "b.json"}));
  auto same = listing.list_if_changed(dir.path());
  ASSERT_TRUE(same.ok());
  EXPECT_FALSE(same->has_value()) << "watched, and nothing changed";
  create(dir.path() + "/c.json");
  auto grown = listing.list_if_changed(dir.path());
  ASSERT_TRUE(grown.ok() && grown->has_value());
  EXPECT_EQ(names_of(**grown), (std::vector<std::string>{"a.json", "b.json", "c.json"}));
}

TEST(WatchedListing, InvalidateListsAtTheNextCall) {
  TempDir dir;
  WatchedListing listing;
  ASSERT_TRUE(listing.list_if_changed(dir.path()).ok());
  listing.invalidate();
  auto again = listing.list_if_changed(dir.path());
  ASSERT_TRUE(again.ok());
  EXPECT_TRUE(again->has_value());
}

// Its name's events only: a rename into place, a write, a touch, a removal; another name in the
// same directory is not a change of it.
TEST(WatchedFile, SaysChangedOnlyAfterItsNamesEvents) {
  TempDir dir;
  const std::string file = dir.path() + "/config.json";
  create(file);
  WatchedFile watched;
  EXPECT_TRUE(watched.may_have_changed(file)) << "the first call";
  EXPECT_TRUE(watched.watching());
  EXPECT_FALSE(watched.may_have_changed(file));
  create(dir.path() + "/other.json");
  EXPECT_FALSE(watched.may_have_changed(file)) << "another name";

  create(dir.path() + "/.config.tmp");
  ASSERT_EQ(::rename((dir.path() + "/.config.tmp").c_str(), file.c_str()), 0);
  EXPECT_TRUE(watched.may_have_changed(file)) << "renamed into place";
  EXPECT_FALSE(watched.may_have_changed(file));

  const int fd = ::open(file.c_str(), O_WRONLY | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::write(fd, "{}", 2), 2);
  EXPECT_TRUE(watched.may_have_changed(file)) << "written in place, still open";
  ::close(fd);
  EXPECT_TRUE(watched.may_have_changed(file)) << "closed after writing";
  EXPECT_FALSE(watched.may_have_changed(file));

  ASSERT_EQ(::utimensat(AT_FDCWD, file.c_str(), nullptr, 0), 0);
  EXPECT_TRUE(watched.may_have_changed(file)) << "touched";
  ASSERT_EQ(::unlink(file.c_str()), 0);
  EXPECT_TRUE(watched.may_have_changed(file)) << "removed";
  watched.invalidate();
  EXPECT_TRUE(watched.may_have_changed(file)) << "invalidated";
  EXPECT_FALSE(watched.may_have_changed(file));
}

// Its directory removed and made again: the watch ended with it, and is set on the new one.
TEST(WatchedFile, ADirectoryMadeAgainIsWatchedAgain) {
  TempDir parent;
  const std::string dir = parent.path() + "/state";
  ASSERT_TRUE(make_dir(dir, 0755).ok());
  WatchedFile watched;
  EXPECT_TRUE(watched.may_have_changed(dir + "/config.json"));
  ASSERT_TRUE(remove_tree(dir).ok());
  ASSERT_TRUE(make_dir(dir, 0755).ok());
  EXPECT_TRUE(watched.may_have_changed(dir + "/config.json"));
  EXPECT_FALSE(watched.may_have_changed(dir + "/config.json"));
  create(dir + "/config.json");
  EXPECT_TRUE(watched.may_have_changed(dir + "/config.json"));
}

// No watch to be had (no such directory): every call says it may have changed.
TEST(WatchedFile, WithoutAWatchEveryCallSaysChanged) {
  TempDir parent;
  const std::string file = parent.path() + "/none/config.json";
  WatchedFile watched;
  EXPECT_TRUE(watched.may_have_changed(file));
  EXPECT_FALSE(watched.watching());
  EXPECT_TRUE(watched.may_have_changed(file));
}

}  // namespace
}  // namespace gpusim::test
