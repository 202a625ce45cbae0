// One `trainyard run` per database. Two controllers on one database would each plan the same
// queue — both continue the same interrupted run, both train the same new config — so the second
// refuses, naming the first by host and pid (Hydra, Optuna and submitit leave this to the user;
// LevelDB's LOCK file is the model). The lock is flock(2) on <db>.lock: the kernel drops it when
// the holder dies however it dies, so a SIGKILLed batch never leaves a stale lock. Readers
// (`report`, `runs`, `status`) and `collect` take no lock: SQLite's own locking keeps them safe.
#pragma once

#include <string>

namespace trainyard {

class BatchLock {
 public:
  // Takes the lock of the database at `db_path`; UserError naming the holder when another process
  // has it, followed by `advice` (what to do instead; default: a second batch's).
  explicit BatchLock(const std::string& db_path, const std::string& advice = "");
  ~BatchLock();
  BatchLock(const BatchLock&) = delete;
  BatchLock& operator=(const BatchLock&) = delete;

 private:
  int fd_ = -1;
};

}  // namespace trainyard
