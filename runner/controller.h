// The controller: takes a validated experiment, decides what to run, runs it, and is the only
// writer of the store. Runs whose resolved config already completed are skipped (unless forced);
// runs this machine cannot execute ("needs a CUDA device") are recorded as skipped with the
// reason; a failing run is recorded with its error and the batch goes on; Ctrl-C marks the
// current and remaining runs interrupted and stops.
#pragma once

#include <atomic>
#include <filesystem>
#include <string>

#include "components/registry.h"
#include "db/store.h"
#include "runner/config/experiment.h"
#include "runner/nodes.h"

namespace trainyard {

struct BatchSummary {
  int completed = 0;
  int already_completed = 0;  // skipped: the same config completed before
  int skipped = 0;            // cannot run on this machine
  int failed = 0;
  bool interrupted = false;
  // Every run was skipped because this machine cannot run it (one already completed is no skip).
  bool nothing_ran() const;
  int exit_code() const;
};

class Controller {
 public:
  // `log_dir`: where each run's log file goes. `stop_requested` is set by the signal handler.
  // `node`: this controller's node; across nodes every controller runs the same runs in the same
  // order, and only node 0's store is the record.
  Controller(Store& store, const Registry& registry, std::string log_dir,
             const std::atomic<bool>& stop_requested, NodeSpec node = {});

  BatchSummary run_experiment(const Experiment& experiment, bool force);

 private:
  void execute(const Experiment& experiment, int64_t run_id, int ordinal, const RunSpec& run,
               BatchSummary& summary);
  std::filesystem::path run_file_stem(const Experiment& experiment, int64_t run_id,
                                      const RunSpec& run);

  Store& store_;
  const Registry& registry_;
  std::string log_dir_;
  const std::atomic<bool>& stop_requested_;
  NodeSpec node_;
};

// Short git revision of the repository holding `path` ("" outside git), "-dirty" when modified.
std::string git_revision_of(const std::string& path);

}  // namespace trainyard
