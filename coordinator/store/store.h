// The coordinator's durable state: RocksDB with one column family per kind of
// record (tasks, evals, blobs, queue, jobs, nodes, kb, skills, llm_calls, meta,
// auth: teams and token hashes, campaigns).
// Keys are designed for prefix scans (job id first). Every multi-key change
// is one WriteBatch; writes that must survive a crash are synced.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace kevo::store {

enum class Family { kTasks, kEvals, kBlobs, kQueue, kJobs, kNodes, kKb, kSkills, kLlmCalls, kMeta, kAuth, kCampaigns };

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

struct StoreOptions {
  // Writes are refused (Unavailable) while the filesystem holding the
  // database has fewer free bytes than this: RocksDB never sees a full disk
  // in the middle of a write, and its flushes have room. 0: no reserve.
  int64_t reserve_bytes = 0;
  // Fault injection (tests): every Write and Sync waits this long first, as
  // on a slow disk.
  absl::Duration write_delay = absl::ZeroDuration();
};

class Store {
 public:
  virtual ~Store() = default;

  // Opens (creating if needed) the database in `dir`. Returns Unavailable
  // when another process holds it, Internal on other RocksDB errors.
  static absl::StatusOr<std::unique_ptr<Store>> Open(const std::string& dir, StoreOptions options = {});

  // Applies all of `batch` or nothing. With `sync`, returns only once the
  // write is durable on disk. Thread-safe. Unavailable, with nothing
  // written, while the disk has less free space than the reserve; and after
  // a write fails (a full disk), Unavailable for every write until the
  // database has been closed and reopened, which the store does by itself
  // (at most once a second) once the disk has room again. The database is
  // never written after a failed write: Debian's RocksDB 7.8 aborts on that.
  virtual absl::Status Write(const Batch& batch, bool sync) = 0;
  absl::Status Put(Family family, std::string key, std::string value, bool sync);
  // Makes every write so far durable on disk, synced or not (one fsync of
  // the write-ahead log: writers that batch their unsynced writes and then
  // sync once pay one fsync for all of them). Thread-safe. Unavailable after
  // a failed write, as Write.
  virtual absl::Status Sync() = 0;

  // The value at `key`, nullopt when absent. Thread-safe.
  virtual absl::StatusOr<std::optional<std::string>> Get(Family family, std::string_view key) = 0;

  // Calls `fn(key, value)` for every key starting with `prefix`, in key
  // order, until `fn` returns false. Thread-safe; sees a consistent snapshot.
  // `fn` must not call the store.
  virtual absl::Status Scan(Family family, std::string_view prefix,
                            const std::function<bool(std::string_view, std::string_view)>& fn) = 0;

  // Bytes on disk and in memtables, RocksDB's estimate over every family.
  virtual int64_t ApproximateBytes() = 0;
  // Called after every Write with whether it was synced and how long it
  // took (the coordinator's write-latency histogram); set before use.
  void SetWriteObserver(std::function<void(bool sync, double seconds)> observer) {
    write_observer_ = std::move(observer);
  }
  // Called for every write refused without reaching RocksDB (the disk below
  // the reserve, or refused since a write failed); set before use.
  void SetRefusalObserver(std::function<void()> observer) { refusal_observer_ = std::move(observer); }

 protected:
  std::function<void(bool, double)> write_observer_;
  std::function<void()> refusal_observer_;
};

}  // namespace kevo::store
