// `trainyard submit --slurm`: validates, plans as `trainyard run` does (runner/run_plan.h), records
// the runs as queued, writes tasks.json and one sbatch script per array (runner/slurm.h), submits
// them and a report job, and exits: nothing stays on the login node (docs/cluster.md).
//
// It goes in phases, each a function below: read the command line; (--dry-run: print what would
// be submitted); reach Slurm and open the database; decide each run's fate, writing nothing;
// record the runs and their tasks; submit the arrays; submit the report job.
#include <filesystem>
#include <map>
#include <optional>

#include <fmt/format.h>
#include <boost/program_options.hpp>
#include <nlohmann/json.hpp>

#include "common/files.h"
#include "common/process.h"
#include "common/text.h"
#include "components/builtin.h"
#include "runner/batch_lock.h"
#include "runner/batch_records.h"
#include "runner/cli/commands.h"
#include "runner/cli/options.h"
#include "runner/cli/slurm_tasks.h"
#include "runner/engine/engine.h"
#include "runner/run_plan.h"
#include "runner/search/study.h"
#include "runner/slurm.h"

namespace trainyard {

namespace po = boost::program_options;
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// What the command line asks for.
struct SubmitRequest {
  std::vector<std::string> files, overrides, plugins;
  std::string db_path;
  SlurmOptions slurm;
  int64_t max_runs = kDefaultMaxRuns;
  RunSelection selection;  // --only, --repeats
  bool force = false, dry_run = false;
};

// Refuses what Slurm would refuse later, or what would write a broken sbatch script.
void check_slurm_options(const SlurmOptions& slurm) {
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
}

// The command line; nullopt after --help.
std::optional<SubmitRequest> parse_submit_request(const std::vector<std::string>& args) {
  po::options_description options = command_options(
      "trainyard submit FILE... --slurm [options]\n  submits the batch's runs to Slurm as job "
      "arrays (one per resource shape) and a report job after them, then exits");
  SubmitRequest request;
  SlurmOptions& slurm = request.slurm;
  add_max_runs_option(options, request.max_runs);
  options.add_options()("slurm", "submit to Slurm (the one scheduler trainyard submits to)");
  add_override_option(options, request.overrides);
  add_selection_options(options, request.selection);
  add_plugin_option(options, request.plugins);
  add_database_option(
      options, request.db_path,
      "database file on this host (default: $TRAINYARD_DB or runs/trainyard.db); the runs' files "
      "go beside it, on a file system every node sees");
  options.add_options()("partition", po::value(&slurm.partition), "Slurm partition")(
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
      "one more #SBATCH line, e.g. --sbatch-arg=--mem=64G (repeatable); one that sets an option "
      "the script sets (--gres for --gpus-per-node, --cpus-per-task) replaces that line")(
      "setup", po::value(&slurm.setup_lines)->composing(),
      "a shell line each task runs before trainyard, e.g. --setup 'module load gcc/13' "
      "(repeatable)")("force", "submit runs whose config already completed")(
      "dry-run", "print the sbatch scripts and what would be submitted; submits nothing");
  po::options_description arguments;
  arguments.add_options()("file", po::value(&request.files)->composing(), "experiment files");
  po::positional_options_description positional;
  positional.add("file", -1);
  po::variables_map vm;
  if (!parse_command_line(args, options, positional, vm, arguments)) return std::nullopt;
  if (!vm.count("slurm"))
    throw UserError(
        "submit: say where: --slurm (the one scheduler trainyard submits to); to train on this "
        "machine, `trainyard run`");
  if (request.files.empty()) throw UserError("submit: name one or more experiment files");
  check_slurm_options(slurm);
  check_max_runs("submit", request.max_runs);
  request.force = vm.count("force") > 0;
  request.dry_run = vm.count("dry-run") > 0;
  return request;
}

// What a run asks of a node: its ranks (runtime.devices), GPUs or CPUs, and nodes when its strategy
// spans processes. `accelerator: auto` means GPUs when the submission names --gpus-per-node.
TaskShape shape_of(const RunSpec& run, const SlurmOptions& options) {
  TaskShape shape;
  shape.ranks_per_node = static_cast<int>(run.runtime.devices);
  shape.cuda = run.runtime.accelerator == Accelerator::cuda ||
               (run.runtime.accelerator == Accelerator::automatic && options.gpus_per_node > 0);
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

const ConfigHistory& history_of(const std::map<std::string, ConfigHistory>& histories,
                                const std::string& config_hash) {
  static const ConfigHistory kNone;
  const auto found = histories.find(config_hash);
  return found == histories.end() ? kNone : found->second;
}

// --dry-run: the arrays and scripts a submission would write, from the database as it is (read
// only when it exists: a dry run creates nothing, and does not ask Slurm).
int print_dry_run(const SubmitRequest& request, const std::vector<Experiment>& experiments,
                  const std::vector<SlurmStudy>& studies, const std::string& exe) {
  std::optional<Store> store;
  if (fs::exists(request.db_path)) store.emplace(request.db_path);
  std::vector<TaskShape> shapes;
  int done = 0;
  for (const Experiment& experiment : experiments) {
    const auto histories =
        store ? read_histories(*store, experiment) : std::map<std::string, ConfigHistory>{};
    for (const RunSpec& run : experiment.runs) {
      const RunPlan plan = plan_run(history_of(histories, run.config_hash),
                                    {.scheduler = Scheduler::slurm, .force = request.force});
      if (plan.fate == RunFate::already_completed) {
        ++done;
        continue;
      }
      shapes.push_back(shape_of(run, request.slurm));
    }
  }
  std::vector<int> order;
  const auto arrays = plan_arrays(shapes, 1001, order);
  const std::string folder =
      fs::absolute(fs::path(request.db_path).parent_path() / "slurm" / "N").string();
  fmt::print("would submit {} in {} ({} already completed); scripts as written to {}:\n",
             plural(static_cast<int64_t>(shapes.size()), "run"),
             plural(static_cast<int64_t>(arrays.size()), "job array"), done, folder);
  for (const ArrayJob& array : arrays)
    fmt::print("\n--- array-{}.sbatch\n{}", array.number,
               array_script(array, 0, request.slurm, exe, folder));
  if (!studies.empty())
    fmt::print("\nand {}, a job each, trained into their own databases:\n",
               plural(static_cast<int64_t>(studies.size()), "study", "studies"));
  for (size_t i = 0; i < studies.size(); ++i)
    fmt::print("\n--- study-{}.sbatch ({})\n{}", i, studies[i].db,
               study_script(static_cast<int>(i), 0, studies[i], request.slurm, exe, folder));
  if (!arrays.empty() || !studies.empty())
    fmt::print("\n--- report.sbatch\n{}", report_script(0, request.slurm, exe, folder, {"<jobs>"}));
  return kExitOk;
}

// The batch's studies (sweep.search), a Slurm job each, in the batch's order. A study trains on
// one node (its trials' ranks inside the job; with sweep.search.parallel, each trial in a job of
// its own), into a database of its own kept beside the shared one under slurm/studies/, the same
// for every submission of the study, so that one submitted again continues it.
std::vector<SlurmStudy> plan_studies(const SubmitRequest& request,
                                     const std::vector<Experiment>& experiments) {
  std::vector<SlurmStudy> studies;
  const fs::path folder =
      fs::absolute(fs::path(log_dir_of(request.db_path)).parent_path() / "slurm" / "studies");
  for (const Experiment& experiment : experiments) {
    const std::vector<RunSpec> edges = study_edge_runs(experiment);
    for (size_t i = 0; i < experiment.studies.size(); ++i) {
      const Study& study = experiment.studies[i];
      const TaskShape shape = shape_of(edges.at(i), request.slurm);
      if (shape.nodes > 1)
        throw UserError(fmt::format(
            "{}: the study of {} would train each trial on --nodes {}; a study submitted to Slurm "
            "trains on one node (its trials' ranks inside one job): submit it with --nodes 1",
            experiment.file, study.variant, shape.nodes));
      const StudyKey key = study_key(experiment, study);
      studies.push_back(
          {.experiment = experiment.name,
           .variant = study.variant,
           .study_hash = key.study_hash,
           .file = fs::absolute(experiment.file).string(),
           .file_sha256 = file_sha256(experiment.file),
           .overrides = request.overrides,
           .plugins = request.plugins,
           .max_runs = request.max_runs,
           .db = (folder / experiment.name /
                  fmt::format("{}-{}.db", study.variant, key.study_hash.substr(0, 12)))
                     .string(),
           .shape = shape,
           .max_requeues = request.slurm.max_requeues});
      // Trials side by side: each in a Slurm job of its own, which the study's job asks for.
      if (study.search.parallel > 1) {
        studies.back().trial_job = trial_job_options(shape, request.slurm);
        studies.back().setup_lines = request.slurm.setup_lines;
      }
    }
  }
  return studies;
}

// Whether the database holds the study's outcome and a completed run of each of its confirmations:
// then a job would only replay it.
bool study_is_complete(Store& store, const std::vector<Experiment>& experiments,
                       const SlurmStudy& submitted) {
  for (const Experiment& experiment : experiments)
    for (const Study& study : experiment.studies) {
      if (experiment.name != submitted.experiment || study.variant != submitted.variant) continue;
      const auto outcome =
          store.study_outcome({submitted.experiment, submitted.variant, submitted.study_hash});
      const auto found = store.find_experiment(experiment.name);
      if (!outcome || !outcome->best_trial || !found) return false;  // no best: its job replays it
      for (const RunSpec& run : confirmation_runs(study, parse_values(outcome->values)))
        if (!store.find_completed_run(found->id, run.config_hash)) return false;
      return true;
    }
  return false;
}

// Takes out of `studies` those a job trains now (it holds the study database's lock) or that an
// earlier submission's job waits in Slurm's queue to train, and those whose outcome and
// confirmation runs the database holds, completed; returns the earlier job of each left in Slurm
// ("" when unknown; the report job waits for the others too), and counts the completed ones in
// `completed`.
std::vector<std::string> leave_studies_in_slurm(Store& store,
                                                const std::vector<Experiment>& experiments,
                                                std::vector<SlurmStudy>& studies, int& completed) {
  std::map<std::string, std::string> earlier_job;  // by database
  for (const SubmissionRecord& submission : store.submissions())
    for (const SlurmStudy& study : read_slurm_studies(submission.folder))
      if (!study.job_id.empty()) earlier_job[study.db] = study.job_id;
  std::vector<std::string> asked;
  for (const SlurmStudy& study : studies)
    if (earlier_job.count(study.db)) asked.push_back(earlier_job.at(study.db));
  std::optional<SlurmStates> states;
  if (!asked.empty()) {
    states = query_slurm(asked, submitters(store));
    if (!states)
      throw UserError(
          "submit: squeue failed, so whether the studies' earlier jobs still wait in Slurm is "
          "unknown; nothing was submitted — try again when `squeue` answers");
  }
  std::vector<std::string> left;
  std::erase_if(studies, [&](const SlurmStudy& study) {
    if (study_is_complete(store, experiments, study)) {
      fmt::print("= {}/{}: the study and its confirmations completed; left alone\n",
                 study.experiment, study.variant);
      ++completed;
      return true;
    }
    std::string why;
    if (const auto job = earlier_job.find(study.db); job != earlier_job.end()) {
      const auto state = states->jobs.find(job->second);
      if (state != states->jobs.end() && state->second.active())
        why = fmt::format("{} in Slurm as job {}", state->second.state, job->second);
    }
    if (why.empty() && fs::exists(study.db)) {
      try {
        const BatchLock lock(study.db);
      } catch (const UserError&) {
        why = "trained now by a job (its database is locked)";
      }
    }
    if (why.empty()) return false;
    fmt::print("= {}/{}: the study is {}; left alone\n", study.experiment, study.variant, why);
    left.push_back(earlier_job.count(study.db) ? earlier_job.at(study.db) : "");
    return true;
  });
  return left;
}

// `scontrol show config`: the cluster's settings; UserError when Slurm cannot be reached.
std::string reach_slurm() {
  const CommandOutput config = run_program({"scontrol", "show", "config"});
  if (config.exit_code != 0)
    throw UserError(fmt::format(
        "submit: cannot reach Slurm (`scontrol show config` {}): {}; run it on a login node of the "
        "cluster",
        config.exit_code < 0 ? "could not start" : "exited " + std::to_string(config.exit_code),
        strip(config.err)));
  return config.out;
}

// The cluster's MaxArraySize; UserError when it disables arrays.
int max_array_size_or_refuse(const std::string& slurm_config) {
  const int max_array_size = max_array_size_of(slurm_config);
  if (max_array_size < 1)
    throw UserError(
        "submit: this cluster disables job arrays (MaxArraySize = 0 in `scontrol show config`); "
        "ask its admins, or train with `trainyard run` inside one job");
  return max_array_size;
}

// A run to submit: a new one, or one of the store's that continues (`continues`).
struct Decision {
  const Experiment* experiment;
  const RunSpec* run;
  size_t position;
  std::optional<RunRecord> continues;
  SlurmTask task;
};

struct Decisions {
  std::vector<Decision> to_submit;
  int already_completed = 0, already_in_slurm = 0;
};

// Every run's fate, by the planner's rule, writing nothing: a run that cannot be submitted (more
// GPUs than a node has) leaves the database as it was.
Decisions decide(Store& store, const std::vector<Experiment>& experiments,
                 const SubmitRequest& request, const SlurmStates* states) {
  Decisions decisions;
  for (const Experiment& experiment : experiments) {
    const std::map<std::string, ConfigHistory> histories = read_histories(store, experiment);
    for (size_t i = 0; i < experiment.runs.size(); ++i) {
      const RunSpec& run = experiment.runs[i];
      const RunPlan plan =
          plan_run(history_of(histories, run.config_hash),
                   {.scheduler = Scheduler::slurm, .force = request.force, .slurm_states = states});
      switch (plan.fate) {
        case RunFate::already_completed:
          ++decisions.already_completed;
          continue;
        case RunFate::with_slurm:
          fmt::print("= {}/{}: {} in Slurm as job {} (run {}); left alone\n", experiment.name,
                     run.variant, plan.slurm_state, plan.slurm_job, plan.run->id);
          ++decisions.already_in_slurm;
          continue;
        case RunFate::unavailable:  // not asked of the planner: Slurm finds the nodes
        case RunFate::continues:
        case RunFate::starts:
          break;
      }
      decisions.to_submit.push_back(
          {.experiment = &experiment,
           .run = &run,
           .position = i,
           .continues = plan.fate == RunFate::continues ? plan.run : std::nullopt,
           .task = {.experiment = experiment.name,
                    .variant = run.variant,
                    .shape = shape_of(run, request.slurm),
                    .multi_process = run.strategy.capabilities.multi_process,
                    .save_state = run.train.save_state,
                    .max_requeues = request.slurm.max_requeues}});
    }
  }
  return decisions;
}

// A submission as recorded: its folder and its tasks, in the order the arrays cover them.
struct RecordedSubmission {
  int64_t id = 0;
  fs::path folder;
  std::vector<SlurmTask> tasks;
  std::vector<ArrayJob> arrays;
  int continuing = 0;
};

// Records the runs, their files' stems and configs, and each run's task, then writes tasks.json,
// all before any sbatch: a submit that dies half-way leaves queued runs the next submit finds and
// submits.
RecordedSubmission record_submission(Store& store, const std::vector<Experiment>& experiments,
                                     std::vector<Decision>& decisions, const std::string& log_dir,
                                     int max_array_size) {
  std::map<std::string, int64_t> experiment_ids;
  for (const Experiment& experiment : experiments)
    experiment_ids[experiment.name] = record_experiment(store, experiment);
  RecordedSubmission submission;
  submission.id = store.create_submission();
  submission.folder = fs::absolute(fs::path(log_dir).parent_path() / "slurm" /
                                   fmt::format("submission-{}", submission.id));
  fs::create_directories(submission.folder);
  store.set_submission_folder(submission.id, submission.folder.string());
  std::vector<SlurmTask> tasks;
  std::vector<TaskShape> shapes;
  for (Decision& decision : decisions) {
    SlurmTask& task = decision.task;
    const Experiment& experiment = *decision.experiment;
    if (decision.continues) {
      const RunRecord& record = *decision.continues;
      task.run_id = record.id;
      const auto earlier = store.slurm_run(record.id);
      task.stem = earlier ? earlier->stem : run_files_stem(record);
      if (task.stem.empty()) task.stem = new_run_files_stem(log_dir, experiment, record).string();
      ++submission.continuing;
    } else {
      task.run_id = store.queue_run(experiment_ids.at(experiment.name),
                                    queued_run(*decision.run, decision.position));
      task.stem = new_run_files_stem(log_dir, experiment, *store.run(task.run_id)).string();
    }
    fs::create_directories(fs::path(task.stem).parent_path());
    if (!fs::exists(task.stem + ".yaml"))
      write_file_atomically(task.stem + ".yaml", decision.run->config_yaml);
    store.in_transaction([&] {
      if (decision.continues) store.requeue_run(task.run_id, /*for_slurm=*/true);
      // A run submitted again keeps what was taken in of its records file (the same stem).
      store.assign_slurm_job(task.run_id, submission.id, "", task.stem);
    });
    tasks.push_back(task);
    shapes.push_back(task.shape);
  }
  std::vector<int> order;
  submission.arrays = plan_arrays(shapes, max_array_size, order);
  json list = json::array();
  for (int index : order) {
    list.push_back(tasks[index].to_json());
    submission.tasks.push_back(tasks[index]);
  }
  write_file_atomically(submission.folder / "tasks.json", list.dump(1) + "\n");
  return submission;
}

// Submits each array and records its tasks' jobs; returns the arrays' job ids. When sbatch refuses
// one, its runs and the later arrays' are recorded as not started and UserError says so.
std::vector<std::string> submit_arrays(Store& store, RecordedSubmission& submission,
                                       const SlurmOptions& slurm, const std::string& exe) {
  std::vector<std::string> array_jobs;
  for (const ArrayJob& array : submission.arrays) {
    const fs::path script = submission.folder / fmt::format("array-{}.sbatch", array.number);
    write_file_atomically(
        script, array_script(array, submission.id, slurm, exe, submission.folder.string()));
    const CommandOutput sbatch = run_program({"sbatch", "--parsable", script.string()});
    if (sbatch.exit_code != 0 || job_of(sbatch).empty()) {
      for (size_t k = array.first_task; k < submission.tasks.size(); ++k)
        store.end_run(submission.tasks[k].run_id, RunStatus::interrupted,
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
        SlurmTask& task = submission.tasks[array.first_task + k];
        task.job_id = fmt::format("{}_{}", job, k);
        store.assign_slurm_job(task.run_id, submission.id, task.job_id, task.stem);
      }
    });
    fmt::print(
        "array {}: job {}, {}{}\n", array.number, job, plural(array.tasks, "run"),
        slurm.max_parallel > 0 ? fmt::format(", at most {} at once", slurm.max_parallel) : "");
  }
  return array_jobs;
}

// Writes studies.json and each study's script, submits them, records their jobs in studies.json
// and appends them to `jobs`. When sbatch refuses one, UserError says which were submitted.
void submit_studies(const RecordedSubmission& submission, std::vector<SlurmStudy>& studies,
                    const SlurmOptions& slurm, const std::string& exe,
                    std::vector<std::string>& jobs) {
  if (studies.empty()) return;
  const std::string folder = submission.folder.string();
  write_slurm_studies(folder, studies);
  for (size_t i = 0; i < studies.size(); ++i) {
    SlurmStudy& study = studies[i];
    fs::create_directories(fs::path(study.db).parent_path());
    const fs::path script = submission.folder / fmt::format("study-{}.sbatch", i);
    write_file_atomically(
        script, study_script(static_cast<int>(i), submission.id, study, slurm, exe, folder));
    const CommandOutput sbatch = run_program({"sbatch", "--parsable", script.string()});
    if (sbatch.exit_code != 0 || job_of(sbatch).empty())
      throw UserError(fmt::format(
          "submit: sbatch refused {}: {}{}; `trainyard submit` again submits what is left",
          script.string(), strip(sbatch.err),
          jobs.empty() ? "" : fmt::format(" (jobs submitted before it: {})", join(jobs))));
    study.job_id = job_of(sbatch);
    jobs.push_back(study.job_id);
    write_slurm_studies(folder, studies);
    fmt::print("study {}/{}: job {}, into {}\n", study.experiment, study.variant, study.job_id,
               study.db);
  }
}

// The report job, after the arrays: it reads a snapshot, for the database itself stays on this
// host. Returns its job id, "" when sbatch refused it (then `trainyard report` here writes it).
std::string submit_report_job(Store& store, const RecordedSubmission& submission,
                              const SlurmOptions& slurm, const std::string& exe,
                              const std::vector<std::string>& array_jobs) {
  const fs::path snapshot = submission.folder / "snapshot.db";
  if (fs::exists(snapshot)) fs::remove(snapshot);
  store.snapshot_to(snapshot.string());
  const fs::path report = submission.folder / "report.sbatch";
  write_file_atomically(
      report, report_script(submission.id, slurm, exe, submission.folder.string(), array_jobs));
  const CommandOutput report_job = run_program({"sbatch", "--parsable", report.string()});
  if (report_job.exit_code != 0) {
    fmt::print(stderr,
               "submit: the report job was refused ({}); `trainyard report` here writes it\n",
               strip(report_job.err));
    return "";
  }
  store.set_report_job(submission.id, job_of(report_job));
  return job_of(report_job);
}

}  // namespace

int submit_command(const std::vector<std::string>& args) {
  const std::optional<SubmitRequest> request = parse_submit_request(args);
  if (!request) return kExitOk;
  std::vector<Experiment> experiments = load_checked_batch(
      request->files, request->overrides, request->plugins, request->max_runs, request->selection);
  const std::string exe = self_executable(), log_dir = log_dir_of(request->db_path);
  std::vector<SlurmStudy> studies = plan_studies(*request, experiments);
  if (request->dry_run) return print_dry_run(*request, experiments, studies, exe);

  const std::string slurm_config = reach_slurm();
  if (const fs::path db(request->db_path); db.has_parent_path())
    fs::create_directories(db.parent_path());
  const BatchLock lock(request->db_path);  // not beside a `trainyard run` planning the same runs
  Store store(request->db_path);
  collect_slurm(store);  // what earlier submissions did, before deciding what to submit
  for (const Experiment& experiment : experiments) check_experiment_name_is_free(store, experiment);
  const int max_array_size = max_array_size_or_refuse(slurm_config);
  std::optional<SlurmStates> states;
  if (!store.slurm_runs().empty()) {
    states = query_slurm({}, submitters(store));
    // Without Slurm's word a run pending or running in it would be submitted a second time.
    if (!states)
      throw UserError(
          "submit: squeue failed, so which runs are pending or running in Slurm is unknown; "
          "nothing was submitted — try again when `squeue` answers");
  }

  Decisions decisions = decide(store, experiments, *request, states ? &*states : nullptr);
  int studies_completed = 0;
  const std::vector<std::string> studies_in_slurm =
      leave_studies_in_slurm(store, experiments, studies, studies_completed);
  decisions.already_completed += studies_completed;
  const int studies_left_alone = static_cast<int>(studies_in_slurm.size());
  if (decisions.to_submit.empty() && studies.empty()) {
    fmt::print("nothing to submit: {} already completed, {} pending or running in Slurm\n",
               decisions.already_completed, decisions.already_in_slurm + studies_left_alone);
    return kExitOk;
  }
  RecordedSubmission submission =
      record_submission(store, experiments, decisions.to_submit, log_dir, max_array_size);
  std::vector<std::string> jobs = submit_arrays(store, submission, request->slurm, exe);
  // A study refused by sbatch still leaves the report job waiting for the jobs that went in.
  std::optional<UserError> refused;
  try {
    submit_studies(submission, studies, request->slurm, exe, jobs);
  } catch (const UserError& error) {
    refused = error;
  }
  for (const std::string& job : studies_in_slurm)
    if (!job.empty()) jobs.push_back(job);
  const std::string report_job = submit_report_job(store, submission, request->slurm, exe, jobs);
  if (refused) throw *refused;
  fmt::print(
      "submission {}: {} ({} continue where they stopped){}, {} already completed, {} left alone; "
      "report job {} writes {}\nfiles: {}\nnext: trainyard status --db {}\n",
      submission.id, plural(static_cast<int64_t>(submission.tasks.size()), "run"),
      submission.continuing,
      studies.empty() ? ""
                      : ", " + plural(static_cast<int64_t>(studies.size()), "study", "studies"),
      decisions.already_completed, decisions.already_in_slurm + studies_left_alone,
      report_job.empty() ? "-" : report_job, (submission.folder / "report.html").string(),
      submission.folder.string(), request->db_path);
  return kExitOk;
}

}  // namespace trainyard
