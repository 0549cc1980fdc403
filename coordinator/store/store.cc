#include "coordinator/store/store.h"

#include <chrono>

#include <rocksdb/db.h>
#include <rocksdb/options.h>
#include <rocksdb/write_batch.h>

#include "absl/strings/str_cat.h"

namespace kevo::store {
namespace {

constexpr const char* kFamilyNames[] = {"tasks", "evals",  "blobs",     "queue", "jobs",
                                        "nodes", "kb",     "skills",    "llm_calls", "meta",  "auth",
                                        "campaigns"};
constexpr int kNumFamilies = sizeof(kFamilyNames) / sizeof(kFamilyNames[0]);

absl::Status FromRocks(const rocksdb::Status& s, std::string_view what) {
  if (s.ok()) return absl::OkStatus();
  std::string msg = absl::StrCat(std::string(what), ": ", s.ToString());
  if (s.IsIOError() && s.ToString().find("lock") != std::string::npos) {
    return absl::UnavailableError(
        absl::StrCat(msg, " (is another kevo-coordinator using this --db folder?)"));
  }
  if (s.IsNotFound()) return absl::NotFoundError(msg);
  if (s.IsCorruption()) return absl::DataLossError(msg);
  return absl::InternalError(msg);
}

class RocksStore final : public Store {
 public:
  RocksStore(std::unique_ptr<rocksdb::DB> db, std::vector<rocksdb::ColumnFamilyHandle*> handles)
      : db_(std::move(db)), handles_(std::move(handles)) {}

  ~RocksStore() override {
    for (auto* h : handles_) db_->DestroyColumnFamilyHandle(h);
    db_->Close();
  }

  absl::Status Write(const Batch& batch, bool sync) override {
    rocksdb::WriteBatch wb;
    for (const auto& op : batch.ops()) {
      auto* cf = handles_[static_cast<int>(op.family)];
      if (op.value.has_value()) {
        wb.Put(cf, op.key, *op.value);
      } else {
        wb.Delete(cf, op.key);
      }
    }
    rocksdb::WriteOptions wo;
    wo.sync = sync;
    const auto start = std::chrono::steady_clock::now();
    absl::Status s = FromRocks(db_->Write(wo, &wb), "rocksdb write");
    if (write_observer_) {
      write_observer_(sync, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    }
    return s;
  }

  int64_t ApproximateBytes() override {
    uint64_t total = 0;
    for (auto* h : handles_) {
      uint64_t v = 0;
      if (db_->GetIntProperty(h, "rocksdb.total-sst-files-size", &v)) total += v;
      if (db_->GetIntProperty(h, "rocksdb.cur-size-all-mem-tables", &v)) total += v;
    }
    return static_cast<int64_t>(total);
  }

  absl::StatusOr<std::optional<std::string>> Get(Family family, std::string_view key) override {
    std::string value;
    rocksdb::Status s = db_->Get(rocksdb::ReadOptions(), handles_[static_cast<int>(family)],
                                 rocksdb::Slice(key.data(), key.size()), &value);
    if (s.IsNotFound()) return std::optional<std::string>();
    if (!s.ok()) return FromRocks(s, "rocksdb get");
    return std::optional<std::string>(std::move(value));
  }

  absl::Status Scan(Family family, std::string_view prefix,
                    const std::function<bool(std::string_view, std::string_view)>& fn) override {
    rocksdb::ReadOptions ro;
    std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(ro, handles_[static_cast<int>(family)]));
    rocksdb::Slice p(prefix.data(), prefix.size());
    for (it->Seek(p); it->Valid() && it->key().starts_with(p); it->Next()) {
      if (!fn(std::string_view(it->key().data(), it->key().size()),
              std::string_view(it->value().data(), it->value().size()))) {
        break;
      }
    }
    return FromRocks(it->status(), "rocksdb scan");
  }

 private:
  std::unique_ptr<rocksdb::DB> db_;
  std::vector<rocksdb::ColumnFamilyHandle*> handles_;
};

}  // namespace

void Batch::Put(Family family, std::string key, std::string value) {
  ops_.push_back({family, std::move(key), std::move(value)});
}

void Batch::Delete(Family family, std::string key) {
  ops_.push_back({family, std::move(key), std::nullopt});
}

absl::Status Store::Put(Family family, std::string key, std::string value, bool sync) {
  Batch b;
  b.Put(family, std::move(key), std::move(value));
  return Write(b, sync);
}

absl::StatusOr<std::unique_ptr<Store>> Store::Open(const std::string& dir) {
  rocksdb::DBOptions options;
  options.create_if_missing = true;
  options.create_missing_column_families = true;
  std::vector<rocksdb::ColumnFamilyDescriptor> families;
  families.emplace_back(rocksdb::kDefaultColumnFamilyName, rocksdb::ColumnFamilyOptions());
  for (const char* name : kFamilyNames) {
    families.emplace_back(name, rocksdb::ColumnFamilyOptions());
  }
  std::vector<rocksdb::ColumnFamilyHandle*> handles;
  rocksdb::DB* raw = nullptr;
  rocksdb::Status s = rocksdb::DB::Open(options, dir, families, &handles, &raw);
  if (!s.ok()) return FromRocks(s, absl::StrCat("open database ", dir));
  std::unique_ptr<rocksdb::DB> db(raw);
  // Drop the default family handle: kevo uses only its named families.
  db->DestroyColumnFamilyHandle(handles[0]);
  handles.erase(handles.begin());
  static_assert(kNumFamilies == static_cast<int>(Family::kCampaigns) + 1);
  return std::unique_ptr<Store>(new RocksStore(std::move(db), std::move(handles)));
}

}  // namespace kevo::store
