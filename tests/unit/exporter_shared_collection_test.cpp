// One collection shared by concurrent scrapes, a cache of max_age, and deadlines that a hung
// collection cannot extend.
#include "exporter/shared_collection.hpp"

#include <future>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "exporter_test_support.hpp"

namespace gpureap {
namespace {

using namespace std::chrono_literals;
using test::GateCollector;
using test::within;
using Clock = SharedCollection::Clock;

TEST(ExporterSharedCollection, ConcurrentScrapesWaitForOneCollection) {
  GateCollector collector(false);
  SharedCollection shared(collector, 0s);  // no cache: only the sharing saves collections
  std::vector<std::future<std::optional<CollectionResult>>> scrapes;
  for (int i = 0; i < 20; ++i) {
    scrapes.push_back(std::async(std::launch::async, [&] { return shared.get(Clock::now() + 10s); }));
  }
  ASSERT_TRUE(within([&] { return shared.waiting() == 20 && collector.started() == 1; }))
      << collector.started() << " collections for twenty scrapes";
  collector.set_open(true);
  for (auto& scrape : scrapes) {
    const auto result = scrape.get();
    ASSERT_TRUE(result);
    EXPECT_FALSE(result->stale);
    EXPECT_NE(result->text->find("gpureap_test_collection 1\n"), std::string::npos) << *result->text;
  }
  EXPECT_EQ(shared.collections(), 1u);
  EXPECT_EQ(collector.started(), 1) << "those who waited for it do not start another";
}

TEST(ExporterSharedCollection, AYoungCollectionIsServedWithoutCollecting) {
  GateCollector collector;
  SharedCollection shared(collector, 60s);
  ASSERT_TRUE(shared.get(Clock::now() + 5s));
  const auto again = shared.get(Clock::now() + 5s);
  ASSERT_TRUE(again);
  EXPECT_FALSE(again->stale);
  EXPECT_EQ(collector.started(), 1);
  SharedCollection uncached(collector, 0s);
  ASSERT_TRUE(uncached.get(Clock::now() + 5s));
  ASSERT_TRUE(uncached.get(Clock::now() + 5s));
  EXPECT_EQ(collector.started(), 3) << "without a cache each scrape in turn collects";
}

TEST(ExporterSharedCollection, AHungCollectionIsAnsweredAtTheDeadlineWithTheLastGoodOneMarkedStale) {
  GateCollector collector;
  SharedCollection shared(collector, 0s);
  const auto first = shared.get(Clock::now() + 5s);
  ASSERT_TRUE(first);
  collector.set_open(false);  // the driver hangs from now on
  const auto asked = Clock::now();
  const auto late = shared.get(asked + 200ms);
  const auto waited = Clock::now() - asked;
  ASSERT_TRUE(late);
  EXPECT_TRUE(late->stale);
  EXPECT_EQ(*late->text, *first->text);
  EXPECT_GE(waited, 200ms);
  EXPECT_LT(waited, 2s) << "the deadline holds";
  // A second scrape meanwhile does not queue a second collection behind the hung one.
  ASSERT_TRUE(shared.get(Clock::now() + 50ms));
  EXPECT_EQ(collector.started(), 2);
  collector.set_open(true);
  ASSERT_TRUE(within([&] { return shared.collections() == 2; }));
  const auto fresh = shared.get(Clock::now() + 5s);
  ASSERT_TRUE(fresh);
  EXPECT_FALSE(fresh->stale);
}

TEST(ExporterSharedCollection, NothingToServeBeforeTheFirstCollectionEnds) {
  GateCollector collector(false);
  SharedCollection shared(collector, 1s);
  EXPECT_FALSE(shared.get(Clock::now() + 100ms));
  collector.set_open(true);
  EXPECT_TRUE(shared.get(Clock::now() + 5s));
}

TEST(ExporterSharedCollection, AFailedCollectionKeepsTheLastGoodOneAndIsReported) {
  GateCollector collector;
  std::vector<std::string> failures;
  SharedCollection shared(collector, 0s, [&](const std::string& why) { failures.push_back(why); });
  const auto good = shared.get(Clock::now() + 5s);
  ASSERT_TRUE(good);
  collector.fail_next();
  const auto after = shared.get(Clock::now() + 5s);
  ASSERT_TRUE(after);
  EXPECT_TRUE(after->stale);
  EXPECT_EQ(*after->text, *good->text);
  ASSERT_EQ(failures.size(), 1u);
  EXPECT_EQ(failures[0], "the collection failed: the driver said no");
}

TEST(ExporterSharedCollection, StopWakesWaitersAndSaysWhenACollectionIsStillHung) {
  // Static: after a stop that gives up, the collection thread may still use both.
  static GateCollector collector(false);
  static SharedCollection shared(collector, 0s);
  auto waiting = std::async(std::launch::async, [&] { return shared.get(Clock::now() + 30s); });
  ASSERT_TRUE(within([&] { return shared.waiting() == 1 && collector.started() == 1; }));
  const auto asked = Clock::now();
  EXPECT_FALSE(shared.stop(100ms)) << "the collection is hung";
  EXPECT_LT(Clock::now() - asked, 2s);
  EXPECT_FALSE(waiting.get()) << "the waiting scrape is answered, with nothing to serve";
  collector.set_open(true);
  EXPECT_TRUE(within([&] { return shared.collections() == 1; })) << "the left thread ends once the driver returns";
}

}  // namespace
}  // namespace gpureap
