// `trainyard slurm-task`: one run of a submission's job array. It trains its run through the
// launcher, as the controller does, with an observer that appends to the run's records file
// (db/run_events.h) instead of the store; SIGUSR1 (Slurm's warning) stops it with a checkpoint and
// requeues the job, SIGTERM stops it with a checkpoint.
#include <unistd.h>

#include <atomic>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <set>
#include <sstream>

#include <fmt/format.h>
#include <spdlog/sinks/basic_file_sink.h>
#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>
#include <boost/program_options.hpp>
#include <nlohmann/json.hpp>

#include "common/files.h"
#include "common/json_numbers.h"
#include "common/process.h"
#include "common/text.h"
#include "components/builtin.h"
#include "db/run_events.h"
#include "runner/cli/commands.h"
#include "runner/cli/options.h"
#include "runner/cli/slurm_tasks.h"
#include "runner/controller.h"
#include "runner/launcher.h"
#include "runner/slurm.h"

namespace trainyard {

namespace po = boost::program_options;
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

std::atomic<bool> g_task_stop{false};
std::atomic<bool> g_task_warned{false};

// Slurm's warning before the time limit (--signal=USR1@T): stop soon, then requeue.
extern "C" void on_task_warning(int) {
  g_task_warned.store(true);
  g_task_stop.store(true);
}
// SIGTERM: scancel, preemption, or `scontrol requeue` (Slurm requeues those itself): stop soon.
extern "C" void on_task_terminate(int) { g_task_stop.store(true); }

// Node 0's task: the run's records into its records file, its lines into its log and Slurm's
// output file.
class TaskReporter : public RunObserver {
 public:
  TaskReporter(RunEventWriter& events, std::shared_ptr<spdlog::logger> log)
      : events_(events), log_(std::move(log)) {}
  void on_log(const std::string& line) override { log_->info(line); }
  void on_setup(const std::map<std::string, std::string>& attributes) override {
    events_.attributes(attributes);
  }
  void on_epoch(int64_t epoch, const MetricValues& values) override {
    events_.epoch(epoch, values);
  }
  void on_progress(const TrainingProgress& p) override {
    log_->info(p.line);
    if (Clock::now() - last_ < std::chrono::seconds(kHeartbeatSeconds)) return;
    events_.heartbeat(run_progress_of(p));
    last_ = Clock::now();
  }
  void on_tick() override {
    if (Clock::now() - last_ < std::chrono::seconds(kHeartbeatSeconds)) return;
    events_.heartbeat(std::nullopt);
    last_ = Clock::now();
  }

 private:
  using Clock = std::chrono::steady_clock;
  RunEventWriter& events_;
  std::shared_ptr<spdlog::logger> log_;
  Clock::time_point last_ = Clock::now();
};

// The other nodes' tasks: their ranks' logs are their own; node 0 reports.
class QuietObserver : public RunObserver {
 public:
  void on_log(const std::string& line) override { fmt::print("{}\n", line); }
  void on_epoch(int64_t, const MetricValues&) override {}
};

std::string env_or(const char* name, const std::string& fallback) {
  const char* value = std::getenv(name);
  return value && *value ? value : fallback;
}

// The task's run, once its records file is open (below slurm_task_command, which reads it first).
// `position`: where its checkpoint stands ("" when it has none).
int train_task(const SlurmTask& task, const std::string& folder, const std::string& job,
               int restarts, const LaunchSpec& spec, const std::string& position,
               RunEventWriter& events);

}  // namespace

int slurm_task_command(const std::vector<std::string>& args) {
  po::options_description options(
      "trainyard slurm-task --submission DIR --task N (run by a submission's sbatch script)");
  std::string folder;
  int index = -1;
  options.add_options()("help,h", "show this help")("submission", po::value(&folder),
                                                    "the submission's folder")(
      "task", po::value(&index), "the task's index in tasks.json");
  po::variables_map vm;
  if (!parse_command_line(args, options, {}, vm)) return kExitOk;
  std::signal(SIGUSR1, on_task_warning);
  std::signal(SIGTERM, on_task_terminate);
  std::signal(SIGINT, on_task_terminate);

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
  LaunchSpec spec{.config_path = task.stem + ".yaml",
                  .variant = task.variant,
                  .log_prefix = task.stem,
                  .output_prefix = task.stem,
                  .devices = task.shape.ranks_per_node,
                  .node = node,
                  .port = node.multi_node() ? node.master_port : 0,
                  .continue_from = position.empty() ? "" : state_dir};
  if (node.node_rank > 0) {
    // Stopped by a signal is no failure here: a non-zero exit would make srun's
    // --kill-on-bad-exit kill node 0's task before it records what happened.
    QuietObserver quiet;
    return launch_run(spec, quiet, g_task_stop).outcome == LaunchOutcome::failed ? kExitFailure
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
  auto file = std::make_shared<spdlog::sinks::basic_file_sink_mt>(task.stem + ".log",
                                                                  /*truncate=*/false);
  auto out = std::make_shared<spdlog::sinks::stdout_sink_mt>();
  file->set_pattern("[%Y-%m-%d %H:%M:%S.%e] %v");
  out->set_pattern("[%H:%M:%S] %v");
  auto log = std::make_shared<spdlog::logger>("task", spdlog::sinks_init_list{file, out});
  log->flush_on(spdlog::level::info);
  if (started_before) {
    events.resumed(job);
    log->info(
        "run {} continues as Slurm job {} (restart {}) from {}", task.run_id, job, restarts,
        position.empty() ? "the start (it left no checkpoint)" : "its checkpoint at " + position);
  } else {
    std::ifstream config(task.stem + ".yaml");
    std::stringstream text;
    text << config.rdbuf();
    const RunSpec run = parse_resolved_run(text.str(), task.variant, builtin_registry());
    events.started({.git_revision = git_revision_of(task.stem + ".yaml"),
                    .torch_version = torch_version(),
                    .device_name = resolve_device(run.runtime).name,
                    .log_path = task.stem + ".log"},
                   job);
    log->info("run {} of experiment '{}', variant '{}' as Slurm job {} on {}", task.run_id,
              task.experiment, task.variant, job, host_name());
  }
  TaskReporter reporter(events, log);
  const LaunchResult result = launch_run(spec, reporter, g_task_stop);
  switch (result.outcome) {
    case LaunchOutcome::completed:
      events.completed(result.metrics);
      if (!task.save_state) remove_checkpoint(state_dir);
      log->info("run {} completed", task.run_id);
      return kExitOk;
    case LaunchOutcome::failed:
      log->error("run failed ({}): {}", to_string(result.failure), result.error);
      events.ended(RunStatus::failed, result.error, result.failure);
      if (!is_transient(result.failure)) remove_checkpoint(state_dir);
      return kExitFailure;
    case LaunchOutcome::interrupted:
      break;
  }
  // Stopped by a signal. After the warning before the time limit the task goes back in the queue
  // (once the checkpoint is written); after SIGTERM it does not: that is scancel, or preemption
  // and `scontrol requeue`, after which Slurm starts the job again itself.
  const bool cancelled = fs::exists(fs::path(folder) / "cancelled");
  std::string why = "stopped by SIGTERM (scancel, preemption or a requeue)";
  if (g_task_warned.load()) {
    if (cancelled)
      why = "its submission was cancelled";
    else if (restarts >= task.max_requeues)
      why = fmt::format(
          "Slurm's time-limit warning came after {} already; no more requeues (--max-requeues)",
          plural(restarts, "requeue"));
    else {
      events.requeued(restarts + 1);
      log->info("run {} checkpointed; requeueing Slurm job {}", task.run_id, job);
      const CommandOutput requeue =
          run_program({"scontrol", "requeue", env_or("SLURM_JOB_ID", job)});
      if (requeue.exit_code == 0) return kExitOk;
      why = "Slurm refused to requeue it (" + strip(requeue.err) + ")";
    }
  }
  log->warn("run {} interrupted: {}; `trainyard submit` again continues it from its checkpoint",
            task.run_id, why);
  events.ended(RunStatus::interrupted, why, FailureClass::interrupted);
  return kExitInterrupted;
}

}  // namespace

}  // namespace trainyard
