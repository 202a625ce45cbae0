// Slurm, through its commands' parsable output (sbatch --parsable, squeue, sacct, scontrol,
// scancel) rather than libslurm, whose C API changes with every release. What `trainyard submit
// --slurm` writes (one sbatch script per job array, one for the report job), how it asks Slurm what
// became of the jobs, and `collect`: every Slurm run's records taken into the store on this host.
//
// A run is one array task. Its task trains it with the launcher, as `trainyard run` would, and
// writes its records to <stem>.events.jsonl (db/run_events.h); nothing on a compute node opens the
// database. See docs/cluster.md.
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/process.h"  // run_program, shell_quote: what the Slurm calls are made with
#include "db/store.h"

namespace trainyard {

// `trainyard submit`'s options that shape the jobs.
struct SlurmOptions {
  std::string partition{};
  std::string time{};  // --time, as Slurm takes it ("4:00:00", "1-00:00:00")
  std::string account{};
  int max_parallel = 0;   // each array's %N throttle; 0: none
  int gpus_per_node = 0;  // 0: a CUDA run asks for runtime.devices GPUs on its node
  int nodes = 1;          // nodes of a run whose strategy trains on several processes
  // Passed through, one #SBATCH line each; one that sets an option the script sets itself (or an
  // equivalent: --gres for --gpus-per-node) replaces that line (sbatch_option_group).
  std::vector<std::string> sbatch_args{};
  // Shell lines run before trainyard in every script (`module load gcc/13`): --setup.
  std::vector<std::string> setup_lines{};
  int max_requeues = 3;      // times a task requeues itself after Slurm's warning signal
  int signal_seconds = 120;  // the warning (SIGUSR1) this long before the time limit
};

// What one array task needs of its run (every run of an array has the same shape).
struct TaskShape {
  int nodes = 1;
  int ranks_per_node = 1;  // runtime.devices
  bool cuda = false;
  bool operator==(const TaskShape&) const = default;
  bool operator<(const TaskShape& other) const {
    return std::tie(nodes, ranks_per_node, cuda) <
           std::tie(other.nodes, other.ranks_per_node, other.cuda);
  }
};

// One job array: tasks [first_task, first_task + tasks) of the submission's task list.
struct ArrayJob {
  int number = 0;  // 0, 1, ... within the submission
  int first_task = 0;
  int tasks = 0;
  TaskShape shape;
};

// Groups the submission's tasks (in order, by shape) into arrays of at most `max_array_size`
// tasks; `order` receives the task indices in the order the arrays cover them.
std::vector<ArrayJob> plan_arrays(const std::vector<TaskShape>& shapes, int max_array_size,
                                  std::vector<int>& order);

// The sbatch script of an array. `exe`: the trainyard executable (the same path on every node);
// `folder`: the submission's folder, where Slurm's output files go.
// Which sbatch option an argument sets, with the equivalent ones as one: "--gres=gpu:4" and
// "--gpus-per-node=4" are both "gpus"; "-c 8" and "--cpus-per-task=8" are "cpus-per-task". ""
// when it is not an option.
std::string sbatch_option_group(const std::string& arg);

std::string array_script(const ArrayJob& array, int64_t submission_id, const SlurmOptions& options,
                         const std::string& exe, const std::string& folder);
// The CPUs a job of `shape` asks for on each node: 4 for each GPU rank (its loader's threads), 1
// for each CPU rank.
int cpus_per_node(const TaskShape& shape);
// The srun arguments of a study's trial in a Slurm job of its own (sweep.search.parallel; the
// launcher's SlurmJobLaunch): one node, one task with the trial's CPUs and GPUs, the submission's
// partition, account and time, and the user's --sbatch-arg lines (one replacing a generated one of
// the same option, "--mem 64G" as two arguments) but those srun lacks or that would take the
// task's output (--array, --requeue, --output, --open-mode, --dependency, --signal, ...).
std::vector<std::string> trial_job_options(const TaskShape& shape, const SlurmOptions& options);
// The CPUs a job's --cpus-per-task (or -c) in `argv` asks for; `otherwise` when none does.
int cpus_per_task_of(const std::vector<std::string>& argv, int otherwise);
// Cancels this user's Slurm jobs named `name` and waits until Slurm lists none, `patience_seconds`
// at most. A run's job left by a study's job that was killed (its srun with it) would otherwise
// train beside the run's next job, in the same files.
struct CancelledJobs {
  std::vector<std::string> ids;  // the jobs Slurm listed under the name
  bool gone = true;              // false: one was still listed when patience ran out
};
CancelledJobs cancel_jobs_named(const std::string& name, int patience_seconds);
// A study (sweep.search) submitted to Slurm: its trials are proposed from the results of those
// before them, so one job trains the whole study with `trainyard run`'s controller, its trials as
// worker processes inside the job's allocation, into a database of its own (`db`, on the shared
// file system: a compute node never writes the login node's database). The job holds that
// database's batch lock while it trains; `trainyard collect` takes it in (Store::import_store) once
// nobody holds it. A requeued or preempted job starts the same study again, which replays from its
// database (docs/search.md). Listed in the submission's studies.json, written by `trainyard
// submit` and read by `trainyard slurm-study` and collect.
struct SlurmStudy {
  std::string experiment{}, variant{}, study_hash{};
  std::string file{};         // the experiment file, absolute
  std::string file_sha256{};  // its bytes when submitted: a job refuses an edited file
  std::vector<std::string> overrides{}, plugins{};  // --set and --plugin, as given to submit
  int64_t max_runs = 0;
  std::string db{};  // the study's own database, absolute
  TaskShape shape{};
  int max_requeues = 3;
  // sweep.search.parallel > 1: the study's job trains no trial itself; each trial (and each
  // confirmation run) trains in a Slurm job of its own that it asks for with srun, with these
  // options (trial_job_options) and the --setup lines. Empty: every trial inside the study's job.
  std::vector<std::string> trial_job{};
  std::vector<std::string> setup_lines{};
  std::string job_id{};  // once submitted
  nlohmann::json to_json() const;
  static SlurmStudy from_json(const nlohmann::json& j);  // json::exception when it is not one
};
// The studies of the submission in `folder` (none when it has no studies.json); UserError when the
// file is not one `trainyard submit` wrote.
std::vector<SlurmStudy> read_slurm_studies(const std::string& folder);
void write_slurm_studies(const std::string& folder, const std::vector<SlurmStudy>& studies);

// The sbatch script of study `number` of the submission (one job, one node).
std::string study_script(int number, int64_t submission_id, const SlurmStudy& study,
                         const SlurmOptions& options, const std::string& exe,
                         const std::string& folder);

// The report job's script: the report from a private copy of the submission's snapshot of the
// database, taken in from the runs' records on the node (never the shared database itself).
// `after`: the arrays' job ids (--dependency=afterany: whatever became of them).
std::string report_script(int64_t submission_id, const SlurmOptions& options,
                          const std::string& exe, const std::string& folder,
                          const std::vector<std::string>& after);

// MaxArraySize from `scontrol show config` (1001, Slurm's default, when it does not say; 0: arrays
// are disabled on the cluster).
int max_array_size_of(const std::string& show_config);

// A job's state as Slurm tells it: "PENDING", "RUNNING", "COMPLETED", "FAILED", "OUT_OF_MEMORY",
// "TIMEOUT", "NODE_FAIL", "CANCELLED", "PREEMPTED", ...; the reason ("Resources",
// "JobArrayTaskLimit", "BeginTime") or exit code when it gives one.
struct SlurmJobState {
  std::string state;
  std::string reason{};
  std::string exit_code{};
  bool active() const;  // pending, running, requeued, suspended, completing: not over
};

// `squeue -h -r -o %i|%T|%r` and `sacct -n -P -X -o JobID,State,ExitCode,Reason` output, by job
// id ("1234_7"). sacct's "CANCELLED by 0" is "CANCELLED".
std::map<std::string, SlurmJobState> parse_squeue(const std::string& output);
std::map<std::string, SlurmJobState> parse_sacct(const std::string& output);

// The states of `job_ids` (array tasks, "1234_7") from one squeue call and, when accounting is on,
// one sacct call; `accounting` says whether sacct answered. Jobs Slurm no longer lists are absent.
// nullopt when squeue cannot be run (Slurm is not installed here, or its controller is down).
struct SlurmStates {
  std::map<std::string, SlurmJobState> jobs;
  bool accounting = false;
};
// `users`: whose jobs squeue lists (the submitters; empty: this user's).
std::optional<SlurmStates> query_slurm(const std::vector<std::string>& job_ids,
                                       const std::vector<std::string>& users = {});

// Who submitted the database's Slurm runs: whose jobs squeue is asked for.
std::vector<std::string> submitters(Store& store);

struct CollectSummary {
  int runs = 0;     // Slurm runs whose records moved
  int studies = 0;  // studies' databases taken in
  int records = 0;  // lines taken in
  int ended = 0;    // runs that ended among them, or were ended from Slurm's word
  std::vector<std::string> problems{};
  // What Slurm said of the unfinished runs' jobs (nullopt: none unfinished, or no Slurm here).
  std::optional<SlurmStates> states{};
  bool slurm_unreachable = false;  // asked, and squeue failed
};
// Takes every Slurm run's new records into the store; a run whose job Slurm no longer runs and
// that never said how it ended is ended from what Slurm says of the job (out of memory, node
// failure, time limit, cancelled; with accounting off: that it ended without a word).
CollectSummary collect_slurm(Store& store);

// The failure class and message of a run whose job ended without the run saying how.
std::pair<FailureClass, std::string> failure_from_slurm(const std::optional<SlurmJobState>& job,
                                                        bool started, bool accounting);

}  // namespace trainyard
