// The trackers a run logs to while it trains (runtime.loggers, docs/trackers.md): TensorBoard's
// event files and an MLflow tracking server, behind one door. The controller opens a run's
// trackers here (BatchTrackers::open) and names none of them. Each tracker is a RunRecords stacked
// over the store's records (live_records.h), so the store stays the source of truth and a tracker
// that fails costs the run nothing. The exports of runs already recorded (`trainyard export`) are
// tensorboard.h, mlflow.h and lightning_csv.h; run_figures.h says where each figure goes in them.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "db/run_records.h"
#include "db/store.h"
#include "trackers/live_records.h"

namespace trainyard {

enum class TrackerKind { tensorboard, mlflow };
// runtime.loggers' words ("tensorboard", "mlflow"); nullopt for any other.
std::optional<TrackerKind> tracker_kind(std::string_view word);
const char* tracker_word(TrackerKind kind);

// Where a batch's runs log: a variant of a file and its runtime.loggers.
struct TrackerUse {
  std::string file;
  std::string variant;
  std::vector<std::string> loggers;
};
// Before a batch starts: UserError for the first tracker a use names that cannot be reached (MLflow
// without MLFLOW_TRACKING_URI, or an address that is no MLflow server's).
void check_trackers(const std::vector<TrackerUse>& uses);

// One run's open trackers: records() is where the run's records go, through each tracker to the
// store's.
class RunTrackers {
 public:
  RunRecords& records() { return *top_; }

 private:
  friend class BatchTrackers;
  explicit RunTrackers(RunRecords& stored) : top_(&stored) {}
  std::optional<TensorBoardRecords> tensorboard_;
  std::optional<MlflowRecords> mlflow_;
  RunRecords* top_;
};

// A batch's trackers: what its runs share (the MLflow sender, started by the first run that logs
// to MLflow) and where each run's are opened.
class BatchTrackers {
 public:
  // `log_dir`: where the batch's run logs go; TensorBoard's event files go beside it, in
  // <log_dir>/../tensorboard (a run's in a folder of its own).
  BatchTrackers(Store& store, const std::string& log_dir);
  ~BatchTrackers();
  BatchTrackers(const BatchTrackers&) = delete;
  BatchTrackers& operator=(const BatchTrackers&) = delete;

  // Opens the trackers `loggers` names for run `run_id`, over `stored` (its records in the store).
  // `info` says where a tracker writes; `warn` what fails.
  std::unique_ptr<RunTrackers> open(const std::vector<std::string>& loggers, RunRecords& stored,
                                    int64_t run_id,
                                    const std::function<void(const std::string&)>& info,
                                    const std::function<void(const std::string&)>& warn);
  // The batch's end: each run sent once more where a tracker may lack it; returns what could still
  // not be sent ("MLflow: not sent in full: run 3: ...").
  std::vector<std::string> finish();

 private:
  MlflowSender* mlflow_sender();  // null when MLFLOW_TRACKING_URI is not set

  Store& store_;
  std::string tensorboard_root_;
  std::unique_ptr<MlflowSender> mlflow_;
};

}  // namespace trainyard
