// The controller: takes a batch of validated experiments, decides what to run, runs it (each run
// through the RunExecutor, each study through a StudyRunner), and records what the batch does in
// the store (through batch_records.h and run_reporter.h). Runs whose
// resolved config already completed are skipped (unless forced); a run interrupted earlier (its
// controller killed, Ctrl-C, SIGTERM) continues from its checkpoint under its own id; runs this
// machine cannot execute ("needs a CUDA device") are recorded as skipped with the reason; a failing
// run is recorded with its error and the batch goes on; Ctrl-C marks the current and remaining runs
// interrupted and stops.
#pragma once

#include <atomic>
#include <memory>
#include <string>

#include "db/store.h"
#include "runner/config/experiment.h"
#include "runner/console.h"
#include "runner/nodes.h"
#include "runner/run_executor.h"
#include "trainyard/registry.h"

namespace trainyard {

class Controller {
 public:
  // `log_dir`: where each run's log file goes. `stop_requested` is set by the signal handler.
  // `node`: this controller's node; across nodes every controller runs the same runs in the same
  // order, and only node 0's store is the record.
  Controller(Store& store, const Registry& registry, std::string log_dir,
             const std::atomic<bool>& stop_requested, NodeSpec node = {}, BatchPolicy policy = {});

  // Runs every experiment's runs, in order; runs are counted across the batch ("run 7/42").
  BatchSummary run_batch(const std::vector<Experiment>& experiments, bool force);

 private:
  // `first_ordinal`: how many runs the batch's earlier files have.
  void plan(const Experiment& experiment, int first_ordinal, bool force,
            std::vector<PlannedRun>& queue, BatchSummary& summary);
  // Trains the planned runs in order; those after a stop are left for the next batch.
  void execute_queue(const std::vector<PlannedRun>& queue, BatchSummary& summary);
  // Why a run that did not start stays for later ("the batch reached its --time-limit 9h").
  std::string not_started_reason(const BatchSummary& summary) const;

  Store& store_;
  const Registry& registry_;
  std::string log_dir_;
  const std::atomic<bool>& stop_requested_;
  NodeSpec node_;
  BatchPolicy policy_;
  BatchConsole console_;
  // This batch among all that wrote the store ("2026-12-05T04:20:00Z/4242"): whose rounds a run's
  // "round" attribute counts.
  std::string batch_id_;
  RunExecutor executor_;  // trains each run, the studies' trials too
};

}  // namespace trainyard
