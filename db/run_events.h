// A Slurm task's records on their way to the store, without the task opening it: SQLite must not be
// written from compute nodes over a shared file system (WAL needs every process on one host, and
// NFS locks are unreliable). The task appends one JSON object per line to <stem>.events.jsonl in
// its run's folder, each line written whole with one write() and fsync'd; `trainyard collect` on
// the submitting host takes in the complete lines past the offset it stored last time, together
// with the new offset, in one transaction. Collecting twice, or while the task still writes, never
// duplicates or tears a run: a line is applied once, and a half-written last line waits.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include "db/run_records.h"
#include "db/store.h"

namespace trainyard {

class RunEventWriter : public RunRecords {
 public:
  // Opens `path` for appending, creating it; a last line that a killed task left half-written is
  // cut off first (no collector has taken it in: it never ended with a newline).
  explicit RunEventWriter(std::string path);
  ~RunEventWriter() override;
  RunEventWriter(const RunEventWriter&) = delete;
  RunEventWriter& operator=(const RunEventWriter&) = delete;

  // `job`: the Slurm job ("1234_7") the task runs as.
  void started(const RunEnvironment& environment, const std::string& job);
  void resumed(const std::string& job);
  void attributes(const std::map<std::string, std::string>& attributes) override;
  void epoch(int64_t epoch, const std::map<std::string, double>& values) override;
  void step(int64_t step, const std::map<std::string, double>& values) override;
  void heartbeat(const std::optional<RunProgress>& progress) override;
  void completed(const std::map<std::string, double>& metrics) override;
  void ended(RunStatus status, const std::string& error, FailureClass failure) override;
  // The task asked Slurm to run it again (its `restarts`-th requeue): the run waits, queued.
  void requeued(int restarts);

  const std::string& path() const { return path_; }

 private:
  void append(const std::string& line);
  std::string path_;
  int fd_ = -1;
};

struct CollectedEvents {
  int applied = 0;        // lines taken in now
  bool finished = false;  // the run completed or ended (failed, interrupted) among them
  std::string problem{};  // a line that could not be read, skipped ("" when none)
};

// Takes in the complete lines of `task.events_path()` past the offset the store holds (read under
// the write lock, so two collectors at once never apply a line twice): applied with the new offset
// in one transaction, each line whole or not at all. A file that does not exist yet has nothing to
// take in.
CollectedEvents collect_run_events(Store& store, const SlurmRunRecord& task);

}  // namespace trainyard
