// `trainyard slurm-task`: one run of a submission's job array. It trains its run through the
// launcher, as the controller does, with an observer that appends to the run's records file
// (db/run_events.h) instead of the store; Slurm's signals as slurm_job.h takes them.
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <fmt/format.h>
#include <spdlog/sinks/stdout_sinks.h>
#include <yaml-cpp/yaml.h>
#include <boost/program_options.hpp>
#include <nlohmann/json.hpp>

#include "common/process.h"
#include "common/text.h"
#include "components/builtin.h"
#include "db/run_events.h"
#include "runner/batch_records.h"
#include "runner/cli/commands.h"
#include "runner/cli/options.h"
#include "runner/cli/slurm_job.h"
#include "runner/cli/slurm_tasks.h"
#include "runner/launcher.h"
#include "runner/run_reporter.h"
#include "runner/slurm.h"

namespace trainyard {

namespace po = boost::program_options;
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// The other nodes' tasks: their ranks' logs are their own; node 0 reports.
class QuietObserver : public RunObserver {
 public:
  void on_log(const std::string& line) override { fmt::print("{}\n", line); }
  void on_epoch(int64_t, const MetricValues&) override {}
};

// The task's run, once its records file is open (below slurm_task_command, which reads it first).
// `position`: where its checkpoint stands ("" when it has none).
int train_task(const SlurmTask& task, const std::string& folder, const std::string& job,
               int restarts, const LaunchSpec& spec, const std::string& position,
               RunEventWriter& events);

}  // namespace

int slurm_task_command(const std::vector<std::string>& args) {
  po::options_description options = command_options(
      "trainyard slurm-task --submission DIR --task N (run by a submission's sbatch script)");
  std::string folder;
  int index = -1;
  options.add_options()("submission", po::value(&folder), "the submission's folder")(
      "task", po::value(&index), "the task's index in tasks.json");
  po::variables_map vm;
  if (!parse_command_line(args, options, {}, vm)) return kExitOk;
  take_slurm_signals();

  const fs::path list_path = fs::path(folder) / "tasks.json";
  std::ifstream list_file(list_path);
  if (!list_file)
    throw UserError(fmt::format(
        "slurm-task: cannot read {} on {}; the submission's folder must be on a file system "
        "every node sees",
        list_path.string(), host_name()));
  const json list = json::parse(list_file, nullptr, /*allow_exceptions=*/false);
  if (!list.is_array() || index < 0 || index >= static_cast<int>(list.size()))
    throw UserError(fmt::format("slurm-task: {} has no task {}", list_path.string(), index));
  SlurmTask task;
  try {
    task = SlurmTask::from_json(list[index]);
  } catch (const json::exception& e) {
    throw UserError(fmt::format("slurm-task: task {} of {} is not one `trainyard submit` wrote: {}",
                                index, list_path.string(), e.what()));
  }
  const std::string job =
      std::getenv("SLURM_ARRAY_JOB_ID")
          ? env_or("SLURM_ARRAY_JOB_ID", "") + "_" + env_or("SLURM_ARRAY_TASK_ID", "")
          : env_or("SLURM_JOB_ID", "?");
  const int restarts = std::atoi(env_or("SLURM_RESTART_COUNT", "0").c_str());
  NodeSpec node;
  if (task.multi_process)
    if (auto slurm = node_spec_from_slurm([](const char* name) { return std::getenv(name); }))
      node = *slurm;

  const std::string state_dir = checkpoint_dir(task.stem);
  const std::string position = checkpoint_position(state_dir);
  // The run's runtime.threads: `idle` is measured by the launcher once for every rank, as under
  // `trainyard run`.
  ThreadCount threads;
  try {
    std::string expected;
    if (const YAML::Node written = YAML::LoadFile(task.stem + ".yaml")["runtime"]["threads"])
      decode_value(written, threads, expected);
  } catch (const YAML::Exception&) {
    // The worker reads the same file and says what is wrong with it.
  }
  LaunchSpec spec{.config_path = task.stem + ".yaml",
                  .variant = task.variant,
                  .log_prefix = task.stem,
                  .output_prefix = task.stem,
                  .devices = task.shape.ranks_per_node,
                  .node = node,
                  .port = node.multi_node() ? node.master_port : 0,
                  .threads = threads,
                  .continue_from = position.empty() ? "" : state_dir};
  if (node.node_rank > 0) {
    // Stopped by a signal is no failure here: a non-zero exit would make srun's
    // --kill-on-bad-exit kill node 0's task before it records what happened.
    QuietObserver quiet;
    return launch_run(spec, quiet, slurm_stop()).outcome == LaunchOutcome::failed ? kExitFailure
                                                                                  : kExitOk;
  }

  RunEventWriter events(task.stem + ".events.jsonl");
  // Whatever goes wrong from here is recorded, so the database says why (not "ended without a
  // word"); main() then prints it too.
  try {
    return train_task(task, folder, job, restarts, spec, position, events);
  } catch (...) {
    const Failure failure = failure_of(std::current_exception());
    events.ended(
        RunStatus::failed, "slurm-task: " + failure.message,
        failure.exit_code == kExitUserError ? FailureClass::bad_input : FailureClass::error);
    throw;
  }
}

namespace {

int train_task(const SlurmTask& task, const std::string& folder, const std::string& job,
               int restarts, const LaunchSpec& spec, const std::string& position,
               RunEventWriter& events) {
  const std::string state_dir = checkpoint_dir(task.stem);
  const bool started_before = fs::exists(task.stem + ".log");
  RunLog log = open_run_log("task", task.stem + ".log", /*append=*/true,
                            std::make_shared<spdlog::sinks::stdout_sink_mt>());
  if (started_before) {
    events.resumed(job);
    log.both->info("run {} continues as Slurm job {} (restart {}) from {}", task.run_id, job,
                   restarts, continues_from(position));
  } else {
    std::ifstream config(task.stem + ".yaml");
    std::stringstream text;
    text << config.rdbuf();
    const RunSpec run = parse_resolved_run(text.str(), task.variant, plugin_loader());
    events.started({.git_revision = git_revision_of(task.stem + ".yaml"),
                    .torch_version = torch_version(),
                    .device_name = resolve_device(run.runtime).name,
                    .log_path = task.stem + ".log"},
                   job);
    log.both->info("run {} of experiment '{}', variant '{}' as Slurm job {} on {}", task.run_id,
                   task.experiment, task.variant, job, host_name());
  }
  // The records file takes a line per write, fsync'd: progress no more often than the heartbeat.
  RunReporter reporter(events, log, /*console=*/nullptr, std::chrono::seconds(kHeartbeatSeconds));
  const LaunchResult result = launch_run(spec, reporter, slurm_stop());
  RunEnding ending{.run_id = task.run_id,
                   .save_state = task.save_state,
                   .state_dir = state_dir,
                   .interrupted_why = "stopped by SIGTERM (scancel, preemption or a requeue)",
                   .continued_by = "trainyard submit",
                   .completed_on_screen = true};
  // Stopped by a signal. After the warning before the time limit the task goes back in the queue
  // (once the checkpoint is written); after SIGTERM it does not: that is scancel, or preemption
  // and `scontrol requeue`, after which Slurm starts the job again itself.
  if (result.outcome == LaunchOutcome::interrupted && slurm_warned()) {
    ending.interrupted_why = requeue_after_warning(
        folder, env_or("SLURM_JOB_ID", job), restarts, task.max_requeues, [&] {
          events.requeued(restarts + 1);
          log.both->info("run {} checkpointed; requeueing Slurm job {}", task.run_id, job);
        });
    if (ending.interrupted_why.empty()) return kExitOk;
  }
  record_outcome(result, ending, events, log);
  switch (result.outcome) {
    case LaunchOutcome::completed:
      return kExitOk;
    case LaunchOutcome::failed:
      return kExitFailure;
    case LaunchOutcome::interrupted:
      break;
  }
  return kExitInterrupted;
}

}  // namespace

}  // namespace trainyard
