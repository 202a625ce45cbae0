// Trains one run of a batch, as the controller planned it (runner/controller.h): names its files
// (or finds those of the run it continues), opens its log and the trackers its runtime.loggers
// name, launches it (in the batch's warm engine when it can: runner/launcher.h) with the batch's
// retries, and records how it ended. Studies (runner/study_runner.h) train their trials through it
// too. Also here: what the batch does when runs fail or time runs out (BatchPolicy) and what it
// did (BatchSummary).
#pragma once

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>

#include "db/store.h"
#include "runner/config/experiment.h"
#include "runner/console.h"
#include "runner/launcher.h"
#include "runner/nodes.h"
#include "runner/run_reporter.h"
#include "trackers/trackers.h"

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
  // Set by `trainyard slurm-study` for a study with sweep.search.parallel: every run trains in a
  // Slurm job of its own (LaunchSpec::slurm_job) asking for this, named after the run's files.
  std::optional<SlurmJobLaunch> slurm_jobs{};
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
  int paused = 0;            // trials paused at a rung by a study's schedule
  int promoted = 0;          // of those started: paused trials a study's decision continued
  bool interrupted = false;
  bool at_time_limit = false;  // the stop came from --time-limit, not from a signal
  bool stopped_on_failure = false;
  // Every run was skipped because this machine cannot run it (one already completed is no skip).
  bool nothing_ran() const;
  // Adds another's counts (a run trained in a study's slot) and its stops.
  void add(const BatchSummary& other);
  // kExitTimeLimit when the batch stopped at its --time-limit, kExitInterrupted on a signal.
  int exit_code() const;
};

// A run of the batch that will execute: its record's id, whether it continues an interrupted one,
// and its place among all runs of the batch's files (the same on every node: run i of a multi-node
// batch meets on master-port + i).
struct PlannedRun {
  const Experiment* experiment = nullptr;
  const RunSpec* run = nullptr;
  int64_t run_id = 0;
  bool continues = false;
  int ordinal = 0;
  int64_t pause_after_epochs = 0;  // a study's trial stops there (RunContext)
  bool promoted = false;           // continues a trial paused at a rung
};

class RunExecutor {
 public:
  // `log_dir`: where each run's files go. `stop_requested` is set by the signal handler. `console`
  // shows the batch's progress; the controller, which owns it, outlives the executor.
  RunExecutor(Store& store, std::string log_dir, const std::atomic<bool>& stop_requested,
              NodeSpec node, BatchPolicy policy, BatchConsole& console);

  // Trains `planned` to its end (or its pause, or the batch's stop) and counts it in `summary`.
  void execute(const PlannedRun& planned, BatchSummary& summary);
  // The batch is over: the trackers send once more what they could not (trackers/trackers.h).
  void finish();
  // Another executor like this one, for slot `index` of a study's `sharing` trials side by side
  // (sweep.search.parallel): its own store connection, warm engine and trackers; its runs get
  // 1/`sharing` of the machine's CPUs when their runtime.threads lets the machine choose, and a
  // CUDA run the slot's own GPU (slot_cuda_device).
  std::unique_ptr<RunExecutor> slot(Store& store, int index, int sharing) const;
  // Whether its runs train on this machine: not under BatchPolicy::slurm_jobs, where each trains
  // on its Slurm job's node (so this machine's devices say nothing of what they can train on).
  bool trains_here() const { return !policy_.slurm_jobs; }

 private:
  // A run's files: <stem>.log, <stem>.yaml (what every rank reads), <stem>.state/ (checkpoint).
  struct RunFiles {
    std::filesystem::path stem;
    std::string log_path, config_path, state_dir;
    bool continues = false;  // an interrupted run's, whose log exists: it goes on in them
  };
  // Names the run's files (an interrupted one's are its own already) and marks it started or
  // resumed in the store; nullopt when the run cannot be named (recorded as failed).
  std::optional<RunFiles> start(const PlannedRun& planned, BatchSummary& summary);
  // Launches the run, again from its checkpoint after a transient failure (--retries).
  LaunchResult launch(const PlannedRun& planned, const RunFiles& files, RunReporter& reporter,
                      RunRecords& records, RunLog& log, BatchSummary& summary);
  // Under BatchPolicy::slurm_jobs: `spec` trains in a Slurm job of its own, named after the run's
  // files, once an earlier job of the run (left by a study's job that was killed) has gone; false
  // when one is still there after kSlurmJobPatienceSeconds.
  bool use_slurm_job(const PlannedRun& planned, const RunFiles& files, LaunchSpec& spec,
                     RunLog& log);
  static constexpr int kSlurmJobPatienceSeconds = 120;
  // How it ended, in the store and in `summary`: completed, failed, interrupted, or paused at the
  // study's rung.
  void finish_run(const PlannedRun& planned, const RunFiles& files, const LaunchResult& result,
                  RunRecords& records, RunLog& log, BatchSummary& summary);

  Store& store_;
  std::string log_dir_;
  const std::atomic<bool>& stop_requested_;
  NodeSpec node_;
  BatchPolicy policy_;
  BatchConsole& console_;
  BatchTrackers trackers_;  // runtime.loggers: where runs log while they train
  // The process that trains the batch's single-process runs one after another.
  WarmEngine warm_engine_;
  int sharing_ = 1;  // slot(): the runs beside this one's on the machine, its own included
  int slot_ = -1;    // slot(): its index among them; -1: not a slot
};

}  // namespace trainyard
