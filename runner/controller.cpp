#include "runner/controller.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <thread>

#include <unistd.h>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "common/clock.h"
#include "common/files.h"
#include "common/process.h"
#include "common/text.h"
#include "runner/batch_records.h"
#include "runner/engine/engine.h"
#include "runner/launcher.h"
#include "runner/run_plan.h"
#include "runner/run_reporter.h"
#include "runner/tracked_records.h"

namespace trainyard {

namespace fs = std::filesystem;

namespace {

// What a warm engine must share with a run to train it (LaunchSpec::engine_key): the plugin
// libraries it loads (a rebuilt one has another hash) and the device side it set up, which LibTorch
// fixes once per process (runner/engine/device.cpp). Empty for a run of a strategy that starts
// ranks, even on one device: its process group is set up per process.
std::string warm_engine_key(const RunSpec& run) {
  if (run.strategy.capabilities.multi_process) return "";
  std::string key = fmt::format("accelerator {}", option_word(run.runtime.accelerator));
  for (const PluginRef& plugin : run.plugins)
    key += fmt::format("\nplugin {} {}", plugin.path, plugin.sha256);
  return key;
}

// `runtime.loggers: [mlflow]` sends to MLFLOW_TRACKING_URI: a batch whose runs ask for it without
// an address to send to is refused before it starts, as is an address that is no server's.
void check_mlflow_address(const std::vector<Experiment>& experiments) {
  const char* uri = std::getenv("MLFLOW_TRACKING_URI");
  for (const Experiment& experiment : experiments)
    for (const RunSpec& run : experiment.runs) {
      const auto& loggers = run.runtime.loggers;
      if (std::find(loggers.begin(), loggers.end(), "mlflow") == loggers.end()) continue;
      if (!uri || !*uri)
        throw UserError(fmt::format(
            "{}: variant '{}' logs to MLflow (runtime.loggers), but MLFLOW_TRACKING_URI is not "
            "set: export MLFLOW_TRACKING_URI=http://HOST:5000 (your tracking server), or leave "
            "mlflow out of runtime.loggers",
            experiment.file, run.variant));
      mlflow_server(uri);  // UserError for an address that is no server's
      return;
    }
}

}  // namespace

bool BatchSummary::nothing_ran() const {
  return completed + already_completed + failed == 0 && skipped > 0;
}

int BatchSummary::exit_code() const {
  if (interrupted) return at_time_limit ? kExitTimeLimit : kExitInterrupted;
  if (failed > 0) return kExitFailure;
  return nothing_ran() ? kExitNothingRan : kExitOk;
}

Controller::Controller(Store& store, const Registry& registry, std::string log_dir,
                       const std::atomic<bool>& stop_requested, NodeSpec node, BatchPolicy policy)
    : store_(store),
      registry_(registry),
      log_dir_(std::move(log_dir)),
      stop_requested_(stop_requested),
      node_(std::move(node)),
      policy_(std::move(policy)),
      batch_id_(fmt::format("{}/{}", utc_now(), getpid())) {}

BatchSummary Controller::run_batch(const std::vector<Experiment>& experiments, bool force) {
  BatchSummary summary;
  for (const Experiment& experiment : experiments)
    check_experiment_name_is_free(store_, experiment);
  check_mlflow_address(experiments);
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
      if (!summary.interrupted && !run_study(experiment, study, summary))
        summary.interrupted = true;
    add_confirmations(experiment, store_);
  }

  // Decide every run's fate first, so `trainyard runs` shows the whole batch as queued.
  std::vector<Planned> queue;
  int ordinal = 0;
  for (const Experiment& experiment : batch) {
    plan(experiment, ordinal, force, queue, summary);
    ordinal += static_cast<int>(experiment.runs.size());
  }

  for (size_t i = 0; i < queue.size(); ++i) {
    const Planned& planned = queue[i];
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
    execute(planned, summary);
    console_.end_run(
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  if (mlflow_) {
    // Each run was sent as it trained; once more now, with the report, if the server answers.
    for (const std::string& unsent : mlflow_->finish(std::chrono::seconds(60)))
      console_.line(fmt::format("MLflow: not sent in full: {}", unsent));
    mlflow_.reset();
  }
  console_.finish();
  return summary;
}

MlflowSender* Controller::mlflow_sender() {
  if (!mlflow_) {
    const char* uri = std::getenv("MLFLOW_TRACKING_URI");
    if (!uri || !*uri) return nullptr;
    mlflow_ = std::make_unique<MlflowSender>(store_.path(), mlflow_server(uri));
  }
  return mlflow_.get();
}

std::string Controller::not_started_reason(const BatchSummary& summary) const {
  if (policy_.time_limit_reached && policy_.time_limit_reached->load())
    return fmt::format("not started: the batch reached its --time-limit {}", policy_.time_limit);
  if (summary.stopped_on_failure)
    return "not started: the batch stopped after a run failed (--on-failure stop)";
  return "not started: the batch was interrupted before this run's turn";
}

void Controller::plan(const Experiment& experiment, int first_ordinal, bool force,
                      std::vector<Planned>& queue, BatchSummary& summary) {
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
    // run loads LibTorch's CUDA side.
    if (plan.fate != RunFate::already_completed) {
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

void Controller::execute(const Planned& planned, BatchSummary& summary) {
  const Experiment& experiment = *planned.experiment;
  const RunSpec& run = *planned.run;
  const int64_t run_id = planned.run_id;
  const std::optional<RunRecord> record = store_.run(run_id);
  // A continued run keeps its files; a new one must not overwrite any. A run whose files were
  // named (recorded) but whose log was never opened trained nothing: it starts afresh under those
  // names, which are its own (they carry its id and uid).
  const std::string previous = record ? run_files_stem(*record) : "";
  const bool continues =
      planned.continues && !previous.empty() && fs::exists(record->environment.log_path);
  fs::path stem;
  try {
    if (!previous.empty())
      stem = previous;
    else if (record)
      stem = new_run_files_stem(log_dir_, experiment, *record, node_.node_rank);
    else
      throw std::runtime_error(fmt::format("run {} is not in {}", run_id, store_.path()));
  } catch (const std::exception& e) {
    store_.end_run(run_id, RunStatus::failed, e.what(), FailureClass::error);
    console_.line(fmt::format("run failed: {}", e.what()));
    ++summary.failed;
    return;
  }
  fs::create_directories(stem.parent_path());
  const std::string log_path = stem.string() + ".log", config_path = stem.string() + ".yaml";
  const std::string state_dir = checkpoint_dir(stem.string());
  if (continues) {
    store_.resume_run(run_id);
    ++(planned.promoted ? summary.promoted : summary.resumed);
  } else {
    // The names are recorded before any file is written: a controller killed in between leaves a
    // run whose files are known to be its own.
    store_.start_run(run_id, {.git_revision = git_revision_of(experiment.file),
                              .torch_version = torch_version(),
                              .device_name = resolve_device(run.runtime).name,
                              .log_path = log_path});
    remove_checkpoint(state_dir);  // one an earlier start could not have used: it had no log
    std::ofstream(config_path) << run.config_yaml;  // what every rank reads
  }
  RunLog log = open_run_log(run.variant, log_path, /*append=*/continues, console_sink(console_));
  if (!continues)
    log.both->info("run {} of experiment '{}', variant '{}' (config {})", run_id, experiment.name,
                   run.variant, run.config_hash);
  StoreRunRecords stored(store_, run_id);
  std::optional<TensorBoardRecords> tracked;
  const auto& loggers = run.runtime.loggers;
  if (node_.node_rank == 0 &&  // the other nodes' stores are in memory
      std::find(loggers.begin(), loggers.end(), "tensorboard") != loggers.end()) {
    const std::string root = (fs::path(log_dir_).parent_path() / "tensorboard").string();
    const std::string folder = tensorboard_folder(root, *store_.run(run_id));
    tracked.emplace(stored, store_, run_id, folder,
                    [&log](const std::string& problem) { log.both->warn("{}", problem); });
    log.both->info("TensorBoard: event files in {} (tensorboard --logdir {})",
                   fs::absolute(folder).string(), fs::absolute(root).string());
  }
  RunRecords* records_so_far = tracked ? static_cast<RunRecords*>(&*tracked) : &stored;
  std::optional<MlflowRecords> mlflow;
  if (node_.node_rank == 0 &&
      std::find(loggers.begin(), loggers.end(), "mlflow") != loggers.end()) {
    if (MlflowSender* sender = mlflow_sender())
      mlflow.emplace(*records_so_far, *sender, run_id,
                     [&log](const std::string& problem) { log.both->warn("{}", problem); });
    else
      log.both->warn(
          "runtime.loggers has mlflow, but MLFLOW_TRACKING_URI is not set: nothing goes to "
          "MLflow (`trainyard export --mlflow URI` sends the run later)");
  }
  RunRecords& records = mlflow ? static_cast<RunRecords&>(*mlflow) : *records_so_far;
  records.heartbeat(std::nullopt);
  RunReporter reporter(records, log, &console_, std::chrono::seconds(2));
  // More CPU ranks than cores still train (the tests run 4 Gloo ranks on 2 cores), but take turns:
  // said, since their times then measure the machine, not the strategy. (More CUDA devices than
  // the machine has is a skip, decided when planning.)
  if (const int cores = usable_cpus();
      resolve_device(run.runtime).type == "cpu" && run.runtime.devices > cores)
    log.both->warn(
        "{} CPU ranks on {} cores: the ranks take turns, so this run's times say more about the "
        "machine than about strategy {}",
        run.runtime.devices, cores, run.strategy.name);
  // A one-device run stays on node 0 (the other nodes skip it), whatever the batch spans.
  const NodeSpec node = run.strategy.capabilities.multi_process ? node_ : NodeSpec();
  LaunchSpec spec{.config_path = config_path,
                  .variant = run.variant,
                  .log_prefix = stem.string(),
                  .output_prefix = stem.string(),
                  .devices = static_cast<int>(run.runtime.devices),
                  .node = node,
                  .port = node.port_for_run(planned.ordinal),
                  .threads = run.runtime.threads,
                  .pause_after_epochs = planned.pause_after_epochs,
                  .engine_key = warm_engine_key(run)};
  LaunchResult result;
  for (int attempt = 0;; ++attempt) {
    // Where the run goes on from: its checkpoint, when an earlier attempt or process left one.
    const std::string position = continues || attempt > 0 ? checkpoint_position(state_dir) : "";
    spec.continue_from = position.empty() ? "" : state_dir;
    if (continues || attempt > 0)
      log.both->info("run {} continues from {}", run_id, continues_from(position));
    result =
        launch_run(spec, reporter, stop_requested_, policy_.fresh_engine ? nullptr : &warm_engine_);
    records.attributes({{"engine process", result.process}});
    if (result.outcome != LaunchOutcome::failed || !is_transient(result.failure) ||
        attempt >= policy_.retries || stop_requested_.load())
      break;
    // The whole error: a crash's ends with the last lines of the rank's log.
    log.both->warn("run failed ({}), trying again ({} of {}): {}", to_string(result.failure),
                   attempt + 1, policy_.retries, result.error);
    store_.resume_run(run_id);
    ++summary.retried;
  }
  const bool time_up = result.outcome == LaunchOutcome::interrupted && policy_.time_limit_reached &&
                       policy_.time_limit_reached->load();
  // Stopped where the study asked, not by a signal: paused at its rung, that epoch recorded.
  bool paused = false;
  if (result.outcome == LaunchOutcome::interrupted && planned.pause_after_epochs > 0 &&
      !stop_requested_.load())
    for (const EpochRow& row : store_.epoch_metrics(run_id))
      paused = paused || row.epoch == planned.pause_after_epochs;
  std::string why;
  if (time_up)
    why = fmt::format("stopped at the batch's --time-limit {}", policy_.time_limit);
  else if (paused)
    why = fmt::format(
        "{} {} by the study's successive halving; a promotion continues it from its checkpoint",
        kPausedError, planned.pause_after_epochs);
  record_outcome(result,
                 {.run_id = run_id,
                  .save_state = run.train.save_state,
                  .state_dir = state_dir,
                  .interrupted_why = why,
                  .continued_by = paused ? "" : "trainyard run"},
                 records, log);
  switch (result.outcome) {
    case LaunchOutcome::completed:
      ++summary.completed;
      break;
    case LaunchOutcome::interrupted:
      if (paused) {
        ++summary.paused;
        break;
      }
      summary.interrupted = true;
      ++summary.interrupted_runs;
      break;
    case LaunchOutcome::failed:
      ++summary.failed;
      summary.stopped_on_failure = policy_.stop_on_failure;
      break;
  }
}

}  // namespace trainyard
