// A study (sweep.search, docs/search.md) run to its outcome: trials proposed one after another,
// each trained to the first rung as soon as it is proposed (so TPE sees every earlier trial's
// figure there); its schedule's decisions, each promoted trial continuing from its paused
// checkpoint — successive halving's rung by rung once every trial is in, asha's between trials,
// median's at each check of each trial; last the best trial. Everything is read back from the store
// — a trial already trained to a rung is not trained again, a paused or interrupted one continues —
// so a study killed at any moment and started again proposes, decides and ends as an undisturbed
// one. The controller (runner/controller.h) runs one per study of a batch; trials train through the
// batch's RunExecutor.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "db/store.h"
#include "runner/config/experiment.h"
#include "runner/console.h"
#include "runner/run_executor.h"
#include "runner/search/samplers.h"
#include "runner/search/study.h"
#include "runner/trial_slots.h"

namespace trainyard {

class StudyRunner {
 public:
  StudyRunner(Store& store, RunExecutor& executor, BatchConsole& console,
              const std::atomic<bool>& stop_requested, const Experiment& experiment,
              const Study& study, BatchSummary& summary);

  // Runs the study to its outcome, recorded in the store; false when the batch stopped first (the
  // next `trainyard run` goes on with it).
  bool run();

 private:
  // Trial `trial`'s values and run: as recorded, or proposed from the figures of the trials before
  // it. False when the time budget is spent (then it has none).
  bool add_trial(int64_t trial);
  // Whether trial `trial` resolves to a configuration an earlier trial has (then it is that
  // trial: it trains nothing and takes no place of its own in a rung).
  bool repeats_earlier(int64_t trial) const;
  // Every trial to the first rung.
  bool train_first_rung();
  // The same with trials side by side in the slots: trial i proposed once trial i - parallel has
  // its figure.
  bool train_first_rung_side_by_side();
  // What TPE proposes trial `trial` from: the figures of trials up to trial - parallel, and the
  // trials after them (still training, with parallel) at the worst figure so far.
  std::vector<Observation> observations_for(int64_t trial) const;
  // Trains each of `trials` to `epochs` (side by side with slots); their figures, in order.
  std::vector<double> train_all(const std::vector<int64_t>& trials, int64_t epochs);
  // sweep.search.time_budget: whether the first `trials` trials have trained the budget through
  // (said once, when they have): then no trial is proposed after them.
  bool out_of_budget(int64_t trials);
  // Successive halving: each rung's decision, once its cohort is complete; the promoted go on.
  bool climb_rungs();
  // ASHA: new trials and promotions as asha_promotion says, until neither is left.
  bool run_asha();
  // Median: each trial in turn, judged at each check against the completed trials' median.
  bool run_median();
  // A decision recorded in the study's order and said on the console.
  void record_decision(StudyDecisionRow row, const std::string& said);
  // The best of the last rung, recorded as the study's outcome.
  void record_best();
  // The best figure of the last rung (ties: the earlier trial); nullopt when every one failed.
  std::optional<size_t> best_of_last_rung() const;
  // Two objectives: the front of the trials' figures and costs, said, and the one whose settings
  // are confirmed (its place in cohort_).
  std::optional<size_t> pick_from_front();
  // A trial's second objective (train_seconds, or time_to_target as the report measures it:
  // infinite when never reached); NaN when its run did not complete.
  double trial_cost(int64_t trial) const;
  // Trains trial `trial` to `epochs`, pausing it there when it has more, unless the store has its
  // figure there already; returns the figure (NaN: it failed or could not run).
  double train_trial(int64_t trial, int64_t epochs);
  // train_trial in its steps: what to train (or the figure there already), and once trained, the
  // figure recorded.
  struct TrialJob {
    int64_t trial = 0;
    int64_t epochs = 0;
    std::optional<double> figure{};  // known without training
    PlannedRun planned{};
  };
  TrialJob prepare_trial(int64_t trial, int64_t epochs);
  // Why this machine cannot train `run` ("": it can): its device, and with trials side by side on
  // GPUs, a GPU for every slot. A run in a Slurm job of its own is its job's node's to train.
  std::string cannot_train_here(const RunSpec& run) const;
  double finish_trial(const TrialJob& job);
  std::string job_name(const TrialJob& job) const;  // "exp/v trial 3 to epoch 1 (promoted...)"
  // Trial `trial`'s record: its values and settings, not yet a run or a figure.
  StudyTrialRow trial_row(int64_t trial) const;
  // The trial's record in the store, forward only: a study walked again after a kill reads its
  // rungs back without taking the record of a trial that went further back to an earlier rung.
  double record_trial(int64_t trial, int64_t run_id, int64_t epochs, double figure);
  bool stopped() const;
  // "the controller's own work: 1.2 ms a trial": proposing, resolving, reading and writing the
  // store, what a study of thousands of trials adds to their training (bench/search/README.md).
  std::string own_work() const;

  Store& store_;
  RunExecutor& executor_;
  BatchConsole& console_;
  const std::atomic<bool>& stop_requested_;
  const Experiment& experiment_;
  const Study& study_;
  const SearchSettings& search_;
  BatchSummary& summary_;
  const std::chrono::steady_clock::time_point start_;  // before the key: resolving it is work
  const StudyKey key_;
  double training_seconds_ = 0;  // of its trials, in the executor
  std::vector<int64_t> rungs_;   // the epochs each rung ends at; the last is the runs' end
  // sweep.search.time_budget: the trials' runs counted so far, and their epochs' seconds.
  // Each run's epochs' seconds, read again only when its trial's record goes further.
  struct BudgetRun {
    int64_t epochs = 0;
    std::vector<double> seconds;
  };
  std::map<int64_t, BudgetRun> budget_runs_;

  std::map<int64_t, TrialValues> recorded_;  // the store's trials' values, when the study began
  std::map<int64_t, int64_t> run_of_;        // each trial's run, as last recorded
  int64_t decisions_ = 0;                    // recorded so far, in this walk of the study
  std::unique_ptr<TrialSlots> slots_;        // sweep.search.parallel > 1

  // Every trial's values and run, in order of proposal; the first rung's figures.
  std::vector<TrialValues> values_;
  std::vector<RunSpec> runs_;
  std::vector<Observation> seen_;
  // The trials of the rung being decided (once decided: of the last rung), their figures there.
  std::vector<int64_t> cohort_;
  std::vector<double> figures_;
};

}  // namespace trainyard
