// A run's records as they are written into the store, also written where the user looks while it
// trains: `runtime.loggers: [tensorboard]` (docs/trackers.md). The store stays the source of truth:
// the event file starts from what the store holds of the run, and is rewritten from it whenever a
// figure comes again at a step already written (a continued run trains again the steps after its
// checkpoint), so TensorBoard shows one line, equal to the database. A step's figures are written
// once the next step's come (a validation may add to the step of a progress line); writing is
// buffered and flushed at each heartbeat and epoch, on the controller's side of the worker's pipe —
// never in the training step. A logger that cannot write says so once in the run's log and stops;
// the run and its database records go on.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "db/run_records.h"
#include "reports/tensorboard.h"

namespace trainyard {

class TensorBoardRecords : public RunRecords {
 public:
  // `inner`: where the records go first (the store's). `folder`: the run's event-file folder
  // (tensorboard_folder). `warn`: how a failure to write is said (once).
  TensorBoardRecords(RunRecords& inner, Store& store, int64_t run_id, std::string folder,
                     std::function<void(const std::string&)> warn);
  void attributes(const std::map<std::string, std::string>& attributes) override;
  void epoch(int64_t epoch, const std::map<std::string, double>& values) override;
  void step(int64_t step, const std::map<std::string, double>& values) override;
  void heartbeat(const std::optional<RunProgress>& progress) override;
  void completed(const std::map<std::string, double>& metrics) override;
  void ended(RunStatus status, const std::string& error, FailureClass failure) override;

 private:
  // Runs `write` on the event file, unless an earlier write failed; a failure is said and ends
  // the logging.
  void write(const std::function<void()>& write);
  void rewrite_from_store();
  RunRecords& inner_;
  Store& store_;
  int64_t run_id_;
  std::string folder_;
  std::function<void(const std::string&)> warn_;
  std::unique_ptr<TensorBoardRun> writer_;
  void write_pending_step();
  TensorBoardSteps written_;
  std::optional<StepRow> pending_;  // the latest step's figures, not written yet
  bool failed_ = false;
};

}  // namespace trainyard
