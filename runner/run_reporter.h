// How a training run is reported while it trains and recorded when it ends: the same for
// `trainyard run` (runner/controller.cpp, into the store and the batch console) and a Slurm task
// (runner/cli/slurm_task_command.cpp, into its records file and Slurm's output file). Each path
// passes its own RunRecords (db/run_records.h) and screen; the rules are here once.
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include <spdlog/logger.h>

#include "db/run_records.h"
#include "runner/console.h"
#include "runner/engine/engine.h"
#include "runner/launcher.h"

namespace trainyard {

// A run's two loggers over its log file (appended to when the run continues): `file` writes only
// the file; `both` also writes `screen` (the batch console, or stdout in a Slurm task).
struct RunLog {
  std::shared_ptr<spdlog::logger> file, both;
};
RunLog open_run_log(const std::string& name, const std::string& path, bool append,
                    spdlog::sink_ptr screen);
// A sink that prints lines above the batch console's status line.
spdlog::sink_ptr console_sink(BatchConsole& console);

// A run's observer: its setup and epochs into `records` as they arrive (so a run that dies later
// keeps its history), its lines into its log, its progress onto the console when there is one (else
// into the log as lines) and into `records` at most every `progress_every`; without progress
// (evaluating, a long first step) a heartbeat every kHeartbeatSeconds still says it is alive.
class RunReporter : public RunObserver {
 public:
  RunReporter(RunRecords& records, RunLog log, BatchConsole* console,
              std::chrono::seconds progress_every);
  void on_log(const std::string& line) override;
  void on_setup(const std::map<std::string, std::string>& attributes) override;
  void on_epoch(int64_t epoch, const MetricValues& values) override;
  void on_step(int64_t step, const MetricValues& values) override;
  void on_progress(const TrainingProgress& progress) override;
  void on_tick() override;

 private:
  using Clock = std::chrono::steady_clock;
  RunRecords& records_;
  RunLog log_;
  BatchConsole* console_;
  std::chrono::seconds progress_every_;
  Clock::time_point last_heartbeat_ = Clock::now();
};

// "the start (it left no checkpoint)" or "its checkpoint at epoch 2, batch 0, optimizer step 40":
// where a continued run goes on from, given its checkpoint's position ("" when it has none).
std::string continues_from(const std::string& position);

// How a run ends, for record_outcome.
struct RunEnding {
  int64_t run_id = 0;
  bool save_state = false;  // train.save_state: the checkpoint outlives the run
  std::string state_dir{};  // the run's checkpoint folder
  // Interrupted: why (the launcher's word when empty), and the command that continues it (none: a
  // study's paused trial, which only a promotion continues).
  std::string interrupted_why{};
  std::string continued_by{};
  // A completed run's end on the screen too: a Slurm task's output file says it (the batch
  // console shows it already).
  bool completed_on_screen = false;
};

// Whether a run's checkpoint is kept when it ends: to continue from (interrupted, or failed in a
// transient way: a crash, a timeout), or, once completed, because train.save_state keeps it (to
// resume from or evaluate). Otherwise — a completed run's without save_state, and a failure that
// nothing will continue, save_state or not — it has served its purpose and would only take disk.
bool keeps_checkpoint(const LaunchResult& result, bool save_state);

// Records how the run ended (completed, failed or interrupted) into `records`, says so in its log
// (a failure or an interruption on the screen too), and removes its checkpoint unless
// keeps_checkpoint.
void record_outcome(const LaunchResult& result, const RunEnding& ending, RunRecords& records,
                    const RunLog& log);

}  // namespace trainyard
