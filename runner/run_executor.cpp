// One run of the batch (runner/run_executor.h), in phases: start (its files and its record), its
// log and trackers, launch (with retries), finish_run (how it ended).
#include "runner/run_executor.h"

#include <chrono>
#include <cstdlib>
#include <fstream>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "common/process.h"
#include "common/text.h"
#include "runner/batch_records.h"
#include "runner/engine/engine.h"
#include "runner/run_plan.h"
#include "runner/slurm.h"

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

}  // namespace

bool BatchSummary::nothing_ran() const {
  return completed + already_completed + failed == 0 && skipped > 0;
}

void BatchSummary::add(const BatchSummary& other) {
  completed += other.completed;
  resumed += other.resumed;
  already_completed += other.already_completed;
  skipped += other.skipped;
  failed += other.failed;
  retried += other.retried;
  not_started += other.not_started;
  interrupted_runs += other.interrupted_runs;
  paused += other.paused;
  promoted += other.promoted;
  interrupted = interrupted || other.interrupted;
  at_time_limit = at_time_limit || other.at_time_limit;
  stopped_on_failure = stopped_on_failure || other.stopped_on_failure;
}

int BatchSummary::exit_code() const {
  if (interrupted) return at_time_limit ? kExitTimeLimit : kExitInterrupted;
  if (failed > 0) return kExitFailure;
  return nothing_ran() ? kExitNothingRan : kExitOk;
}

RunExecutor::RunExecutor(Store& store, std::string log_dir, const std::atomic<bool>& stop_requested,
                         NodeSpec node, BatchPolicy policy, BatchConsole& console)
    : store_(store),
      log_dir_(std::move(log_dir)),
      stop_requested_(stop_requested),
      node_(std::move(node)),
      policy_(std::move(policy)),
      console_(console),
      trackers_(store, log_dir_) {}

std::unique_ptr<RunExecutor> RunExecutor::slot(Store& store, int index, int sharing) const {
  auto slot =
      std::make_unique<RunExecutor>(store, log_dir_, stop_requested_, node_, policy_, console_);
  slot->slot_ = index;
  slot->sharing_ = sharing;
  return slot;
}

void RunExecutor::execute(const PlannedRun& planned, BatchSummary& summary) {
  const std::optional<RunFiles> files = start(planned, summary);
  if (!files) return;
  const RunSpec& run = *planned.run;
  const int64_t run_id = planned.run_id;
  RunLog log = open_run_log(run.variant, files->log_path, /*append=*/files->continues,
                            console_sink(console_));
  if (!files->continues)
    log.both->info("run {} of experiment '{}', variant '{}' (config {})", run_id,
                   planned.experiment->name, run.variant, run.config_hash);
  // What the run records goes to the store and, through it, to the trackers runtime.loggers names
  // (only node 0's: the other nodes' stores are in memory).
  StoreRunRecords stored(store_, run_id);
  const std::unique_ptr<RunTrackers> trackers = trackers_.open(
      node_.node_rank == 0 ? run.runtime.loggers : std::vector<std::string>(), stored, run_id,
      [&log](const std::string& line) { log.both->info("{}", line); },
      [&log](const std::string& problem) { log.both->warn("{}", problem); });
  RunRecords& records = trackers->records();
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
  const LaunchResult result = launch(planned, *files, reporter, records, log, summary);
  finish_run(planned, *files, result, records, log, summary);
}

std::optional<RunExecutor::RunFiles> RunExecutor::start(const PlannedRun& planned,
                                                        BatchSummary& summary) {
  const RunSpec& run = *planned.run;
  const int64_t run_id = planned.run_id;
  const std::optional<RunRecord> record = store_.run(run_id);
  // A continued run keeps its files; a new one must not overwrite any. A run whose files were
  // named (recorded) but whose log was never opened trained nothing: it starts afresh under those
  // names, which are its own (they carry its id and uid).
  const std::string previous = record ? run_files_stem(*record) : "";
  RunFiles files;
  files.continues =
      planned.continues && !previous.empty() && fs::exists(record->environment.log_path);
  try {
    if (!previous.empty())
      files.stem = previous;
    else if (record)
      files.stem = new_run_files_stem(log_dir_, *planned.experiment, *record, node_.node_rank);
    else
      throw std::runtime_error(fmt::format("run {} is not in {}", run_id, store_.path()));
  } catch (const std::exception& e) {
    store_.end_run(run_id, RunStatus::failed, e.what(), FailureClass::error);
    console_.line(fmt::format("run failed: {}", e.what()));
    ++summary.failed;
    return std::nullopt;
  }
  fs::create_directories(files.stem.parent_path());
  files.log_path = files.stem.string() + ".log";
  files.config_path = files.stem.string() + ".yaml";
  files.state_dir = checkpoint_dir(files.stem.string());
  if (files.continues) {
    store_.resume_run(run_id);
    ++(planned.promoted ? summary.promoted : summary.resumed);
    return files;
  }
  // The names are recorded before any file is written: a controller killed in between leaves a
  // run whose files are known to be its own.
  store_.start_run(run_id, {.git_revision = git_revision_of(planned.experiment->file),
                            .torch_version = torch_version(),
                            .device_name = resolve_device(run.runtime).name,
                            .log_path = files.log_path});
  remove_checkpoint(files.state_dir);  // one an earlier start could not have used: it had no log
  std::ofstream(files.config_path) << run.config_yaml;  // what every rank reads
  return files;
}

LaunchResult RunExecutor::launch(const PlannedRun& planned, const RunFiles& files,
                                 RunReporter& reporter, RunRecords& records, RunLog& log,
                                 BatchSummary& summary) {
  const RunSpec& run = *planned.run;
  // A one-device run stays on node 0 (the other nodes skip it), whatever the batch spans.
  const NodeSpec node = run.strategy.capabilities.multi_process ? node_ : NodeSpec();
  LaunchSpec spec{.config_path = files.config_path,
                  .variant = run.variant,
                  .log_prefix = files.stem.string(),
                  .output_prefix = files.stem.string(),
                  .devices = static_cast<int>(run.runtime.devices),
                  .node = node,
                  .port = node.port_for_run(planned.ordinal),
                  .threads = run.runtime.threads,
                  .pause_after_epochs = planned.pause_after_epochs,
                  .sharing = sharing_,
                  .engine_key = warm_engine_key(run)};
  // A slot's CUDA run: the slot's own GPU (the study checked there is one for every slot).
  if (slot_ >= 0 && trains_here()) {
    if (const DeviceInfo device = resolve_device(run.runtime); device.type == "cuda") {
      spec.cuda_device =
          slot_cuda_device(slot_, std::getenv("CUDA_VISIBLE_DEVICES"), device.cuda_devices);
      log.both->info("run {} trains on GPU {} (slot {} of {} side by side)", planned.run_id,
                     spec.cuda_device, slot_ + 1, sharing_);
    }
  }
  if (policy_.slurm_jobs && !use_slurm_job(planned, files, spec, log)) {
    // A transient failure: a later attempt (--retries) or the study's next job trains it.
    LaunchResult result;
    result.failure = FailureClass::crashed;
    result.error = fmt::format(
        "an earlier Slurm job of this run (named {}) was still listed {} s after scancel, or "
        "squeue did not answer; it could have trained beside this one, in the same files. Check "
        "`squeue --me`; the study's next job trains the run once it has gone",
        spec.slurm_job->job_name, kSlurmJobPatienceSeconds);
    return result;
  }
  for (int attempt = 0;; ++attempt) {
    // Where the run goes on from: its checkpoint, when an earlier attempt or process left one.
    const bool again = files.continues || attempt > 0;
    const std::string position = again ? checkpoint_position(files.state_dir) : "";
    spec.continue_from = position.empty() ? "" : files.state_dir;
    if (again) log.both->info("run {} continues from {}", planned.run_id, continues_from(position));
    LaunchResult result =
        launch_run(spec, reporter, stop_requested_,
                   policy_.fresh_engine || spec.slurm_job ? nullptr : &warm_engine_);
    records.attributes({{"engine process", result.process}});
    if (result.outcome != LaunchOutcome::failed || !is_transient(result.failure) ||
        attempt >= policy_.retries || stop_requested_.load())
      return result;
    // The whole error: a crash's ends with the last lines of the rank's log.
    log.both->warn("run failed ({}), trying again ({} of {}): {}", to_string(result.failure),
                   attempt + 1, policy_.retries, result.error);
    store_.resume_run(planned.run_id);
    ++summary.retried;
  }
}

bool RunExecutor::use_slurm_job(const PlannedRun& planned, const RunFiles& files, LaunchSpec& spec,
                                RunLog& log) {
  // A job name of the run's own (its files carry its id and uid): what finds an earlier job of it.
  const std::string name = "trainyard-" + files.stem.filename().string();
  spec.slurm_job = *policy_.slurm_jobs;
  spec.slurm_job->job_name = name;
  spec.sharing = 1;  // the job's CPUs are its own
  // A stop reaches the rank through srun (SIGUSR2: launcher.h), then its checkpoint is written.
  spec.grace_seconds = 60;
  const CancelledJobs earlier = cancel_jobs_named(name, kSlurmJobPatienceSeconds);
  if (!earlier.ids.empty())
    log.both->info(
        "run {}: cancelled its earlier Slurm job {} first (left by a study's job that "
        "ended without it)",
        planned.run_id, join(earlier.ids, ", "));
  log.both->info("run {} trains in a Slurm job of its own, {} (srun)", planned.run_id, name);
  return earlier.gone;
}

void RunExecutor::finish_run(const PlannedRun& planned, const RunFiles& files,
                             const LaunchResult& result, RunRecords& records, RunLog& log,
                             BatchSummary& summary) {
  const int64_t run_id = planned.run_id;
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
        "{} {} by the study's schedule (sweep.search.schedule); a promotion continues it from its "
        "checkpoint",
        kPausedError, planned.pause_after_epochs);
  record_outcome(result,
                 {.run_id = run_id,
                  .save_state = planned.run->train.save_state,
                  .state_dir = files.state_dir,
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

void RunExecutor::finish() {
  for (const std::string& unsent : trackers_.finish()) console_.line(unsent);
}

}  // namespace trainyard
