// `trainyard submit --slurm`, `collect`, `cancel` and `slurm-task`: sweeps on a Slurm cluster
// (runner/slurm.h, docs/cluster.md). `submit` validates, records the runs as queued, writes and
// submits one job array per resource shape plus a report job, and exits: nothing stays on the
// login node. Each array task (`slurm-task`) trains one run with the launcher and appends its
// records to the run's folder; the database, on the submitting host only, takes them in
// (`collect`, which `report`, `runs` and `status` do first).
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
#include "common/text.h"
#include "components/builtin.h"
#include "db/run_events.h"
#include "runner/batch_lock.h"
#include "runner/cli/commands.h"
#include "runner/cli/options.h"
#include "runner/controller.h"
#include "runner/launcher.h"
#include "runner/slurm.h"

namespace trainyard {

namespace po = boost::program_options;
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

std::string lower(std::string text) {
  for (char& c : text) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return text;
}

std::string executable_path() {
  std::error_code ec;
  const fs::path self = fs::read_symlink("/proc/self/exe", ec);
  return ec ? "trainyard" : self.string();
}

std::string log_dir_of(const std::string& db_path) {
  const fs::path db(db_path);
  return fs::absolute(db.has_parent_path() ? db.parent_path() / "logs" : fs::path("logs")).string();
}

void write_file(const fs::path& path, const std::string& text) {
  const fs::path temporary = path.string() + ".tmp";
  {
    std::ofstream out(temporary, std::ios::binary);
    out << text;
    if (!out) throw std::runtime_error("cannot write " + path.string());
  }
  fs::rename(temporary, path);
}

// A run of the submission: what its array task reads from tasks.json.
struct Task {
  int64_t run_id = 0;
  std::string experiment{}, variant{}, stem{};
  TaskShape shape{};
  bool multi_process = false;
  bool save_state = false;
  int max_requeues = 3;
  std::string job_id{};  // once submitted
  json to_json() const {
    return {{"run_id", run_id},         {"experiment", experiment},
            {"variant", variant},       {"stem", stem},
            {"nodes", shape.nodes},     {"ranks_per_node", shape.ranks_per_node},
            {"cuda", shape.cuda},       {"multi_process", multi_process},
            {"save_state", save_state}, {"max_requeues", max_requeues}};
  }
  static Task from_json(const json& j) {
    Task t;
    auto small = [&](const char* key) {  // a count: nodes, ranks, requeues
      const int64_t n = integer_from_json(j.at(key));
      if (n < 0 || n > 1 << 20) throw json::type_error::create(302, key, &j);
      return static_cast<int>(n);
    };
    t.run_id = integer_from_json(j.at("run_id"));
    t.experiment = j.at("experiment").get<std::string>();
    t.variant = j.at("variant").get<std::string>();
    t.stem = j.at("stem").get<std::string>();
    t.shape = {.nodes = small("nodes"),
               .ranks_per_node = small("ranks_per_node"),
               .cuda = j.at("cuda").get<bool>()};
    t.multi_process = j.at("multi_process").get<bool>();
    t.save_state = j.at("save_state").get<bool>();
    t.max_requeues = small("max_requeues");
    return t;
  }
};

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
  const std::string exe = executable_path(), log_dir = log_dir_of(db_path);

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
    Task task;
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
  std::vector<Task> tasks;
  std::vector<TaskShape> shapes;
  for (Decision& decision : decisions) {
    Task& task = decision.task;
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
      write_file(task.stem + ".yaml", decision.run->config_yaml);
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
  write_file(folder / "tasks.json", list.dump(1) + "\n");

  std::vector<std::string> array_jobs;
  for (const ArrayJob& array : arrays) {
    const fs::path script = folder / fmt::format("array-{}.sbatch", array.number);
    write_file(script, array_script(array, submission, slurm, exe, folder.string()));
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
        Task& task = tasks[order[array.first_task + k]];
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
  write_file(report, report_script(submission, slurm, exe, folder.string(), array_jobs));
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

int collect_command(const std::vector<std::string>& args) {
  po::options_description options("trainyard collect [--db PATH]");
  std::string db_path = default_database_path();
  options.add_options()("help,h", "show this help")(
      "db", po::value(&db_path), "database file (default: $TRAINYARD_DB or runs/trainyard.db)");
  po::variables_map vm;
  if (!parse_command_line(args, options, {}, vm)) return kExitOk;
  if (!fs::exists(db_path))
    throw UserError(fmt::format("no database at {}; submit an experiment first", db_path));
  Store store(db_path);
  const CollectSummary summary = collect_slurm(store);
  for (const std::string& problem : summary.problems) fmt::print(stderr, "collect: {}\n", problem);
  fmt::print("collect: {} from {}, {} ended\n", plural(summary.records, "record"),
             plural(summary.runs, "run"), summary.ended);
  return kExitOk;
}

int cancel_command(const std::vector<std::string>& args) {
  po::options_description options("trainyard cancel [--submission N] [--db PATH]");
  std::string db_path = default_database_path();
  int64_t wanted = 0;
  options.add_options()("help,h", "show this help")(
      "db", po::value(&db_path), "database file (default: $TRAINYARD_DB or runs/trainyard.db)")(
      "submission", po::value(&wanted), "the submission (default: the newest)");
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
  write_file(fs::path(target->folder) / "cancelled", utc_now() + "\n");
  store.mark_submission_cancelled(target->id);
  std::set<std::string> jobs;
  for (const SlurmRunRecord& task : store.slurm_runs())
    if (task.submission_id == target->id) jobs.insert(split(task.job_id, '_').front());
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
int train_task(const Task& task, const std::string& folder, const std::string& job, int restarts,
               const LaunchSpec& spec, const std::string& position, RunEventWriter& events);

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
  Task task;
  try {
    task = Task::from_json(list[index]);
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

int train_task(const Task& task, const std::string& folder, const std::string& job, int restarts,
               const LaunchSpec& spec, const std::string& position, RunEventWriter& events) {
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
