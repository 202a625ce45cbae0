#include "runner/controller.h"

#include <algorithm>
#include <chrono>

#include <unistd.h>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "common/clock.h"
#include "common/files.h"
#include "common/text.h"
#include "runner/batch_records.h"
#include "runner/engine/engine.h"
#include "runner/run_plan.h"
#include "runner/study_runner.h"

namespace trainyard {

namespace {

// Each variant's runtime.loggers, for check_trackers.
std::vector<TrackerUse> tracker_uses(const std::vector<Experiment>& experiments) {
  std::vector<TrackerUse> uses;
  for (const Experiment& experiment : experiments)
    for (const RunSpec& run : experiment.runs)
      uses.push_back({experiment.file, run.variant, run.runtime.loggers});
  return uses;
}

}  // namespace

Controller::Controller(Store& store, const Registry& registry, std::string log_dir,
                       const std::atomic<bool>& stop_requested, NodeSpec node, BatchPolicy policy)
    : store_(store),
      registry_(registry),
      log_dir_(std::move(log_dir)),
      stop_requested_(stop_requested),
      node_(std::move(node)),
      policy_(policy),
      batch_id_(fmt::format("{}/{}", utc_now(), getpid())),
      executor_(store, log_dir_, stop_requested, node_, std::move(policy), console_) {}

BatchSummary Controller::run_batch(const std::vector<Experiment>& experiments, bool force) {
  BatchSummary summary;
  for (const Experiment& experiment : experiments)
    check_experiment_name_is_free(store_, experiment);
  check_trackers(tracker_uses(experiments));  // one unreachable is refused before the batch
  if (int orphans = store_.mark_orphaned_runs_interrupted())
    console_.line(
        fmt::format("{} left unfinished by an earlier trainyard process marked "
                    "interrupted: each continues from its checkpoint, or from the start if it "
                    "left none",
                    plural(orphans, "run")));
  // Every node must launch the same runs in the same order; only node 0 knows what completed
  // (or was interrupted) before.
  if (node_.multi_node() && !force) {
    console_.line(
        "multi-node: every run executes (completed runs are not skipped, so the nodes stay in "
        "step)");
    force = true;
  }
  // Studies first (sweep.search): the runs their variants compare are their best settings,
  // known once they end. Their trials train here, one after another; what they leave is recorded.
  std::vector<Experiment> batch(experiments.begin(), experiments.end());
  for (Experiment& experiment : batch) {
    if (experiment.studies.empty()) continue;
    if (node_.multi_node())
      throw UserError(fmt::format(
          "{}: a search (sweep.search) runs on one node; run it without --nnodes, or on Slurm "
          "with `trainyard submit --slurm` (a job per study)",
          experiment.file));
    for (const Study& study : experiment.studies)
      if (!summary.interrupted &&
          !StudyRunner(store_, executor_, console_, stop_requested_, experiment, study, summary)
               .run())
        summary.interrupted = true;
    add_confirmations(experiment, store_);
  }

  // Decide every run's fate first, so `trainyard runs` shows the whole batch as queued.
  std::vector<PlannedRun> queue;
  int ordinal = 0;
  for (const Experiment& experiment : batch) {
    plan(experiment, ordinal, force, queue, summary);
    ordinal += static_cast<int>(experiment.runs.size());
  }
  execute_queue(queue, summary);
  executor_.finish();
  console_.finish();
  return summary;
}

void Controller::execute_queue(const std::vector<PlannedRun>& queue, BatchSummary& summary) {
  for (size_t i = 0; i < queue.size(); ++i) {
    const PlannedRun& planned = queue[i];
    if (stop_requested_.load()) summary.interrupted = true;
    if (summary.interrupted || summary.stopped_on_failure) {
      // Left for the next `trainyard run`, which starts it under this id.
      store_.end_run(planned.run_id, RunStatus::interrupted, not_started_reason(summary),
                     FailureClass::not_started);
      ++summary.not_started;
      continue;
    }
    const std::string name = planned.experiment->name + "/" + planned.run->variant +
                             (planned.continues ? " (continues where it stopped)" : "");
    console_.start_run(static_cast<int>(i + 1), static_cast<int>(queue.size()), name);
    const auto start = std::chrono::steady_clock::now();
    executor_.execute(planned, summary);
    console_.end_run(seconds_since(start));
  }
}

std::string Controller::not_started_reason(const BatchSummary& summary) const {
  if (policy_.time_limit_reached && policy_.time_limit_reached->load())
    return fmt::format("not started: the batch reached its --time-limit {}", policy_.time_limit);
  if (summary.stopped_on_failure)
    return "not started: the batch stopped after a run failed (--on-failure stop)";
  return "not started: the batch was interrupted before this run's turn";
}

void Controller::plan(const Experiment& experiment, int first_ordinal, bool force,
                      std::vector<PlannedRun>& queue, BatchSummary& summary) {
  const int64_t experiment_id = record_experiment(store_, experiment);
  // Kept in step with what planning writes: two runs of one config (a sweep over a key outside
  // the hash) must not both continue the same interrupted run.
  std::map<std::string, ConfigHistory> histories = read_histories(store_, experiment);
  // sweep.order: interleaved trains the repeats in rounds (Experiment::run_order).
  const std::vector<size_t> order = experiment.run_order();
  const bool rounds = experiment.interleaved && experiment.runs.size() > 1 &&
                      std::any_of(experiment.runs.begin(), experiment.runs.end(),
                                  [](const RunSpec& run) { return run.repeat > 0; });
  for (size_t k = 0; k < order.size(); ++k) {
    const size_t i = order[k];  // the run's place in the file, by variant then repeat
    const RunSpec& run = experiment.runs[i];
    const std::string name = experiment.name + "/" + run.variant;
    const int ordinal = first_ordinal + static_cast<int>(k);
    ConfigHistory& history = histories[run.config_hash];
    PlanContext context{
        .scheduler = Scheduler::this_machine, .force = force, .multi_node = node_.multi_node()};
    RunPlan plan = plan_run(history, context);
    // Whether this machine can train it, asked only of a run that is not done: asking of a CUDA
    // run loads LibTorch's CUDA side. A run in a Slurm job of its own trains on the job's node.
    if (plan.fate != RunFate::already_completed && executor_.trains_here()) {
      context.unavailable = resolve_device(run.runtime).unavailable_reason;
      if (context.unavailable.empty() && node_.node_rank > 0 &&
          !run.strategy.capabilities.multi_process)
        context.unavailable =
            fmt::format("strategy {} trains on one device: node 0 runs it", run.strategy.name);
      plan = plan_run(history, context);
    }
    switch (plan.fate) {
      case RunFate::already_completed:
        // A controller killed between recording the run and removing its checkpoint left it.
        if (!run.train.save_state && !run_files_stem(*plan.run).empty())
          remove_checkpoint(checkpoint_dir(run_files_stem(*plan.run)));
        console_.line(fmt::format("= {}: already completed as run {}; skipped (--force reruns it)",
                                  name, plan.run->id));
        ++summary.already_completed;
        break;
      case RunFate::unavailable: {
        const int64_t id = store_.queue_run(experiment_id, queued_run(run, i));
        store_.end_run(id, RunStatus::skipped, plan.reason);
        console_.line(fmt::format("- {}: skipped: {}", name, plan.reason));
        ++summary.skipped;
        break;
      }
      case RunFate::with_slurm:
        // Slurm may requeue it at any moment: training it here too would have two processes write
        // one run's files.
        console_.line(fmt::format(
            "= {}: run {} was submitted to Slurm (job {}); `trainyard submit` continues it", name,
            plan.run->id, plan.slurm_job));
        break;
      case RunFate::continues:
        store_.requeue_run(plan.run->id);
        for (RunRecord& record : history.runs)
          if (record.id == plan.run->id) record.status = RunStatus::queued;
        // One that never started has nothing to continue: it starts, under its id.
        queue.push_back(
            {&experiment, &run, plan.run->id, !plan.run->environment.log_path.empty(), ordinal});
        break;
      case RunFate::starts:
        queue.push_back({&experiment, &run, store_.queue_run(experiment_id, queued_run(run, i)),
                         false, ordinal});
        break;
    }
    if (plan.fate != RunFate::starts && plan.fate != RunFate::continues) continue;
    if (!policy_.selection.empty())
      store_.record_attributes(queue.back().run_id, {{"selected by", policy_.selection}});
    // The round of this batch it trains in: the report compares the variants' runs of one round
    // of one batch with each other (reports/comparison.cpp), so that what drifts between rounds
    // cancels out; runs of another batch (a --force rerun, a run continued later) never pair.
    if (rounds)
      store_.record_attributes(queue.back().run_id,
                               {{"round", fmt::format("{} {}", batch_id_, run.repeat + 1)}});
  }
}

}  // namespace trainyard
