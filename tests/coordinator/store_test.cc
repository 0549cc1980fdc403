// The coordinator's store (coordinator/store/store.h) on a real RocksDB in a
// temporary folder: families kept apart, batches all or nothing, prefix scans
// in key order, what was synced still there after a reopen, one process at a
// time, the free-space reserve refusing writes before RocksDB sees a full
// disk, and the observers the coordinator's metrics hang on.
#include "coordinator/store/store.h"

#include <unistd.h>

#include <filesystem>
#include <string>
#include <vector>

#include "absl/time/clock.h"
#include "gtest/gtest.h"

#include "tests/testing/test_dir.h"

namespace kevo::store {
namespace {

namespace fs = std::filesystem;

class StoreTest : public ::testing::Test {
 protected:
  void SetUp() override { dir_ = kevo::testing::FreshTestDir("store-test"); }
  void TearDown() override { fs::remove_all(dir_); }

  std::unique_ptr<Store> Open(StoreOptions options = {}) {
    auto store = Store::Open(dir_.string(), options);
    EXPECT_TRUE(store.ok()) << store.status();
    return store.ok() ? std::move(*store) : nullptr;
  }

  // The keys under `prefix` in `family`, in the order Scan gives them.
  static std::vector<std::string> Keys(Store& store, Family family, std::string_view prefix) {
    std::vector<std::string> keys;
    EXPECT_TRUE(store
                    .Scan(family, prefix,
                          [&](std::string_view k, std::string_view) {
                            keys.emplace_back(k);
                            return true;
                          })
                    .ok());
    return keys;
  }

  fs::path dir_;
};

TEST_F(StoreTest, FamiliesKeepTheirOwnKeys) {
  auto store = Open();
  ASSERT_TRUE(store->Put(Family::kJobs, "j1", "job", /*sync=*/false).ok());
  ASSERT_TRUE(store->Put(Family::kNodes, "j1", "node", /*sync=*/false).ok());
  EXPECT_EQ(store->Get(Family::kJobs, "j1").value(), "job");
  EXPECT_EQ(store->Get(Family::kNodes, "j1").value(), "node");
  EXPECT_EQ(store->Get(Family::kEvals, "j1").value(), std::nullopt);
}

TEST_F(StoreTest, ABatchIsAppliedWhole) {
  auto store = Open();
  ASSERT_TRUE(store->Put(Family::kQueue, "old", "x", false).ok());
  Batch batch;
  batch.Put(Family::kEvals, "e1", "record");
  batch.Put(Family::kBlobs, "h1", "source");
  batch.Delete(Family::kQueue, "old");
  ASSERT_TRUE(store->Write(batch, /*sync=*/true).ok());
  EXPECT_EQ(store->Get(Family::kEvals, "e1").value(), "record");
  EXPECT_EQ(store->Get(Family::kBlobs, "h1").value(), "source");
  EXPECT_EQ(store->Get(Family::kQueue, "old").value(), std::nullopt);
}

TEST_F(StoreTest, ScanGivesThePrefixInKeyOrderAndStopsWhenAsked) {
  auto store = Open();
  for (const char* k : {"job/b/n2", "job/a/n1", "job/b/n1", "jobs", "job/b/n10"}) {
    ASSERT_TRUE(store->Put(Family::kNodes, k, k, false).ok());
  }
  EXPECT_EQ(Keys(*store, Family::kNodes, "job/b/"), (std::vector<std::string>{"job/b/n1", "job/b/n10", "job/b/n2"}));
  int seen = 0;
  ASSERT_TRUE(store->Scan(Family::kNodes, "job/", [&](std::string_view, std::string_view) { return ++seen < 2; }).ok());
  EXPECT_EQ(seen, 2);
  EXPECT_TRUE(Keys(*store, Family::kNodes, "zzz").empty());
}

TEST_F(StoreTest, WhatWasSyncedIsThereAfterAReopen) {
  {
    auto store = Open();
    ASSERT_TRUE(store->Put(Family::kJobs, "synced", "1", /*sync=*/true).ok());
    ASSERT_TRUE(store->Put(Family::kJobs, "unsynced-then-synced", "2", /*sync=*/false).ok());
    ASSERT_TRUE(store->Sync().ok());
  }
  auto store = Open();
  EXPECT_EQ(store->Get(Family::kJobs, "synced").value(), "1");
  EXPECT_EQ(store->Get(Family::kJobs, "unsynced-then-synced").value(), "2");
}

TEST_F(StoreTest, ASecondOpenOfOneFolderIsRefused) {
  auto first = Open();
  auto second = Store::Open(dir_.string());
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), absl::StatusCode::kUnavailable) << second.status();
}

TEST_F(StoreTest, AReserveLargerThanTheFreeSpaceRefusesWritesAndWritesNothing) {
  StoreOptions options;
  options.reserve_bytes = int64_t{1} << 62;  // more than any disk has free
  auto store = Open(options);
  int refused = 0;
  store->SetRefusalObserver([&] { ++refused; });
  Batch batch;
  batch.Put(Family::kJobs, "j1", "job");
  const absl::Status s = store->Write(batch, /*sync=*/true);
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable) << s;
  EXPECT_EQ(refused, 1);
  EXPECT_EQ(store->Get(Family::kJobs, "j1").value(), std::nullopt);
}

TEST_F(StoreTest, TheWriteObserverHearsEveryWriteWithItsSync) {
  auto store = Open();
  std::vector<bool> syncs;
  store->SetWriteObserver([&](bool sync, double seconds) {
    EXPECT_GE(seconds, 0);
    syncs.push_back(sync);
  });
  ASSERT_TRUE(store->Put(Family::kMeta, "a", "1", true).ok());
  ASSERT_TRUE(store->Put(Family::kMeta, "b", "2", false).ok());
  EXPECT_EQ(syncs, (std::vector<bool>{true, false}));
}

TEST_F(StoreTest, AnInjectedDelayHoldsEveryWriteAndSync) {
  StoreOptions options;
  options.write_delay = absl::Milliseconds(50);
  auto store = Open(options);
  const absl::Time start = absl::Now();
  ASSERT_TRUE(store->Put(Family::kMeta, "a", "1", false).ok());
  ASSERT_TRUE(store->Sync().ok());
  EXPECT_GE(absl::Now() - start, absl::Milliseconds(100));
  EXPECT_EQ(store->Get(Family::kMeta, "a").value(), "1");
}

}  // namespace
}  // namespace kevo::store
