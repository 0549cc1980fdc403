// The coordinator's durable state: RocksDB with one column family per kind of
// record (tasks, evals, blobs, queue, jobs, nodes, kb, skills, llm_calls, meta,
// auth: teams and token hashes, campaigns).
// Keys are designed for prefix scans (job id first). Every multi-key change
// is one WriteBatch; writes that must survive a crash are synced.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace kevo::store {

enum class Family { kTasks, kEvals, kBlobs, kQueue, kJobs, kNodes, kKb, kSkills, kLlmCalls, kMeta, kAuth,
                    kCampaigns };

// A set of writes applied atomically by Store::Write.
class Batch {
 public:
  void Put(Family family, std::string key, std::string value);
  void Delete(Family family, std::string key);

  struct Op {
    Family family;
    std::string key;
    std::optional<std::string> value;  // nullopt = delete
  };
  const std::vector<Op>& ops() const { return ops_; }

 private:
  std::vector<Op> ops_;
};

class Store {
 public:
  virtual ~Store() = default;

  // Opens (creating if needed) the database in `dir`. Returns Unavailable
  // when another process holds it, Internal on other RocksDB errors.
  static absl::StatusOr<std::unique_ptr<Store>> Open(const std::string& dir);

  // Applies all of `batch` or nothing. With `sync`, returns only once the
  // write is durable on disk. Thread-safe.
  virtual absl::Status Write(const Batch& batch, bool sync) = 0;
  absl::Status Put(Family family, std::string key, std::string value, bool sync);

  // The value at `key`, nullopt when absent. Thread-safe.
  virtual absl::StatusOr<std::optional<std::string>> Get(Family family,
                                                         std::string_view key) = 0;

  // Calls `fn(key, value)` for every key starting with `prefix`, in key
  // order, until `fn` returns false. Thread-safe; sees a consistent snapshot.
  virtual absl::Status Scan(Family family, std::string_view prefix,
                            const std::function<bool(std::string_view, std::string_view)>& fn) = 0;

  // Bytes on disk and in memtables, RocksDB's estimate over every family.
  virtual int64_t ApproximateBytes() = 0;
  // Called after every Write with whether it was synced and how long it
  // took (the coordinator's write-latency histogram); set before use.
  void SetWriteObserver(std::function<void(bool sync, double seconds)> observer) {
    write_observer_ = std::move(observer);
  }

 protected:
  std::function<void(bool, double)> write_observer_;
};

}  // namespace kevo::store
