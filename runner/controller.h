// The controller: takes a batch of validated experiments, decides what to run, runs it, and
// records what the batch does in the store (through batch_records.h and run_reporter.h). Runs whose
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
#include "runner/launcher.h"
#include "runner/nodes.h"
#include "runner/search/study.h"
#include "runner/tracked_records.h"
#include "trainyard/registry.h"

namespace trainyard {

// What the batch does when runs fail or time runs out (`trainyard run --retries --on-failure
// --time-limit`).
struct BatchPolicy {
  int retries = 0;  // times a run failed in a transient class is tried again, from its checkpoint
  bool stop_on_failure = false;  // --on-failure stop: no new run after one failed for good
  // Set (together with the stop request) when the batch's --time-limit passed: runs stop as on
  // Ctrl-C, and say why.
  const std::atomic<bool>* time_limit_reached = nullptr;
  std::string time_limit{};  // as given ("9h"), for messages
  // The batch's --only and --repeats ("--only fp32 --repeats 1"), recorded with each run it
  // trains; "" for the files' whole sweeps.
  std::string selection{};
  // --fresh-engine: every run in a process of its own, none kept warm (WarmEngine)
  bool fresh_engine = false;
};

struct BatchSummary {
  int completed = 0;
  int resumed = 0;            // of those started: continued from an interrupted run
  int already_completed = 0;  // skipped: the same config completed before
  int skipped = 0;            // cannot run on this machine
  int failed = 0;
  int retried = 0;           // attempts made again after a transient failure
  int not_started = 0;       // left for the next `trainyard run`: the batch stopped first
  int interrupted_runs = 0;  // stopped while training (checkpointed): continued by the next batch
  int paused = 0;            // trials paused at a rung by a study's successive halving
  int promoted = 0;          // of those started: paused trials a study's decision continued
  bool interrupted = false;
  bool at_time_limit = false;  // the stop came from --time-limit, not from a signal
  bool stopped_on_failure = false;
  // Every run was skipped because this machine cannot run it (one already completed is no skip).
  bool nothing_ran() const;
  // kExitTimeLimit when the batch stopped at its --time-limit, kExitInterrupted on a signal.
  int exit_code() const;
};

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
  // A run of the batch that will execute: its record's id, whether it continues an interrupted
  // one, and its place among all runs of the batch's files (the same on every node: run i of a
  // multi-node batch meets on master-port + i).
  struct Planned {
    const Experiment* experiment;
    const RunSpec* run;
    int64_t run_id;
    bool continues;
    int ordinal;
    int64_t pause_after_epochs = 0;  // a study's trial stops there (RunContext)
    bool promoted = false;           // continues a trial paused at a rung
  };
  // `first_ordinal`: how many runs the batch's earlier files have.
  void plan(const Experiment& experiment, int first_ordinal, bool force,
            std::vector<Planned>& queue, BatchSummary& summary);
  void execute(const Planned& planned, BatchSummary& summary);
  // sweep.search (runner/controller_study.cpp): runs the study to its outcome, recorded in the
  // store; false when the batch stopped first (the next `trainyard run` goes on with it).
  bool run_study(const Experiment& experiment, const Study& study, BatchSummary& summary);
  // Trains trial `trial` (`run`) to `epochs`, pausing it there when it has more, unless the store
  // has its figure there already; returns the figure (NaN: it failed or could not run).
  double train_trial(const Experiment& experiment, const Study& study, const StudyKey& key,
                     int64_t trial, const RunSpec& run, const TrialValues& values, int64_t epochs,
                     BatchSummary& summary);
  // The batch's MLflow sender, started by its first run that logs to MLflow; null when
  // MLFLOW_TRACKING_URI is not set.
  MlflowSender* mlflow_sender();
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
  double training_seconds_ = 0;           // of the study running: its trials' time in execute()
  std::unique_ptr<MlflowSender> mlflow_;  // runtime.loggers: [mlflow]
  // The process that trains the batch's single-process runs one after another (runner/launcher.h).
  WarmEngine warm_engine_;
};

}  // namespace trainyard
