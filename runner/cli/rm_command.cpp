// `trainyard rm`: removes runs — by id, experiment, variant or status — from the database with the
// files they wrote (logs, resolved config, weights, training state). It first says what it would
// remove; only --yes removes it. The database rows go in one transaction, then the files.

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <optional>
#include <set>

#include <fmt/format.h>
#include <boost/program_options.hpp>

#include "common/files.h"
#include "common/text.h"
#include "db/store.h"
#include "runner/batch_lock.h"
#include "runner/cli/commands.h"
#include "runner/cli/options.h"
#include "runner/engine/engine.h"
#include "trainyard/error.h"

namespace trainyard {

namespace po = boost::program_options;
namespace fs = std::filesystem;

namespace {

// The files and folders run `run` wrote: <stem>.log, <stem>-rank<R>.log, <stem>.yaml, a Slurm
// task's <stem>.events.jsonl, and the weights and state it recorded.
std::vector<std::string> files_of(Store& store, const RunRecord& run) {
  std::vector<std::string> files;
  fs::path stem = run_files_stem(run);
  // A Slurm run has its stem (and its config, its records file) from the moment it is submitted.
  if (const auto task = store.slurm_run(run.id); stem.empty() && task) stem = task->stem;
  if (stem.empty()) return files;  // never started: nothing written
  std::error_code ec;
  for (const std::string suffix : {".log", ".yaml", ".events.jsonl"})
    if (fs::exists(stem.string() + suffix, ec)) files.push_back(stem.string() + suffix);
  const std::string rank_prefix = stem.filename().string() + "-rank";
  for (const auto& entry : fs::directory_iterator(stem.parent_path(), ec))
    if (entry.path().filename().string().starts_with(rank_prefix))
      files.push_back(entry.path().string());
  const auto attributes = store.attributes(run.id);
  for (const char* key : {"weights_path", "state_path"}) {
    auto it = attributes.find(key);
    if (it != attributes.end() && fs::exists(it->second, ec)) files.push_back(it->second);
  }
  // An unfinished run's checkpoint, and one being written when its process died.
  const std::string state = checkpoint_dir(stem.string());
  for (const std::string& folder : {state, checkpoint_staging_dir(state)})
    if (fs::exists(folder, ec) && std::find(files.begin(), files.end(), folder) == files.end())
      files.push_back(folder);
  return files;
}

}  // namespace

int rm_command(const std::vector<std::string>& args) {
  po::options_description options = command_options(
      "trainyard rm [--id N]... [--experiment NAME] [--variant NAME] [--status STATUS] [--yes]\n"
      "  Without --yes, prints what it would remove and removes nothing");
  std::string db_path, experiment, variant, status;
  std::vector<int64_t> ids;
  add_database_option(options, db_path);
  options.add_options()("id", po::value(&ids)->composing(), "a run id (repeatable)");
  add_experiment_option(options, experiment, "the runs of this experiment");
  options.add_options()("variant", po::value(&variant), "the runs of this variant")(
      "status", po::value(&status),
      "the runs of this status: queued, running, completed, failed, interrupted, skipped; or, as "
      "`trainyard runs` shows them, of this failure: bad-input, out-of-memory, crashed, "
      "timed-out, error, not-started")("yes", "remove them (without: only say what would go)");
  po::variables_map vm;
  if (!parse_command_line(args, options, {}, vm)) return kExitOk;
  if (ids.empty() && experiment.empty() && variant.empty() && status.empty())
    throw UserError(
        "rm: say which runs: --id N, --experiment NAME, --variant NAME or --status STATUS");
  std::optional<RunStatus> wanted_status;
  std::optional<FailureClass> wanted_failure;
  if (!status.empty()) {
    const std::string failure_name = status == "not started" ? "not-started" : status;
    try {
      wanted_status = parse_run_status(status);
    } catch (const std::exception&) {
      // parse_failure_class reads what it does not know as "error": only a round trip is a name.
      if (const FailureClass failure = parse_failure_class(failure_name);
          failure != FailureClass::none && to_string(failure) == failure_name)
        wanted_failure = failure;
      else
        throw UserError(
            fmt::format("rm: unknown status '{}'; one of: queued, running, completed, failed, "
                        "interrupted, skipped, or a failure: bad-input, out-of-memory, crashed, "
                        "timed-out, error, not-started",
                        status));
    }
  }
  if (!fs::exists(db_path))
    throw UserError(fmt::format("no database at {}; run an experiment first", db_path));
  Store store(db_path);  // first: a file that is not a database gets no lock file beside it
  // A batch recording into the database would start its queued runs and write their files: runs
  // are removed (listing them is fine) only while no batch holds its lock.
  std::optional<BatchLock> lock;
  if (vm.count("yes"))
    lock.emplace(db_path, fmt::format("runs are removed only while no batch records into the "
                                      "database: wait for it to end (`trainyard status --db {}` "
                                      "shows it), or stop it first",
                                      db_path));
  if (!experiment.empty()) store.experiment_named(experiment);  // as `runs -e` and `report -e` say

  const std::set<int64_t> id_set(ids.begin(), ids.end());
  std::vector<RunRecord> chosen;
  for (const auto& run : store.runs(experiment)) {
    if (!id_set.empty() && !id_set.count(run.id)) continue;
    if (!variant.empty() && run.variant != variant) continue;
    // A run still marked running whose controller is gone is interrupted in all but name, as
    // `trainyard status` shows it: matched and listed as such, and removable.
    const RunStatus status_now = store.is_lost(run) ? RunStatus::interrupted : run.status;
    if (wanted_status && status_now != *wanted_status) continue;
    if (wanted_failure && run.failure != *wanted_failure) continue;
    if (status_now == RunStatus::running)
      throw UserError(fmt::format("rm: run {} is running (pid {} on {}); stop it first", run.id,
                                  run.pid, run.host));
    chosen.push_back(run);
    chosen.back().status = status_now;
  }
  if (chosen.empty()) {
    fmt::print("rm: no run matches; nothing to remove\n");
    return kExitOk;
  }
  std::vector<int64_t> chosen_ids;
  std::vector<std::string> files;
  for (const auto& run : chosen) {
    fmt::print("run {}: {} / {} ({})\n", run.id, run.experiment, run.variant,
               to_string(run.status));
    for (const auto& file : files_of(store, run)) {
      fmt::print("  {}\n", file);
      files.push_back(file);
    }
    chosen_ids.push_back(run.id);
  }
  if (!vm.count("yes")) {
    fmt::print("{} and {} would be removed; run again with --yes to remove them\n",
               plural(static_cast<int64_t>(chosen.size()), "run"),
               plural(static_cast<int64_t>(files.size()), "file"));
    return kExitOk;
  }
  store.remove_runs(chosen_ids);
  int failures = 0;
  for (const auto& file : files)
    if (!remove_tree(file)) {
      fmt::print(stderr, "rm: could not remove {}\n", file);
      ++failures;
    }
  fmt::print("removed {} and {}\n", plural(static_cast<int64_t>(chosen.size()), "run"),
             plural(static_cast<int64_t>(files.size() - failures), "file"));
  return failures ? kExitFailure : kExitOk;
}

}  // namespace trainyard
