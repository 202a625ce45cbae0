// `trainyard status`: what a batch is doing now, read from the database from another terminal (or
// another machine sharing the file). The controller records a heartbeat and each run's progress; a
// run still marked running whose heartbeat went stale lost its controller without a word (SIGKILL,
// power lost, a machine gone) and shows as interrupted (at once when that controller was of this
// host and its process is gone) — `trainyard run` again continues it. Runs submitted to Slurm
// show their job's state (one squeue call for all, and one sacct call when accounting is on),
// after their records are collected.
#include <filesystem>

#include <fmt/format.h>
#include <boost/program_options.hpp>

#include "common/clock.h"
#include "common/text.h"
#include "db/store.h"
#include "runner/cli/commands.h"
#include "runner/cli/options.h"
#include "runner/slurm.h"
#include "trainyard/error.h"

namespace trainyard {

namespace po = boost::program_options;
namespace fs = std::filesystem;

namespace {

std::string describe_progress(const RunRecord& run) {
  const RunProgress p = RunProgress::from_json(run.progress);
  std::string text;
  if (p.total_steps > 0)
    text +=
        fmt::format(", epoch {}/{}, step {}/{}, loss {:.4f}, {}, ETA {}", p.epoch, p.epochs, p.step,
                    p.total_steps, p.loss, format_rate(p.samples_per_s, p.tokens_per_sample),
                    format_duration(p.eta_seconds));
  if (p.micro_batch > 0)
    text += fmt::format(
        ", micro-batch {}{}", p.micro_batch,
        p.oom_events > 0 ? fmt::format(" (after {} out of memory)", plural(p.oom_events, "halving"))
                         : "");
  if (run.resumes > 0) text += fmt::format(" (continued {})", plural(run.resumes, "time"));
  return text;
}

// A Slurm run: its job's state as Slurm says it, joined with the run's own progress.
std::string describe_slurm(const RunRecord& run, const SlurmRunRecord& task,
                           const CollectSummary& collected) {
  const std::optional<SlurmStates>& states = collected.states;
  std::string text = "Slurm job " + (task.job_id.empty() ? "(being submitted)" : task.job_id);
  if (collected.slurm_unreachable) {
    text += ": Slurm cannot be asked from here (squeue failed)";
  } else if (!states) {
    // Not asked: the run came back to running while its records were taken in.
  } else if (auto it = states->jobs.find(task.job_id); it != states->jobs.end()) {
    text += ": ";
    text += it->second.state;
    if (!it->second.reason.empty() && it->second.reason != "None")
      text += " (" + it->second.reason + ")";
  } else {
    text += ": no longer listed";
  }
  if (run.status == RunStatus::running) text += describe_progress(run);
  if (const double quiet = seconds_since(run.heartbeat_at);
      run.status == RunStatus::running && quiet >= 0)
    text += fmt::format("; heartbeat {} ago", format_duration(quiet));
  return text;
}

std::string describe_running(const RunRecord& run) {
  const double quiet = seconds_since(run.heartbeat_at);
  if (controller_gone(run))
    return "interrupted: its controller (pid " + std::to_string(run.pid) +
           ") is gone; `trainyard run` again continues it";
  if (quiet > kStaleHeartbeatSeconds)
    return fmt::format(
        "interrupted: no heartbeat for {} (its controller died without a word); `trainyard run` "
        "again continues it",
        format_duration(quiet));
  std::string text = "running" + describe_progress(run);
  if (quiet >= 0) text += fmt::format("; heartbeat {} ago", format_duration(quiet));
  return text;
}

}  // namespace

int status_command(const std::vector<std::string>& args) {
  po::options_description options = command_options("trainyard status [--db PATH]");
  std::string db_path;
  add_database_option(options, db_path);
  po::variables_map vm;
  if (!parse_command_line(args, options, {}, vm)) return kExitOk;
  const StoreToRead open = open_store_to_read(db_path);
  Store& store = *open.store;
  const CollectSummary& collected = open.collected;
  std::map<int64_t, SlurmRunRecord> slurm;
  for (SlurmRunRecord& task : store.slurm_runs()) slurm[task.run_id] = std::move(task);
  std::map<std::string, int> counts;
  std::vector<RunRecord> active, waiting, submitted;
  for (const RunRecord& run : store.runs()) {
    std::string label = to_string(run.status);
    if (run.status == RunStatus::failed && run.failure != FailureClass::none)
      label += fmt::format(" ({})", to_string(run.failure));
    if (run.failure == FailureClass::not_started) label = "not started";
    // Counted as its line below describes it.
    if (store.is_lost(run)) label = to_string(RunStatus::interrupted);
    // A study's trial paused at a rung (successive halving) waits for a promotion, not a rerun.
    if (is_paused(run)) label = "paused";
    const bool unfinished = run.status == RunStatus::running || run.status == RunStatus::queued;
    if (unfinished && slurm.count(run.id))
      submitted.push_back(run);
    else if (run.status == RunStatus::running)
      active.push_back(run);
    else if (run.status == RunStatus::queued)
      waiting.push_back(run);
    ++counts[label];
  }
  std::vector<std::string> parts;
  for (const auto& [label, count] : counts) parts.push_back(fmt::format("{} {}", count, label));
  fmt::print("{}: {}\n", db_path, parts.empty() ? "no runs" : join(parts, ", "));
  for (const std::string& problem : collected.problems) fmt::print("  collect: {}\n", problem);
  for (const RunRecord& run : active)
    fmt::print("  run {} {}/{}: {}\n", run.id, run.experiment, run.variant, describe_running(run));
  // One query for all of them: collect asked Slurm when any was unfinished.
  for (const RunRecord& run : submitted)
    fmt::print("  run {} {}/{}: {}; {}\n", run.id, run.experiment, run.variant,
               to_string(run.status), describe_slurm(run, slurm.at(run.id), collected));
  if (!waiting.empty()) {
    fmt::print("  queued next:");
    for (size_t i = 0; i < waiting.size() && i < 5; ++i)
      fmt::print(" {}/{}", waiting[i].experiment, waiting[i].variant);
    if (waiting.size() > 5) fmt::print(" and {} more", waiting.size() - 5);
    fmt::print("\n");
  }
  if (active.empty() && waiting.empty() && submitted.empty()) fmt::print("  nothing is running\n");
  // Studies still searching (sweep.search): how far they are.
  // (One an edited file left, which nothing will continue, is not shown.)
  for (const StudyProgress& study : store.study_progress()) {
    if (study.best || study.training == 0) continue;
    fmt::print("  study {}/{}: {} recorded, {} taken{}\n", study.key.experiment, study.key.study,
               plural(study.trials, "trial"), plural(study.decisions, "decision"),
               study.last_promoted.empty() || study.last_promoted == "[]"
                   ? ""
                   : "; the last sent on " + study.last_promoted);
  }
  return kExitOk;
}

}  // namespace trainyard
