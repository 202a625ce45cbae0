#include "runner/slurm.h"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <thread>

#include <fmt/format.h>

#include "common/files.h"
#include "common/json_numbers.h"
#include "common/text.h"
#include "db/run_events.h"
#include "runner/batch_lock.h"
#include "trainyard/error.h"

namespace trainyard {

namespace fs = std::filesystem;

std::vector<ArrayJob> plan_arrays(const std::vector<TaskShape>& shapes, int max_array_size,
                                  std::vector<int>& order) {
  // Shapes in the order they first appear, so the arrays follow the files' order.
  std::vector<TaskShape> distinct;
  for (const TaskShape& shape : shapes)
    if (std::find(distinct.begin(), distinct.end(), shape) == distinct.end())
      distinct.push_back(shape);
  std::vector<ArrayJob> arrays;
  order.clear();
  const int limit = std::max(1, max_array_size);  // task ids run 0..MaxArraySize-1
  for (const TaskShape& shape : distinct) {
    for (size_t i = 0; i < shapes.size(); ++i) {
      if (!(shapes[i] == shape)) continue;
      if (arrays.empty() || !(arrays.back().shape == shape) || arrays.back().tasks >= limit)
        arrays.push_back({.number = static_cast<int>(arrays.size()),
                          .first_task = static_cast<int>(order.size()),
                          .tasks = 0,
                          .shape = shape});
      ++arrays.back().tasks;
      order.push_back(static_cast<int>(i));
    }
  }
  return arrays;
}

namespace {

// The --output line: Slurm's output file `pattern` (%A, %a, %j) in `folder`. sbatch ends a value at
// unquoted whitespace and reads % as a pattern: the folder's own % are doubled.
std::string output_option(const std::string& folder, const std::string& pattern) {
  std::string path;
  for (char c : folder) path += c == '%' ? std::string("%%") : std::string(1, c);
  path += "/" + pattern;
  return "--output=" + (path.find_first_of(" \t") == std::string::npos ? path : "\"" + path + "\"");
}

// The options `generated` with the user's --sbatch-arg lines: one that sets an option (or an
// equivalent) generated sets replaces it, the others are added.
std::vector<std::string> with_user_options(const std::vector<std::string>& generated,
                                           const SlurmOptions& options) {
  std::vector<std::string> groups;
  for (const auto& arg : options.sbatch_args) groups.push_back(sbatch_option_group(arg));
  std::vector<std::string> out;
  for (const auto& line : generated)
    if (std::find(groups.begin(), groups.end(), sbatch_option_group(line)) == groups.end())
      out.push_back(line);
  out.insert(out.end(), options.sbatch_args.begin(), options.sbatch_args.end());
  return out;
}

// The #SBATCH lines of `generated` with the user's --sbatch-arg lines.
std::string directives(const std::vector<std::string>& generated, const SlurmOptions& options) {
  std::string out;
  for (const auto& line : with_user_options(generated, options)) out += "#SBATCH " + line + "\n";
  return out;
}

// --setup: the user's shell lines, before trainyard starts.
std::string setup_lines(const SlurmOptions& options) {
  std::string out;
  for (const auto& line : options.setup_lines) out += line + "\n";
  return out;
}

void common_options(std::vector<std::string>& lines, const SlurmOptions& options) {
  if (!options.partition.empty()) lines.push_back("--partition=" + options.partition);
  if (!options.account.empty()) lines.push_back("--account=" + options.account);
  if (!options.time.empty()) lines.push_back("--time=" + options.time);
}

}  // namespace

std::string sbatch_option_group(const std::string& arg) {
  std::string text = strip(arg);
  if (!text.starts_with("-")) return "";
  const bool long_form = text.starts_with("--");
  text = text.substr(long_form ? 2 : 1);
  std::string name = text.substr(0, text.find_first_of("= \t"));
  if (!long_form) {  // sbatch's short options
    static const std::map<std::string, std::string> kShort = {
        {"c", "cpus-per-task"}, {"G", "gpus"},    {"N", "nodes"},    {"t", "time"},
        {"p", "partition"},     {"A", "account"}, {"J", "job-name"}, {"o", "output"},
        {"a", "array"},         {"n", "ntasks"},  {"q", "qos"}};
    name = name.substr(0, 1);
    const auto it = kShort.find(name);
    return it == kShort.end() ? name : it->second;
  }
  // Ways to ask for GPUs: Slurm rejects a job that mixes --gres=gpu with --gpus-per-node.
  if (name == "gres" || name == "gpus" || name == "gpus-per-node" || name == "gpus-per-task")
    return "gpus";
  return name;
}

std::string array_script(const ArrayJob& array, int64_t submission_id, const SlurmOptions& options,
                         const std::string& exe, const std::string& folder) {
  const TaskShape& shape = array.shape;
  std::string s = "#!/bin/bash\n";
  s += fmt::format(
      "# Written by `trainyard submit --slurm` (submission {}, array {}): tasks {} to {} of "
      "tasks.json,\n# one run each. See docs/cluster.md.\n",
      submission_id, array.number, array.first_task, array.first_task + array.tasks - 1);
  std::vector<std::string> lines = {
      fmt::format("--job-name=trainyard-{}-{}", submission_id, array.number),
      fmt::format("--array=0-{}{}", array.tasks - 1,
                  options.max_parallel > 0 ? fmt::format("%{}", options.max_parallel) : ""),
      fmt::format("--nodes={}", shape.nodes), "--ntasks-per-node=1"};
  // One task per node starts the node's ranks itself (the launcher), as `trainyard run` does: 4
  // CPUs for each GPU rank (its loader's threads), 1 for each CPU rank.
  if (shape.cuda) lines.push_back(fmt::format("--gpus-per-node={}", shape.ranks_per_node));
  lines.push_back(fmt::format("--cpus-per-task={}", cpus_per_node(shape)));
  common_options(lines, options);
  lines.push_back(output_option(folder, "slurm-%A_%a.out"));
  lines.push_back("--open-mode=append");  // a requeued task's output follows its first
  lines.push_back("--requeue");
  // The warning before the time limit: the run checkpoints and the task requeues itself. One node:
  // to the batch shell, which is the task (exec); several: to every node's task (srun's step).
  lines.push_back(
      fmt::format("--signal={}USR1@{}", shape.nodes > 1 ? "" : "B:", options.signal_seconds));
  s += directives(lines, options);
  s += setup_lines(options);
  const std::string task =
      fmt::format("{} slurm-task --submission {} --task $(({} + SLURM_ARRAY_TASK_ID))",
                  shell_quote(exe), shell_quote(folder), array.first_task);
  // srun no longer inherits --cpus-per-task from the job (Slurm 22.05): said again, or every rank
  // of a node would share one CPU under CPU binding.
  s += shape.nodes > 1 ? "exec srun --ntasks-per-node=1 --cpus-per-task=\"$SLURM_CPUS_PER_TASK\" "
                         "--kill-on-bad-exit=1 " +
                             task + "\n"
                       : "exec " + task + "\n";
  return s;
}

int cpus_per_node(const TaskShape& shape) { return (shape.cuda ? 4 : 1) * shape.ranks_per_node; }

namespace {

// sbatch's options that srun lacks or takes otherwise, and those that would take the task's
// standard output (the rank's reports) away from srun: a trial's srun leaves them out (the study's
// job keeps them).
bool sbatch_only(const std::string& group) {
  static const std::set<std::string> kOnly = {"array",
                                              "requeue",
                                              "no-requeue",
                                              "wrap",
                                              "export-file",
                                              "get-user-env",
                                              "output",
                                              "error",
                                              "open-mode",
                                              "input",
                                              "parsable",
                                              "dependency",
                                              "kill-on-invalid-dep",
                                              "wait",
                                              "ignore-pbs",
                                              "batch",
                                              "signal"};
  return kOnly.count(group) > 0;
}

// The resources a job asks for: a study's job whose trials are jobs of their own takes none of the
// user's (it would hold them idle), only one CPU.
bool asks_for_resources(const std::string& group) {
  static const std::set<std::string> kResources = {
      "gpus",  "cpus-per-task", "cpus-per-gpu",    "mem",      "mem-per-cpu", "mem-per-gpu",
      "nodes", "ntasks",        "ntasks-per-node", "exclusive"};
  return kResources.count(group) > 0;
}

}  // namespace

std::vector<std::string> trial_job_options(const TaskShape& shape, const SlurmOptions& options) {
  std::vector<std::string> lines = {"--nodes=1", "--ntasks=1",
                                    fmt::format("--cpus-per-task={}", cpus_per_node(shape))};
  if (shape.cuda) lines.push_back(fmt::format("--gpus-per-node={}", shape.ranks_per_node));
  common_options(lines, options);
  // srun's command line: "--mem 64G" (as an #SBATCH line takes it) is two arguments.
  std::vector<std::string> argv;
  for (const std::string& option : with_user_options(lines, options)) {
    if (sbatch_only(sbatch_option_group(option))) continue;
    const std::string text = strip(option);
    const size_t space = text.find_first_of(" \t");
    if (space == std::string::npos || text.find('=') < space) {
      argv.push_back(text);
    } else {
      argv.push_back(text.substr(0, space));
      argv.push_back(strip(text.substr(space)));
    }
  }
  return argv;
}

int cpus_per_task_of(const std::vector<std::string>& argv, int otherwise) {
  int cpus = otherwise;
  for (size_t i = 0; i < argv.size(); ++i) {
    if (sbatch_option_group(argv[i]) != "cpus-per-task") continue;
    const size_t equals = argv[i].find('=');
    const std::string value = equals != std::string::npos ? argv[i].substr(equals + 1)
                              : i + 1 < argv.size()       ? argv[i + 1]
                                                          : "";
    try {
      cpus = std::max(1, std::stoi(value));
    } catch (const std::exception&) {
      // Not a count: srun says so when it starts the job.
    }
  }
  return cpus;
}

CancelledJobs cancel_jobs_named(const std::string& name, int patience_seconds) {
  // The jobs listed under the name; nullopt when squeue did not answer (then none is known gone).
  auto listed = [&]() -> std::optional<std::vector<std::string>> {
    const CommandOutput jobs = run_program({"squeue", "--me", "-h", "--name=" + name, "-o", "%i"});
    if (jobs.exit_code != 0) return std::nullopt;
    std::vector<std::string> ids;
    for (const std::string& line : split(strip(jobs.out), '\n'))
      if (!strip(line).empty()) ids.push_back(strip(line));
    return ids;
  };
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(patience_seconds);
  std::optional<std::vector<std::string>> first = listed();
  while (!first) {
    if (std::chrono::steady_clock::now() > deadline) return {.ids = {}, .gone = false};
    std::this_thread::sleep_for(std::chrono::seconds(1));
    first = listed();
  }
  CancelledJobs cancelled{.ids = *first};
  if (cancelled.ids.empty()) return cancelled;
  run_program({"scancel", "--me", "--name=" + name});
  for (auto now = listed(); !now || !now->empty(); now = listed()) {
    if (std::chrono::steady_clock::now() > deadline) {
      cancelled.gone = false;
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
  }
  return cancelled;
}

nlohmann::json SlurmStudy::to_json() const {
  return {{"experiment", experiment},
          {"variant", variant},
          {"study_hash", study_hash},
          {"file", file},
          {"file_sha256", file_sha256},
          {"overrides", overrides},
          {"plugins", plugins},
          {"max_runs", max_runs},
          {"db", db},
          {"nodes", shape.nodes},
          {"ranks_per_node", shape.ranks_per_node},
          {"cuda", shape.cuda},
          {"max_requeues", max_requeues},
          {"trial_job", trial_job},
          {"setup_lines", setup_lines},
          {"job_id", job_id}};
}

SlurmStudy SlurmStudy::from_json(const nlohmann::json& j) {
  SlurmStudy study;
  auto small = [&](const char* key) {  // a count: nodes, ranks, requeues
    const int64_t n = integer_from_json(j.at(key));
    if (n < 0 || n > 1 << 20) throw nlohmann::json::type_error::create(302, key, &j);
    return static_cast<int>(n);
  };
  study.experiment = j.at("experiment").get<std::string>();
  study.variant = j.at("variant").get<std::string>();
  study.study_hash = j.at("study_hash").get<std::string>();
  study.file = j.at("file").get<std::string>();
  study.file_sha256 = j.at("file_sha256").get<std::string>();
  study.overrides = j.at("overrides").get<std::vector<std::string>>();
  study.plugins = j.at("plugins").get<std::vector<std::string>>();
  study.max_runs = integer_from_json(j.at("max_runs"));
  study.db = j.at("db").get<std::string>();
  study.shape = {.nodes = small("nodes"),
                 .ranks_per_node = small("ranks_per_node"),
                 .cuda = j.at("cuda").get<bool>()};
  study.max_requeues = small("max_requeues");
  // Absent from a studies.json an earlier version wrote: its trials train inside the study's job.
  study.trial_job = j.value("trial_job", std::vector<std::string>());
  study.setup_lines = j.value("setup_lines", std::vector<std::string>());
  study.job_id = j.at("job_id").get<std::string>();
  return study;
}

std::vector<SlurmStudy> read_slurm_studies(const std::string& folder) {
  const std::filesystem::path path = std::filesystem::path(folder) / "studies.json";
  std::ifstream file(path);
  if (!file) return {};
  const nlohmann::json list = nlohmann::json::parse(file, nullptr, /*allow_exceptions=*/false);
  std::vector<SlurmStudy> studies;
  try {
    if (!list.is_array()) throw nlohmann::json::type_error::create(302, "not a list", &list);
    for (const nlohmann::json& entry : list) studies.push_back(SlurmStudy::from_json(entry));
  } catch (const nlohmann::json::exception& e) {
    throw UserError(fmt::format("{} is not a list of studies `trainyard submit` wrote: {}",
                                path.string(), e.what()));
  }
  return studies;
}

void write_slurm_studies(const std::string& folder, const std::vector<SlurmStudy>& studies) {
  nlohmann::json list = nlohmann::json::array();
  for (const SlurmStudy& study : studies) list.push_back(study.to_json());
  write_file_atomically((std::filesystem::path(folder) / "studies.json").string(),
                        list.dump(1) + "\n");
}

std::string study_script(int number, int64_t submission_id, const SlurmStudy& study,
                         const SlurmOptions& options, const std::string& exe,
                         const std::string& folder) {
  const TaskShape& shape = study.shape;
  std::string s = "#!/bin/bash\n";
  s += fmt::format(
      "# Written by `trainyard submit --slurm` (submission {}): study {} of studies.json, the\n"
      "# search of {}/{}, {} into its own database. See docs/search.md.\n",
      submission_id, number, study.experiment, study.variant,
      study.trial_job.empty() ? "trained whole by this job"
                              : "its trials each trained in a Slurm job of their own, asked for by "
                                "this job,\n#");
  std::vector<std::string> lines = {
      fmt::format("--job-name=trainyard-{}-study{}", submission_id, number), "--nodes=1",
      "--ntasks-per-node=1"};
  SlurmOptions own = options;
  if (!study.trial_job.empty()) {
    lines.push_back("--cpus-per-task=1");  // it proposes, decides and waits: the trials train apart
    std::erase_if(own.sbatch_args, [](const std::string& arg) {
      return asks_for_resources(sbatch_option_group(arg));
    });
  } else {
    // As an array task of the same shape: the trials' workers start inside this one task.
    if (shape.cuda) lines.push_back(fmt::format("--gpus-per-node={}", shape.ranks_per_node));
    lines.push_back(fmt::format("--cpus-per-task={}", cpus_per_node(shape)));
  }
  common_options(lines, options);
  lines.push_back(output_option(folder, fmt::format("slurm-study{}-%j.out", number)));
  lines.push_back("--open-mode=append");
  lines.push_back("--requeue");
  lines.push_back(fmt::format("--signal=B:USR1@{}", options.signal_seconds));
  s += directives(lines, own);
  s += setup_lines(options);
  s += fmt::format("exec {} slurm-study --submission {} --study {}\n", shell_quote(exe),
                   shell_quote(folder), number);
  return s;
}

std::string report_script(int64_t submission_id, const SlurmOptions& options,
                          const std::string& exe, const std::string& folder,
                          const std::vector<std::string>& after) {
  std::string s = "#!/bin/bash\n";
  s += fmt::format(
      "# Written by `trainyard submit --slurm` (submission {}): the report, after every run.\n"
      "# It reads a private copy of the database's snapshot, taken in from the runs' records: a\n"
      "# compute node never writes the database itself.\n",
      submission_id);
  std::vector<std::string> lines = {fmt::format("--job-name=trainyard-{}-report", submission_id),
                                    "--nodes=1", "--ntasks=1", "--cpus-per-task=1"};
  if (!after.empty()) lines.push_back("--dependency=afterany:" + join(after, ":"));
  lines.push_back("--kill-on-invalid-dep=no");
  common_options(lines, options);
  lines.push_back(output_option(folder, "slurm-report-%j.out"));
  // The runs' --sbatch-arg lines are theirs (memory, GPUs, QOS): the report asks for one CPU.
  s += directives(lines, SlurmOptions{});
  s += "set -euo pipefail\n";
  s += setup_lines(options);
  s += "scratch=$(mktemp -d \"${TMPDIR:-/tmp}/trainyard-report.XXXXXX\")\n";
  s += "trap 'rm -rf \"$scratch\"' EXIT\n";
  s += "cp " + shell_quote(folder + "/snapshot.db") + " \"$scratch/trainyard.db\"\n";
  s += shell_quote(exe) + " report --db \"$scratch/trainyard.db\" -o " +
       shell_quote(folder + "/report.html") + "\n";
  return s;
}

int max_array_size_of(const std::string& show_config) {
  std::istringstream lines(show_config);
  std::string line;
  while (std::getline(lines, line)) {
    const auto parts = split(line, '=');
    if (parts.size() == 2 && strip(parts[0]) == "MaxArraySize") {
      try {
        return std::stoi(strip(parts[1]));
      } catch (...) {
      }
    }
  }
  return 1001;
}

bool SlurmJobState::active() const {
  static const std::set<std::string> kActive = {
      "PENDING",   "RUNNING",   "REQUEUED",      "REQUEUE_HOLD", "REQUEUE_FED",
      "RESIZING",  "SUSPENDED", "CONFIGURING",   "COMPLETING",   "STOPPED",
      "SIGNALING", "STAGE_OUT", "RESV_DEL_HOLD", "SPECIAL_EXIT", "POWER_UP_NODE"};
  return kActive.count(state) > 0;
}

namespace {

std::map<std::string, SlurmJobState> parse_rows(const std::string& output, bool sacct) {
  std::map<std::string, SlurmJobState> jobs;
  std::istringstream lines(output);
  std::string line;
  while (std::getline(lines, line)) {
    const auto fields = split(strip(line), '|');
    if (fields.size() < 2 || fields[0].empty()) continue;
    const std::string id = strip(fields[0]);
    if (id.find('[') != std::string::npos) continue;  // an array's unsplit pending tasks
    SlurmJobState job;
    job.state = split(strip(fields[1]), ' ').front();  // "CANCELLED by 0"
    if (sacct) {
      if (fields.size() > 2) job.exit_code = strip(fields[2]);
      if (fields.size() > 3) job.reason = strip(fields[3]);
    } else if (fields.size() > 2) {
      job.reason = strip(fields[2]);
    }
    jobs[id] = job;
  }
  return jobs;
}

}  // namespace

std::map<std::string, SlurmJobState> parse_squeue(const std::string& output) {
  return parse_rows(output, false);
}
std::map<std::string, SlurmJobState> parse_sacct(const std::string& output) {
  return parse_rows(output, true);
}

std::optional<SlurmStates> query_slurm(const std::vector<std::string>& job_ids,
                                       const std::vector<std::string>& users) {
  // All of the submitters' jobs in one call: squeue -j fails outright when one id is no longer
  // known.
  std::vector<std::string> argv = {"squeue", "-h", "-r", "-o", "%i|%T|%r"};
  if (users.empty())
    argv.push_back("--me");
  else
    argv.push_back("--user=" + join(users, ","));
  const CommandOutput queue = run_program(argv);
  if (queue.exit_code != 0) return std::nullopt;
  SlurmStates states;
  states.jobs = parse_squeue(queue.out);
  std::set<std::string> arrays;  // sacct by array job: "1234" covers 1234_0, 1234_1, ...
  for (const std::string& id : job_ids)
    if (!states.jobs.count(id)) arrays.insert(split(id, '_').front());
  if (arrays.empty()) {
    states.accounting = true;  // nothing to ask it
    return states;
  }
  const CommandOutput history =
      run_program({"sacct", "-n", "-P", "-X", "-o", "JobID,State,ExitCode,Reason", "-j",
                   join(std::vector<std::string>(arrays.begin(), arrays.end()), ",")});
  states.accounting = history.exit_code == 0;
  if (states.accounting)
    for (auto& [id, job] : parse_sacct(history.out))
      if (!states.jobs.count(id)) states.jobs[id] = job;
  return states;
}

std::pair<FailureClass, std::string> failure_from_slurm(const std::optional<SlurmJobState>& job,
                                                        bool started, bool accounting) {
  const std::string state = job ? job->state : "";
  if (state == "OUT_OF_MEMORY")
    return {FailureClass::out_of_memory,
            "Slurm ended its job: out of memory (the job's memory limit); ask for more with "
            "--sbatch-arg=--mem=..."};
  if (state == "NODE_FAIL" || state == "BOOT_FAIL")
    return {FailureClass::crashed,
            "its node failed (Slurm: " + state + "); `trainyard submit` again continues it"};
  if (state == "TIMEOUT")
    return {
        FailureClass::timed_out,
        "Slurm ended its job at its time limit before the run checkpointed and requeued itself; "
        "give a longer --time (or check that the cluster delivers --signal)"};
  if (state == "CANCELLED" || state == "PREEMPTED" || state == "DEADLINE")
    return {started ? FailureClass::interrupted : FailureClass::not_started,
            fmt::format("its Slurm job was {}{}", lower(state),
                        started ? "; `trainyard submit` again continues it from its checkpoint"
                                : " before it started")};
  if (state == "FAILED")
    return {FailureClass::crashed, fmt::format("its Slurm job failed (exit code {}) before the run "
                                               "said how it ended",
                                               job->exit_code)};
  if (!state.empty())
    return {FailureClass::error,
            fmt::format("its Slurm job ended ({}) without the run saying how it ended", state)};
  if (!started)
    return {FailureClass::not_started,
            "its Slurm job ended before the run started (cancelled?); `trainyard submit` again "
            "submits it"};
  return {FailureClass::crashed,
          fmt::format("its Slurm job ended without the run saying how ({}); `trainyard submit` "
                      "again continues it from its checkpoint",
                      accounting ? "Slurm no longer knows the job"
                                 : "killed, out of memory or a node failure: with accounting off, "
                                   "Slurm cannot say which")};
}

namespace {

// The last lines of a run's log, for a failure its task could not report itself.
std::string log_tail(const std::string& stem) {
  std::ifstream file(stem + ".log");
  if (!file) return "";
  std::vector<std::string> lines;
  std::string line;
  while (std::getline(file, line)) {
    lines.push_back(line);
    if (lines.size() > 8) lines.erase(lines.begin());
  }
  return lines.empty() ? "" : "\nlast lines of " + stem + ".log:\n" + join(lines, "\n");
}

}  // namespace

std::vector<std::string> submitters(Store& store) {
  std::set<std::string> users;
  for (const SubmissionRecord& submission : store.submissions())
    if (!submission.user.empty()) users.insert(submission.user);
  return {users.begin(), users.end()};
}

namespace {

bool unfinished(const std::optional<RunRecord>& run) {
  return run && (run->status == RunStatus::queued || run->status == RunStatus::running);
}

// A study's own database (SlurmStudy), taken in when nobody trains into it (its job holds the
// database's batch lock while it runs) and it changed since this store last took it in: a file
// beside the store (slurm/collected/, named by the study database's path) holds its state then.
// Beside the store, not the study: the report job takes it into a copy of its own.
void take_in_study(Store& store, const SlurmStudy& study, CollectSummary& summary) {
  if (!std::filesystem::exists(study.db)) return;  // its job has not started
  Sha256 name;
  name.update(study.db);
  const std::filesystem::path marker = std::filesystem::absolute(store.path()).parent_path() /
                                       "slurm" / "collected" / name.hex().substr(0, 16);
  auto state = [&] { return file_state(study.db) + " " + file_state(study.db + "-wal"); };
  std::ifstream last(marker);
  const std::string collected((std::istreambuf_iterator<char>(last)),
                              std::istreambuf_iterator<char>());
  if (collected == state()) return;
  std::optional<BatchLock> lock;
  try {
    lock.emplace(study.db);
  } catch (const UserError&) {
    return;  // its job trains into it now: taken in once it lets go
  }
  try {
    store.import_store(study.db);
    std::filesystem::create_directories(marker.parent_path());
    write_file_atomically(marker.string(), state());
    ++summary.studies;
  } catch (const std::exception& e) {
    summary.problems.push_back(fmt::format("study {}/{} ({}): not taken in: {}", study.experiment,
                                           study.variant, study.db, e.what()));
  }
}

}  // namespace

CollectSummary collect_slurm(Store& store) {
  CollectSummary summary;
  const std::vector<SlurmRunRecord> tasks = store.slurm_runs();
  // Slurm first, the records second: a task that ended before the question wrote its last record
  // before it ended, so it is read.
  // A task without a job id is being submitted (or its submit died before sbatch): `submit` ends
  // it or submits it again.
  std::vector<std::string> asked;
  for (const SlurmRunRecord& task : tasks)
    if (!task.job_id.empty() && unfinished(store.run(task.run_id))) asked.push_back(task.job_id);
  std::optional<SlurmStates> states;
  if (!asked.empty()) {
    states = query_slurm(asked, submitters(store));
    summary.slurm_unreachable = !states;
  }
  summary.states = states;
  for (const SlurmRunRecord& task : tasks) {
    const CollectedEvents events = collect_run_events(store, task);
    if (events.applied > 0) {
      ++summary.runs;
      summary.records += events.applied;
    }
    if (events.finished) ++summary.ended;
    if (!events.problem.empty()) summary.problems.push_back(events.problem);
    const std::optional<RunRecord> run = store.run(task.run_id);
    if (!states || !unfinished(run) ||
        std::find(asked.begin(), asked.end(), task.job_id) == asked.end())
      continue;
    const auto it = states->jobs.find(task.job_id);
    std::optional<SlurmJobState> job;
    if (it != states->jobs.end()) {
      if (it->second.active()) continue;
      job = it->second;
    }
    const bool started = !run->started_at.empty();
    auto [failure, message] = failure_from_slurm(job, started, states->accounting);
    const RunStatus status =
        failure == FailureClass::interrupted || failure == FailureClass::not_started
            ? RunStatus::interrupted
            : RunStatus::failed;
    store.end_run(task.run_id, status,
                  fmt::format("Slurm job {}: {}{}", task.job_id, message, log_tail(task.stem)),
                  failure);
    ++summary.ended;
  }
  for (const SubmissionRecord& submission : store.submissions())
    for (const SlurmStudy& study : read_slurm_studies(submission.folder))
      take_in_study(store, study, summary);
  return summary;
}

}  // namespace trainyard
