#include "coordinator/store/store.h"

#include <sys/statvfs.h>

#include <atomic>
#include <chrono>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include <rocksdb/db.h>
#include <rocksdb/options.h>
#include <rocksdb/write_batch.h>

#include "common/log.h"
#include "common/status.h"

namespace kevo::store {
namespace {

constexpr const char* kFamilyNames[] = {"tasks", "evals",  "blobs",     "queue", "jobs", "nodes",
                                        "kb",    "skills", "llm_calls", "meta",  "auth", "campaigns"};
constexpr int kNumFamilies = sizeof(kFamilyNames) / sizeof(kFamilyNames[0]);

absl::Status FromRocks(const rocksdb::Status& s, std::string_view what) {
  if (s.ok()) return absl::OkStatus();
  std::string msg = absl::StrCat(std::string(what), ": ", s.ToString());
  if (s.IsIOError() && s.ToString().find("lock") != std::string::npos) {
    return absl::UnavailableError(absl::StrCat(msg, " (is another kevo-coordinator using this --db folder?)"));
  }
  if (s.IsNoSpace() || s.subcode() == rocksdb::Status::kNoSpace ||
      s.ToString().find("No space left") != std::string::npos) {
    return absl::UnavailableError(
        absl::StrCat(msg, " (the disk holding the database is full: free space, and writes resume)"));
  }
  if (s.IsNotFound()) return absl::NotFoundError(msg);
  if (s.IsCorruption()) return absl::DataLossError(msg);
  return absl::InternalError(msg);
}

struct Opened {
  std::unique_ptr<rocksdb::DB> db;
  std::vector<rocksdb::ColumnFamilyHandle*> handles;  // by Family
};

absl::StatusOr<Opened> OpenRocks(const std::string& dir) {
  rocksdb::DBOptions options;
  options.create_if_missing = true;
  options.create_missing_column_families = true;
  std::vector<rocksdb::ColumnFamilyDescriptor> families;
  // Memtables of 8 MiB (RocksDB's default is 64): a flush then needs little
  // room, so the coordinator's reserve (--db-reserve-mb) covers it.
  rocksdb::ColumnFamilyOptions cf;
  cf.write_buffer_size = 8 << 20;
  families.emplace_back(rocksdb::kDefaultColumnFamilyName, cf);
  for (const char* name : kFamilyNames) {
    families.emplace_back(name, cf);
  }
  std::vector<rocksdb::ColumnFamilyHandle*> handles;
  rocksdb::DB* raw = nullptr;
  rocksdb::Status s = rocksdb::DB::Open(options, dir, families, &handles, &raw);
  if (!s.ok()) return FromRocks(s, absl::StrCat("open database ", dir));
  Opened o;
  o.db.reset(raw);
  // Drop the default family handle: kevo uses only its named families.
  o.db->DestroyColumnFamilyHandle(handles[0]);
  handles.erase(handles.begin());
  static_assert(kNumFamilies == static_cast<int>(Family::kCampaigns) + 1);
  o.handles = std::move(handles);
  return o;
}

void CloseRocks(Opened& o) {
  if (o.db == nullptr) return;
  for (auto* h : o.handles) o.db->DestroyColumnFamilyHandle(h);
  o.handles.clear();
  o.db->Close().PermitUncheckedError();
  o.db.reset();
}

// Free bytes for an unprivileged writer on the filesystem holding `dir`, or
// -1 when statvfs fails.
int64_t FreeBytes(const std::string& dir) {
  struct statvfs st;
  if (statvfs(dir.c_str(), &st) != 0) return -1;
  return static_cast<int64_t>(st.f_bavail) * static_cast<int64_t>(st.f_frsize);
}

// Debian's RocksDB 7.8 is built with assertions, and asserts on the first
// write to a WAL after a failed one (fixed upstream in 9.x): so after a write
// fails nothing is written to this instance again. The database is closed
// and reopened (a new WAL) once the disk has room again, and until then
// every write is refused. Writes also stop, before RocksDB sees an error,
// while the disk has less free space than the reserve.
class RocksStore final : public Store {
 public:
  RocksStore(std::string dir, Opened opened, StoreOptions options)
      : dir_(std::move(dir)), options_(options), rocks_(std::move(opened)) {}

  ~RocksStore() override {
    absl::MutexLock l(&mu_);
    CloseRocks(rocks_);
  }

  absl::Status Write(const Batch& batch, bool sync) override {
    absl::SleepFor(options_.write_delay);
    KEVO_RETURN_IF_ERROR(Recover());
    if (options_.reserve_bytes > 0) {
      // A statvfs a write (about a microsecond, beside a synced write's
      // milliseconds): a cached reading would let writes through for a
      // while after the disk filled.
      const int64_t free = FreeBytes(dir_);
      if (free >= 0 && free < options_.reserve_bytes) {
        if (refusal_observer_) refusal_observer_();
        return absl::UnavailableError(absl::StrFormat(
            "the disk holding the coordinator's database (%s) has %.1f MiB free, less than the "
            "%.0f MiB kept in reserve (--db-reserve-mb): nothing was written; free space and "
            "writes resume",
            dir_, static_cast<double>(free) / (1 << 20), static_cast<double>(options_.reserve_bytes) / (1 << 20)));
      }
    }
    absl::ReaderMutexLock l(&mu_);
    if (rocks_.db == nullptr || failed_.load()) {
      if (refusal_observer_) refusal_observer_();
      return Refused();
    }
    rocksdb::WriteBatch wb;
    for (const auto& op : batch.ops()) {
      auto* cf = rocks_.handles[static_cast<int>(op.family)];
      if (op.value.has_value()) {
        wb.Put(cf, op.key, *op.value);
      } else {
        wb.Delete(cf, op.key);
      }
    }
    rocksdb::WriteOptions wo;
    wo.sync = sync;
    return Timed(sync, "a write", [&] { return rocks_.db->Write(wo, &wb); });
  }

  absl::Status Sync() override {
    absl::SleepFor(options_.write_delay);
    KEVO_RETURN_IF_ERROR(Recover());
    absl::ReaderMutexLock l(&mu_);
    if (rocks_.db == nullptr || failed_.load()) {
      if (refusal_observer_) refusal_observer_();
      return Refused();
    }
    return Timed(true, "syncing the log", [&] { return rocks_.db->FlushWAL(/*sync=*/true); });
  }

  int64_t ApproximateBytes() override {
    absl::ReaderMutexLock l(&mu_);
    if (rocks_.db == nullptr) return 0;
    uint64_t total = 0;
    for (auto* h : rocks_.handles) {
      uint64_t v = 0;
      if (rocks_.db->GetIntProperty(h, "rocksdb.total-sst-files-size", &v)) total += v;
      if (rocks_.db->GetIntProperty(h, "rocksdb.cur-size-all-mem-tables", &v)) total += v;
    }
    return static_cast<int64_t>(total);
  }

  absl::StatusOr<std::optional<std::string>> Get(Family family, std::string_view key) override {
    absl::ReaderMutexLock l(&mu_);
    if (rocks_.db == nullptr) return Refused();
    std::string value;
    rocksdb::Status s = rocks_.db->Get(rocksdb::ReadOptions(), rocks_.handles[static_cast<int>(family)],
                                       rocksdb::Slice(key.data(), key.size()), &value);
    if (s.IsNotFound()) return std::optional<std::string>();
    if (!s.ok()) return FromRocks(s, "rocksdb get");
    return std::optional<std::string>(std::move(value));
  }

  absl::Status Scan(Family family, std::string_view prefix,
                    const std::function<bool(std::string_view, std::string_view)>& fn) override {
    absl::ReaderMutexLock l(&mu_);
    if (rocks_.db == nullptr) return Refused();
    std::unique_ptr<rocksdb::Iterator> it(
        rocks_.db->NewIterator(rocksdb::ReadOptions(), rocks_.handles[static_cast<int>(family)]));
    for (it->Seek(rocksdb::Slice(prefix.data(), prefix.size())); it->Valid(); it->Next()) {
      rocksdb::Slice k = it->key();
      if (!k.starts_with(rocksdb::Slice(prefix.data(), prefix.size()))) break;
      rocksdb::Slice v = it->value();
      if (!fn(std::string_view(k.data(), k.size()), std::string_view(v.data(), v.size()))) break;
    }
    return FromRocks(it->status(), "rocksdb scan");
  }

 private:
  // Runs one RocksDB write (`what`, e.g. "a write"), tells the write
  // observer how long it took, and after a failure refuses every write
  // until the database is reopened (Recover).
  absl::Status Timed(bool sync, const char* what, const std::function<rocksdb::Status()>& write) {
    const auto start = std::chrono::steady_clock::now();
    absl::Status s = FromRocks(write(), absl::StrCat("rocksdb: ", what));
    if (write_observer_) {
      write_observer_(sync, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    }
    if (!s.ok()) {
      absl::MutexLock f(&failure_mu_);
      if (!failed_.exchange(true)) failure_ = s;
      LogError("store: ", what, " failed; no more writes until the database is reopened: ", s.ToString());
    }
    return s;
  }

  absl::Status Refused() {
    absl::MutexLock f(&failure_mu_);
    return absl::UnavailableError(absl::StrCat("the coordinator's database refuses writes since one failed (",
                                               failure_.message(), "); it is reopened once the disk has room again"));
  }

  // After a failed write: closes and reopens the database, at most once a
  // second and only once the disk has more free space than the reserve.
  // OK when writes may go ahead.
  absl::Status Recover() {
    if (!failed_.load()) return absl::OkStatus();
    {
      absl::MutexLock f(&failure_mu_);
      const absl::Time now = absl::Now();
      if (now < next_reopen_) return absl::OkStatus();  // Write refuses it
      next_reopen_ = now + absl::Seconds(1);
    }
    const int64_t free = FreeBytes(dir_);
    if (free >= 0 && free <= options_.reserve_bytes) return absl::OkStatus();
    absl::MutexLock l(&mu_);
    if (!failed_.load()) return absl::OkStatus();
    CloseRocks(rocks_);
    absl::StatusOr<Opened> opened = OpenRocks(dir_);
    if (!opened.ok()) {
      LogError("store: reopening the database after a failed write: ", opened.status().ToString());
      return absl::OkStatus();  // rocks_ is empty: Write refuses, the next try is a second away
    }
    rocks_ = *std::move(opened);
    failed_.store(false);
    LogInfo("store: the database was reopened after a failed write; writes resume");
    return absl::OkStatus();
  }

  const std::string dir_;
  const StoreOptions options_;
  // Shared by reads and writes; held alone to close and reopen.
  absl::Mutex mu_;
  Opened rocks_ ABSL_GUARDED_BY(mu_);
  std::atomic<bool> failed_{false};
  absl::Mutex failure_mu_;
  absl::Status failure_ ABSL_GUARDED_BY(failure_mu_);
  absl::Time next_reopen_ ABSL_GUARDED_BY(failure_mu_) = absl::InfinitePast();
};

}  // namespace

void Batch::Put(Family family, std::string key, std::string value) {
  ops_.push_back({family, std::move(key), std::move(value)});
}

void Batch::Delete(Family family, std::string key) { ops_.push_back({family, std::move(key), std::nullopt}); }

absl::Status Store::Put(Family family, std::string key, std::string value, bool sync) {
  Batch b;
  b.Put(family, std::move(key), std::move(value));
  return Write(b, sync);
}

absl::StatusOr<std::unique_ptr<Store>> Store::Open(const std::string& dir, StoreOptions options) {
  KEVO_ASSIGN_OR_RETURN(Opened opened, OpenRocks(dir));
  return std::unique_ptr<Store>(new RocksStore(dir, std::move(opened), options));
}

}  // namespace kevo::store
