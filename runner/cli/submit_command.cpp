// `trainyard submit --slurm`: validates, plans like the controller, records the runs as queued,
// writes tasks.json and one sbatch script per array (runner/slurm.h), submits them and a report
// job, and exits: nothing stays on the login node (docs/cluster.md).
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
#include "runner/batch_lock.h"
#include "runner/cli/commands.h"
#include "runner/cli/options.h"
#include "runner/cli/slurm_tasks.h"
#include "runner/controller.h"
#include "runner/slurm.h"

namespace trainyard {

namespace po = boost::program_options;
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// What a run asks of a node: its ranks (runtime.devices), GPUs or CPUs, and nodes when its strategy
// spans processes. `accelerator: auto` means GPUs when the submission names --gpus-per-node.
TaskShape shape_of(const RunSpec& run, const SlurmOptions& options) {
  TaskShape shape;
  shape.ranks_per_node = static_cast<int>(run.runtime.devices);
  shape.cuda = run.runtime.accelerator == "cuda" ||
               (run.runtime.accelerator == "auto" && options.gpus_per_node > 0);
  shape.nodes = run.strategy.capabilities.multi_process ? options.nodes : 1;
  if (shape.cuda && options.gpus_per_node > 0 && shape.ranks_per_node > options.gpus_per_node)
    throw UserError(fmt::format(
        "submit: {} asks for runtime.devices {} GPUs on a node, more than --gpus-per-node {}; "
        "lower runtime.devices (and train on --nodes N)",
        run.variant, shape.ranks_per_node, options.gpus_per_node));
  return shape;
}

std::string job_of(const CommandOutput& sbatch) {
  // --parsable: "1234" or "1234;cluster".
  return strip(split(strip(sbatch.out), ';').front());
}

// The runs the store holds of an experiment, by config hash, newest first: read once per
// experiment, not once per run.
std::map<std::string, std::vector<RunRecord>> runs_by_config(Store& store,
                                                             const std::string& experiment) {
  std::map<std::string, std::vector<RunRecord>> out;
  for (RunRecord& run : store.runs(experiment)) {
    auto& of_config = out[run.config_hash];
    of_config.insert(of_config.begin(), std::move(run));
  }
  return out;
}

}  // namespace

int submit_command(const std::vector<std::string>& args) {
  po::options_description options(
      "trainyard submit FILE... --slurm [options]\n  submits the batch's runs to Slurm as job "
      "arrays (one per resource shape) and a report job after them, then exits");
  std::vector<std::string> files, overrides;
  std::string db_path = default_database_path();
  SlurmOptions slurm;
  int64_t max_runs = kDefaultMaxRuns;
  options.add_options()("help,h", "show this help")(
      "max-runs", po::value(&max_runs), "refuse a batch of more runs than this (default 5000)")(
      "slurm", "submit to Slurm (the one scheduler trainyard submits to)")(
      "set", po::value(&overrides)->composing(), "override a key: --set train.epochs=1")(
      "db", po::value(&db_path),
      "database file on this host (default: $TRAINYARD_DB or runs/trainyard.db); the runs' files "
      "go beside it, on a file system every node sees")("partition", po::value(&slurm.partition),
                                                        "Slurm partition")(
      "time", po::value(&slurm.time), "time limit of each task, as sbatch takes it (4:00:00)")(
      "account", po::value(&slurm.account), "Slurm account")(
      "max-parallel", po::value(&slurm.max_parallel),
      "at most N tasks of an array at once (the %N throttle)")(
      "gpus-per-node", po::value(&slurm.gpus_per_node),
      "GPUs a node has; runs with accelerator auto then ask for GPUs")(
      "nodes", po::value(&slurm.nodes),
      "nodes of each run whose strategy spans processes (ddp, zero2, fsdp), runtime.devices ranks "
      "on each (default 1)")(
      "max-requeues", po::value(&slurm.max_requeues),
      "times a task requeues itself after Slurm's warning before its time limit (default 3)")(
      "signal-seconds", po::value(&slurm.signal_seconds),
      "the warning comes this long before the time limit (default 120)")(
      "sbatch-arg", po::value(&slurm.sbatch_args)->composing(),
      "one more #SBATCH line, e.g. --sbatch-arg=--mem=64G (repeatable)")(
      "force", "submit runs whose config already completed")(
      "dry-run", "print the sbatch scripts and what would be submitted; submits nothing");
  po::options_description arguments;
  arguments.add_options()("file", po::value(&files)->composing(), "experiment files");
  po::positional_options_description positional;
  positional.add("file", -1);
  po::variables_map vm;
  if (!parse_command_line(args, options, positional, vm, arguments)) return kExitOk;
  if (!vm.count("slurm"))
    throw UserError(
        "submit: say where: --slurm (the one scheduler trainyard submits to); to train on this "
        "machine, `trainyard run`");
  if (files.empty()) throw UserError("submit: name one or more experiment files");
  if (slurm.max_parallel < 0) throw UserError("submit: --max-parallel must be 0 (none) or more");
  if (slurm.gpus_per_node < 0) throw UserError("submit: --gpus-per-node must be 0 or more");
  if (slurm.nodes < 1) throw UserError("submit: --nodes must be at least 1");
  if (slurm.max_requeues < 0) throw UserError("submit: --max-requeues must be 0 or more");
  if (slurm.signal_seconds < 1 || slurm.signal_seconds > 65535)
    throw UserError("submit: --signal-seconds must be 1 to 65535");
  for (const auto& [flag, value] : {std::pair{"--partition", &slurm.partition},
                                    {"--account", &slurm.account},
                                    {"--time", &slurm.time}})
    if (value->find_first_of(" \t\r\n'\"") != std::string::npos)
      throw UserError(
          fmt::format("submit: {} '{}' has a space or quote; Slurm names have none", flag, *value));
  for (const std::string& arg : slurm.sbatch_args)
    if (arg.empty() || arg[0] != '-' || arg.find('\n') != std::string::npos)
      throw UserError(fmt::format(
          "submit: --sbatch-arg '{}' is not an sbatch option; write it as --sbatch-arg=--mem=64G",
          arg));
  const bool dry_run = vm.count("dry-run") > 0, force = vm.count("force") > 0;

  if (max_runs < 1) throw UserError("submit: --max-runs must be at least 1");
  const std::vector<Experiment> experiments =
      load_batch(files, overrides, builtin_registry(), max_runs);
  const std::string exe = self_executable(), log_dir = log_dir_of(db_path);

  if (dry_run) {
    std::optional<Store> store;  // read only when it exists: a dry run creates nothing
    if (fs::exists(db_path)) store.emplace(db_path);
    std::vector<TaskShape> shapes;
    int done = 0;
    for (const Experiment& experiment : experiments) {
      const auto record = store ? store->find_experiment(experiment.name) : std::nullopt;
      for (const RunSpec& run : experiment.runs) {
        if (record && !force && store->find_completed_run(record->id, run.config_hash)) {
          ++done;
          continue;
        }
        shapes.push_back(shape_of(run, slurm));
      }
    }
    std::vector<int> order;
    const auto arrays = plan_arrays(shapes, 1001, order);
    const std::string folder =
        fs::absolute(fs::path(db_path).parent_path() / "slurm" / "N").string();
    fmt::print("would submit {} in {} ({} already completed); scripts as written to {}:\n",
               plural(static_cast<int64_t>(shapes.size()), "run"),
               plural(static_cast<int64_t>(arrays.size()), "job array"), done, folder);
    for (const ArrayJob& array : arrays)
      fmt::print("\n--- array-{}.sbatch\n{}", array.number,
                 array_script(array, 0, slurm, exe, folder));
    if (!arrays.empty())
      fmt::print("\n--- report.sbatch\n{}", report_script(0, slurm, exe, folder, {"<arrays>"}));
    return kExitOk;
  }

  const CommandOutput config = run_program({"scontrol", "show", "config"});
  if (config.exit_code != 0)
    throw UserError(fmt::format(
        "submit: cannot reach Slurm (`scontrol show config` {}): {}; run it on a login node of the "
        "cluster",
        config.exit_code < 0 ? "could not start" : "exited " + std::to_string(config.exit_code),
        strip(config.err)));
  fs::path db(db_path);
  if (db.has_parent_path()) fs::create_directories(db.parent_path());
  const BatchLock lock(db_path);  // not beside a `trainyard run` planning the same runs
  Store store(db_path);
  collect_slurm(store);  // what earlier submissions did, before deciding what to submit
  for (const Experiment& experiment : experiments) check_experiment_name_is_free(store, experiment);
  const int max_array_size = max_array_size_of(config.out);
  if (max_array_size < 1)
    throw UserError(
        "submit: this cluster disables job arrays (MaxArraySize = 0 in `scontrol show config`); "
        "ask its admins, or train with `trainyard run` inside one job");
  std::optional<SlurmStates> states;
  if (!store.slurm_runs().empty()) {
    states = query_slurm({}, submitters(store));
    // Without Slurm's word a run pending or running in it would be submitted a second time.
    if (!states)
      throw UserError(
          "submit: squeue failed, so which runs are pending or running in Slurm is unknown; "
          "nothing was submitted — try again when `squeue` answers");
  }

  // Decide every run's fate first, writing nothing: a run that cannot be submitted (more GPUs than
  // a node has) leaves the database as it was.
  struct Decision {
    const Experiment* experiment;
    const RunSpec* run;
    size_t position;
    std::optional<RunRecord> resumable;
    SlurmTask task;
  };
  std::vector<Decision> decisions;
  int already_completed = 0, already_submitted = 0, continuing = 0;
  for (const Experiment& experiment : experiments) {
    const std::optional<ExperimentRecord> recorded = store.find_experiment(experiment.name);
    const auto recorded_runs = recorded ? runs_by_config(store, experiment.name)
                                        : std::map<std::string, std::vector<RunRecord>>{};
    for (size_t i = 0; i < experiment.runs.size(); ++i) {
      const RunSpec& run = experiment.runs[i];
      const std::string name = experiment.name + "/" + run.variant;
      if (recorded && !force && store.find_completed_run(recorded->id, run.config_hash)) {
        ++already_completed;
        continue;
      }
      static const std::vector<RunRecord> kNone;
      const auto found = recorded_runs.find(run.config_hash);
      const std::vector<RunRecord>& of_config =
          found == recorded_runs.end() ? kNone : found->second;
      bool in_slurm = false;
      for (const RunRecord& record : of_config)
        if (auto task = store.slurm_run(record.id); task && states)
          if (auto it = states->jobs.find(task->job_id);
              it != states->jobs.end() && it->second.active()) {
            fmt::print("= {}: {} in Slurm as job {} (run {}); left alone\n", name,
                       lower(it->second.state), task->job_id, record.id);
            in_slurm = true;
            break;
          }
      if (in_slurm) {
        ++already_submitted;
        continue;
      }
      Decision decision{.experiment = &experiment,
                        .run = &run,
                        .position = i,
                        .resumable = std::nullopt,
                        .task = {.experiment = experiment.name,
                                 .variant = run.variant,
                                 .shape = shape_of(run, slurm),
                                 .multi_process = run.strategy.capabilities.multi_process,
                                 .save_state = run.train.save_state,
                                 .max_requeues = slurm.max_requeues}};
      if (recorded && !force) {
        decision.resumable = store.find_resumable_run(recorded->id, run.config_hash);
        if (!decision.resumable)  // queued by a submission whose job never ran
          for (const RunRecord& record : of_config)
            if (record.status == RunStatus::queued && store.slurm_run(record.id)) {
              decision.resumable = record;
              break;
            }
      }
      decisions.push_back(std::move(decision));
    }
  }
  if (decisions.empty()) {
    fmt::print("nothing to submit: {} already completed, {} pending or running in Slurm\n",
               already_completed, already_submitted);
    return kExitOk;
  }

  // Record the runs, their files' stems and configs, and each run's task, before any sbatch: a
  // submit that dies half-way leaves queued runs the next submit finds and submits.
  std::map<std::string, int64_t> experiment_ids;
  for (const Experiment& experiment : experiments)
    experiment_ids[experiment.name] = record_experiment(store, experiment);
  const int64_t submission = store.create_submission();
  const fs::path folder = fs::absolute(fs::path(log_dir).parent_path() / "slurm" /
                                       fmt::format("submission-{}", submission));
  fs::create_directories(folder);
  store.set_submission_folder(submission, folder.string());
  std::vector<SlurmTask> tasks;
  std::vector<TaskShape> shapes;
  for (Decision& decision : decisions) {
    SlurmTask& task = decision.task;
    const Experiment& experiment = *decision.experiment;
    if (decision.resumable) {
      const RunRecord& record = *decision.resumable;
      task.run_id = record.id;
      const auto earlier = store.slurm_run(record.id);
      task.stem = earlier ? earlier->stem : run_files_stem(record);
      if (task.stem.empty()) task.stem = new_run_files_stem(log_dir, experiment, record).string();
      ++continuing;
    } else {
      task.run_id = store.queue_run(experiment_ids.at(experiment.name),
                                    queued_run(*decision.run, decision.position));
      task.stem = new_run_files_stem(log_dir, experiment, *store.run(task.run_id)).string();
    }
    fs::create_directories(fs::path(task.stem).parent_path());
    if (!fs::exists(task.stem + ".yaml"))
      write_file_atomically(task.stem + ".yaml", decision.run->config_yaml);
    store.in_transaction([&] {
      if (decision.resumable) store.requeue_run(task.run_id, /*for_slurm=*/true);
      // A run submitted again keeps what was taken in of its records file (the same stem).
      store.assign_slurm_job(task.run_id, submission, "", task.stem);
    });
    tasks.push_back(task);
    shapes.push_back(task.shape);
  }
  std::vector<int> order;
  const std::vector<ArrayJob> arrays = plan_arrays(shapes, max_array_size, order);
  json list = json::array();
  for (int index : order) list.push_back(tasks[index].to_json());
  write_file_atomically(folder / "tasks.json", list.dump(1) + "\n");

  std::vector<std::string> array_jobs;
  for (const ArrayJob& array : arrays) {
    const fs::path script = folder / fmt::format("array-{}.sbatch", array.number);
    write_file_atomically(script, array_script(array, submission, slurm, exe, folder.string()));
    const CommandOutput sbatch = run_program({"sbatch", "--parsable", script.string()});
    if (sbatch.exit_code != 0 || job_of(sbatch).empty()) {
      // The runs of this array and the next ones were not submitted: recorded as not started.
      for (size_t k = array.first_task; k < order.size(); ++k)
        store.end_run(tasks[order[k]].run_id, RunStatus::interrupted,
                      "not submitted: sbatch refused its array: " + strip(sbatch.err),
                      FailureClass::not_started);
      throw UserError(fmt::format(
          "submit: sbatch refused {}: {}{}; `trainyard submit` again submits what is left",
          script.string(), strip(sbatch.err),
          array_jobs.empty() ? ""
                             : fmt::format(" (arrays submitted before it: {})", join(array_jobs))));
    }
    const std::string job = job_of(sbatch);
    array_jobs.push_back(job);
    store.in_transaction([&] {
      for (int k = 0; k < array.tasks; ++k) {
        SlurmTask& task = tasks[order[array.first_task + k]];
        task.job_id = fmt::format("{}_{}", job, k);
        store.assign_slurm_job(task.run_id, submission, task.job_id, task.stem);
      }
    });
    fmt::print(
        "array {}: job {}, {}{}\n", array.number, job, plural(array.tasks, "run"),
        slurm.max_parallel > 0 ? fmt::format(", at most {} at once", slurm.max_parallel) : "");
  }
  // The report job reads a snapshot: the database itself stays on this host.
  const fs::path snapshot = folder / "snapshot.db";
  if (fs::exists(snapshot)) fs::remove(snapshot);
  store.snapshot_to(snapshot.string());
  const fs::path report = folder / "report.sbatch";
  write_file_atomically(report, report_script(submission, slurm, exe, folder.string(), array_jobs));
  const CommandOutput report_job = run_program({"sbatch", "--parsable", report.string()});
  if (report_job.exit_code == 0)
    store.set_report_job(submission, job_of(report_job));
  else
    fmt::print(stderr,
               "submit: the report job was refused ({}); `trainyard report` here writes it\n",
               strip(report_job.err));
  fmt::print(
      "submission {}: {} ({} continue where they stopped), {} already completed, {} left alone; "
      "report job {} writes {}\nfiles: {}\nnext: trainyard status --db {}\n",
      submission, plural(static_cast<int64_t>(tasks.size()), "run"), continuing, already_completed,
      already_submitted, report_job.exit_code == 0 ? job_of(report_job) : "-",
      (folder / "report.html").string(), folder.string(), db_path);
  return kExitOk;
}

}  // namespace trainyard
