// `trainyard collect` and `cancel`: the Slurm commands that build no component (runner/slurm.h,
// docs/cluster.md). `collect` takes the array tasks' records into the database (`report`, `runs`
// and `status` do it first); `cancel` marks a submission cancelled and scancels its jobs.
// `submit` and `slurm-task` are in submit_command.cpp and slurm_task_command.cpp.
#include <filesystem>
#include <set>

#include <fmt/format.h>
#include <boost/program_options.hpp>

#include "common/clock.h"
#include "common/files.h"
#include "common/process.h"
#include "common/text.h"
#include "runner/cli/commands.h"
#include "runner/cli/options.h"
#include "runner/slurm.h"
#include "trainyard/error.h"

namespace trainyard {

namespace po = boost::program_options;
namespace fs = std::filesystem;

int collect_command(const std::vector<std::string>& args) {
  po::options_description options = command_options("trainyard collect [--db PATH]");
  std::string db_path;
  add_database_option(options, db_path);
  po::variables_map vm;
  if (!parse_command_line(args, options, {}, vm)) return kExitOk;
  if (!fs::exists(db_path))
    throw UserError(fmt::format("no database at {}; submit an experiment first", db_path));
  Store store(db_path);
  const CollectSummary summary = collect_slurm(store);
  for (const std::string& problem : summary.problems) fmt::print(stderr, "collect: {}\n", problem);
  fmt::print("collect: {} from {}, {} ended{}\n", plural(summary.records, "record"),
             plural(summary.runs, "run"), summary.ended,
             summary.studies > 0
                 ? fmt::format(", {} taken in",
                               plural(summary.studies, "study's database", "studies' databases"))
                 : "");
  return kExitOk;
}

int cancel_command(const std::vector<std::string>& args) {
  po::options_description options =
      command_options("trainyard cancel [--submission N] [--db PATH]");
  std::string db_path;
  int64_t wanted = 0;
  add_database_option(options, db_path);
  options.add_options()("submission", po::value(&wanted), "the submission (default: the newest)");
  po::variables_map vm;
  if (!parse_command_line(args, options, {}, vm)) return kExitOk;
  if (!fs::exists(db_path)) throw UserError(fmt::format("no database at {}", db_path));
  Store store(db_path);
  const auto submissions = store.submissions();
  if (submissions.empty()) throw UserError(fmt::format("cancel: {} has no submissions", db_path));
  const SubmissionRecord* target = &submissions.back();
  if (wanted > 0) {
    target = nullptr;
    for (const auto& s : submissions)
      if (s.id == wanted) target = &s;
    if (!target)
      throw UserError(fmt::format("cancel: {} has no submission {} (the newest is {})", db_path,
                                  wanted, submissions.back().id));
  }
  // The marker first: a task that gets Slurm's warning signal now does not requeue itself.
  write_file_atomically(fs::path(target->folder) / "cancelled", utc_now() + "\n");
  store.mark_submission_cancelled(target->id);
  std::set<std::string> jobs;
  for (const SlurmRunRecord& task : store.slurm_runs())
    if (task.submission_id == target->id) jobs.insert(split(task.job_id, '_').front());
  for (const SlurmStudy& study : read_slurm_studies(target->folder))
    if (!study.job_id.empty()) jobs.insert(study.job_id);
  if (!target->report_job.empty()) jobs.insert(target->report_job);
  std::vector<std::string> argv = {"scancel"};
  argv.insert(argv.end(), jobs.begin(), jobs.end());
  const CommandOutput scancel = run_program(argv);
  if (scancel.exit_code != 0 && jobs.size() > 0)
    fmt::print(stderr, "cancel: scancel: {}\n", strip(scancel.err));
  fmt::print("cancel: submission {}: jobs {} cancelled; their running runs checkpoint and stop\n",
             target->id, join(std::vector<std::string>(jobs.begin(), jobs.end())));
  return kExitOk;
}

// --- the array task ------------------------------------------------------------------------------

}  // namespace trainyard
