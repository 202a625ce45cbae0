// The results store: experiments, runs, per-epoch and final metrics, in one SQLite file.
//
// Who writes: the controller (`trainyard run`: the runs, epochs, heartbeats), `submit` (queued
// Slurm runs), `collect` (the array tasks' records; `runs`, `status` and `report` collect first,
// so they write too, unless the file cannot be written, when they read it as it is), `cancel` (a
// submission's mark) and `rm`. Workers and Slurm array tasks never open it: they report through
// the controller's pipe or a records file (db/run_events.h). The batch lock (runner/batch_lock.h)
// serialises what must not overlap — one `run` per database, `submit` beside it, and `rm`'s
// removal; every write is one SQLite transaction, and SQLite's lock (10 s busy wait) orders
// writers that take no batch lock (collect, cancel). The schema is versioned (PRAGMA
// user_version) and migrated forward on open; the journal is WAL so readers never block a writer.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "db/sqlite.h"

namespace trainyard {

enum class RunStatus { queued, running, completed, failed, interrupted, skipped };
const char* to_string(RunStatus status);
RunStatus parse_run_status(const std::string& text);

// Why a run did not complete, in classes a retry policy can act on. Transient classes (a rank
// killed by a signal, a collective or rendezvous that timed out) may succeed when tried again, from
// the run's checkpoint; bad input and out-of-memory will not.
enum class FailureClass {
  none,           // completed, or not ended yet
  bad_input,      // bad config, data, weights: exit code 2, the message says what to fix
  out_of_memory,  // CPU or CUDA allocation failed
  crashed,        // a rank died from a signal (SIGKILL also comes from the kernel's OOM killer)
  timed_out,      // a collective or the rendezvous between ranks timed out
  interrupted,    // Ctrl-C, SIGTERM, the batch's --time-limit
  not_started,    // the batch stopped before the run's turn
  error,          // anything else: a bug, a failed assertion
};
const char* to_string(FailureClass failure);
FailureClass parse_failure_class(const std::string& text);  // "" -> none
bool is_transient(FailureClass failure);

struct ExperimentRecord {
  int64_t id = 0;
  std::string name;
  std::string file;
  std::string description;
  std::string report_yaml;  // the experiment's `report:` section, resolved
  std::string created_at;
};

// What the controller knows about where a run executes.
struct RunEnvironment {
  std::string git_revision{};
  std::string torch_version{};
  std::string device_name{};
  std::string log_path{};
};

struct RunRecord {
  int64_t id = 0;
  int64_t experiment_id = 0;
  std::string experiment;
  std::string variant;
  int64_t position = 0;  // order of the variant in its experiment
  std::string config_yaml;
  std::string config_hash;
  RunStatus status = RunStatus::queued;
  std::string precision;
  std::string strategy;
  int64_t devices = 1;
  std::string queued_at, started_at, ended_at;
  std::string host;  // where the controller that queued and ran it lives
  int64_t pid = 0;
  RunEnvironment environment;
  std::string error;
  std::string uid;  // unique across databases: the run's files are named by it ("" before schema 3)
  int64_t resumes = 0;  // times it was continued from its checkpoint after an interruption
  FailureClass failure = FailureClass::none;
  std::string heartbeat_at;  // when its controller last said it was alive (while running)
  std::string progress;      // its last progress, as JSON (RunProgress), while running
  int64_t repeat = 0;        // which repeat of its variant (sweep.repeats), from 0
};

// A running run's controller records a heartbeat at least this often; `trainyard status` counts a
// run whose heartbeat is older than kStaleHeartbeatSeconds as interrupted (its controller died
// without a word: SIGKILL, power lost).
inline constexpr int kHeartbeatSeconds = 10;
inline constexpr int kStaleHeartbeatSeconds = 60;

// What `trainyard status` shows of a running run, recorded by the controller as it trains.
struct RunProgress {
  int64_t epoch = 0;  // 1-based, of epochs
  int64_t epochs = 0;
  int64_t step = 0;  // optimizer steps, of total_steps
  int64_t total_steps = 0;
  double loss = 0;
  double samples_per_s = 0;
  int64_t tokens_per_sample = 0;  // a language model's context (0: a classifier's samples)
  double eta_seconds = 0;         // of the run
  // train.micro_batch_size: the micro-batch its steps are split into now (0: whole batches), and
  // the out-of-memory events that halved it.
  int64_t micro_batch = 0;
  int64_t oom_events = 0;
  std::string to_json() const;
  static RunProgress from_json(const std::string& text);  // zeros when empty or not JSON
};

// Where and when a run (re)started or ended, when that is not this process now: a Slurm task's
// records, taken in later by `trainyard collect`. Empty fields: this host, this process, now.
struct RunPlace {
  std::string host{};
  int64_t pid = 0;
  std::string at{};  // utc_now() format
};

// One `trainyard submit --slurm`: its folder (sbatch scripts, task list, Slurm's output files) and
// the job that writes its report after the runs.
struct SubmissionRecord {
  int64_t id = 0;
  std::string folder;
  std::string created_at;
  std::string host;
  std::string report_job;  // Slurm job id, "" before it was submitted
  bool cancelled = false;
  std::string user{};  // who submitted it: whose jobs squeue lists
};

// A run trained by a Slurm array task: its job ("1234_7"), where its files start, and how much of
// its records file the store has taken in.
struct SlurmRunRecord {
  int64_t run_id = 0;
  int64_t submission_id = 0;
  std::string job_id;  // "" while its array is being submitted
  std::string stem;
  int64_t events_offset = 0;
  std::string events_path() const { return stem + ".events.jsonl"; }
};

struct EpochRow {
  int64_t epoch = 0;
  std::map<std::string, double> values;
};

// What a run recorded at one optimizer step: its loss at progress lines (train.log_every), and its
// validation's figures where it validated (each epoch's end, train.val_every_steps), each with
// elapsed_seconds, its training time so far (validation included).
struct StepRow {
  int64_t step = 0;
  std::map<std::string, double> values;
};

// A study of sweep.search (runner/search/study.h): which experiment, which variant it searches,
// and its identity (its settings and the variant's configuration: edit either, and it is another).
struct StudyKey {
  std::string experiment, study, study_hash;
};

// One trial: its values (a JSON list, one number per parameter), as words ("lr=0.001 ..."), its
// run, and how far it trained with its figure there (none: it failed).
struct StudyTrialRow {
  int64_t trial = 0;
  std::string values;
  std::string settings;
  std::string config_hash;
  int64_t run_id = 0;
  int64_t epochs = 0;
  std::optional<double> figure{};
};

// A schedule's decision, in the study's order (`decision`): the figures at a rung's epoch (JSON
// [[trial, figure or null], ...]) and the trials that went on (JSON [trial, ...]). Successive
// halving decides a rung's cohort at once (decision = rung); asha and median decide one trial
// (`trial`): asha sends it on, median lets it go on or pauses it (promoted empty).
struct StudyDecisionRow {
  int64_t decision = 0;
  std::optional<int64_t> trial{};
  int64_t rung = 0;
  int64_t epochs = 0;
  std::string evidence;
  std::string promoted;
  std::string decided_at{};
};

// How a study ended: its best trial, or none when every trial of its last rung failed or diverged
// (then no figure, values or settings, and nothing to confirm).
struct StudyOutcomeRow {
  std::optional<int64_t> best_trial{};
  std::optional<double> figure{};
  std::string values{};  // the best trial's (a JSON list)
  std::string settings{};
};

// Where a study stands (`trainyard status`): trials recorded, rungs decided (with the trials
// the last decision promoted), and its best trial's settings once it has ended.
struct StudyProgress {
  StudyKey key;
  int64_t trials = 0;
  int64_t decisions = 0;
  std::string last_promoted{};  // JSON [trial, ...] of the last decision
  std::optional<std::string> best{};
  int64_t training = 0;  // trials whose run is queued or running now  // the outcome's settings
};

// The fields of a run that do not change once it is queued.
struct QueuedRun {
  std::string variant;
  int64_t position = 0;
  std::string config_yaml;
  std::string config_hash;
  std::string precision;
  std::string strategy;
  int64_t devices = 1;
  int64_t repeat = 0;
  // The resolved config flat: dotted key -> value as YAML text ("train.epochs" -> "3").
  std::map<std::string, std::string> params{};
};

class Store {
 public:
  static constexpr int kSchemaVersion = 9;

  // Opens (creating if needed) and migrates the database at `path`. The folder must exist.
  // sql::Access::read_only reads an existing database as it is, writing nothing (a read-only file
  // or file system); it must have this version's schema, as nothing can migrate it.
  explicit Store(const std::string& path, sql::Access access = sql::Access::read_write);
  bool read_only() const { return read_only_; }

  int schema_version();

  // Creates the experiment or updates its file, description and report settings.
  int64_t upsert_experiment(const std::string& name, const std::string& file,
                            const std::string& description, const std::string& report_yaml);
  std::optional<ExperimentRecord> find_experiment(const std::string& name);
  // The experiment called `name`; UserError naming the database, a "did you mean" and the
  // experiments it has when there is none (what `runs -e` and `report -e` say alike).
  ExperimentRecord experiment_named(const std::string& name);
  std::vector<ExperimentRecord> experiments();

  // The newest completed run of `experiment_id` with this config hash, if any.
  std::optional<int64_t> find_completed_run(int64_t experiment_id, const std::string& config_hash);

  // An interrupted run queued again by this process, its error cleared. `trainyard run` takes it
  // from Slurm (its Slurm task record goes); `submit` keeps that record (`for_slurm`), so what was
  // taken in of its records file stays taken in.
  void requeue_run(int64_t run_id, bool for_slurm = false);
  // A requeued run running again from where it stopped: `running`, its resume count one up. Its
  // started_at, log and files stay those of its first start.
  void resume_run(int64_t run_id, const RunPlace& place = {});
  // Queues a run with a fresh unique id (RunRecord::uid) and its flat params, in one transaction.
  int64_t queue_run(int64_t experiment_id, const QueuedRun& run);
  std::map<std::string, std::string> params(int64_t run_id);
  void start_run(int64_t run_id, const RunEnvironment& environment, const RunPlace& place = {});
  // A NaN figure (a diverged loss) is left out, here and in complete_run: SQLite cannot hold NaN
  // in a REAL (it becomes NULL). Infinities are kept.
  void record_epoch(int64_t run_id, int64_t epoch, const std::map<std::string, double>& values);
  // A step's figures (StepRow), merged into what the step has: a run that continues from its
  // checkpoint records the steps after it again, over the ones it recorded before.
  void record_step(int64_t run_id, int64_t step, const std::map<std::string, double>& values);
  void record_attributes(int64_t run_id, const std::map<std::string, std::string>& attributes);
  std::map<std::string, std::string> attributes(int64_t run_id);
  // Final metrics and status `completed`, in one transaction.
  void complete_run(int64_t run_id, const std::map<std::string, double>& metrics,
                    const std::string& at = "");
  void end_run(int64_t run_id, RunStatus status, const std::string& error,
               FailureClass failure = FailureClass::none, const std::string& at = "");
  // The controller's heartbeat for a running run, with its progress when it has any.
  void record_heartbeat(int64_t run_id, const std::optional<RunProgress>& progress,
                        const std::string& at = "");
  // A Slurm task that requeued itself: its run waits `queued` for the job to start again.
  void mark_requeued(int64_t run_id, const std::string& at = "");

  // Slurm submissions (`trainyard submit --slurm`) and the runs their array tasks train.
  int64_t create_submission();
  void set_submission_folder(int64_t submission_id, const std::string& folder);
  void set_report_job(int64_t submission_id, const std::string& job_id);
  void mark_submission_cancelled(int64_t submission_id);
  std::vector<SubmissionRecord> submissions();
  // Run `run_id` is trained by Slurm job `job_id` of a submission; a run submitted again keeps
  // what was taken in of its records file.
  void assign_slurm_job(int64_t run_id, int64_t submission_id, const std::string& job_id,
                        const std::string& stem);
  std::vector<SlurmRunRecord> slurm_runs();
  std::optional<SlurmRunRecord> slurm_run(int64_t run_id);
  void set_events_offset(int64_t run_id, int64_t offset);
  // Copies the database, consistent, into a new file (VACUUM INTO): what a report job reads.
  void snapshot_to(const std::string& path);
  // Runs one group of changes in one transaction: all of them are recorded, or none.
  template <class Changes>
  void in_transaction(Changes&& changes) {
    sql::Transaction transaction(db_);
    changes();
    transaction.commit();
  }

  // Runs left `queued` or `running` by a process of this host that no longer exists are marked
  // `interrupted` (not a Slurm task's: Slurm says what became of those). Returns how many.
  // (`trainyard status` shows a run of another host whose heartbeat went stale as interrupted,
  // without writing.)
  int mark_orphaned_runs_interrupted();

  // Runs, oldest first; of one experiment when `experiment` is not empty.
  std::vector<RunRecord> runs(const std::string& experiment = "");
  std::optional<RunRecord> run(int64_t run_id);
  // A run marked running that nobody runs any more, which `status`, `runs` and `rm` take as
  // interrupted: its controller is gone (controller_gone) or its heartbeat is over
  // kStaleHeartbeatSeconds old (a controller that died without a word, on any host). Never a
  // Slurm task's run: Slurm says what became of it.
  bool is_lost(const RunRecord& run);
  // Removes the runs and everything recorded of them (metrics, attributes, params), in one
  // transaction; an experiment left without runs goes too. Their files are the caller's.
  void remove_runs(const std::vector<int64_t>& run_ids);
  std::map<std::string, double> final_metrics(int64_t run_id);
  std::vector<EpochRow> epoch_metrics(int64_t run_id);
  std::vector<StepRow> step_metrics(int64_t run_id);  // by step

  // Studies (db/store_study.cpp). Recording again replaces: a study continued after a kill
  // records what it records again, the same.
  void record_study_trial(const StudyKey& key, const StudyTrialRow& row);
  void record_study_decision(const StudyKey& key, const StudyDecisionRow& row);
  void record_study_outcome(const StudyKey& key, const StudyOutcomeRow& row);
  void forget_study_outcome(const StudyKey& key);                // the study is searching again
  std::vector<StudyTrialRow> study_trials(const StudyKey& key);  // by trial
  std::vector<StudyDecisionRow> study_decisions(const StudyKey& key);  // in order
  std::optional<StudyOutcomeRow> study_outcome(const StudyKey& key);
  std::vector<StudyProgress> study_progress();  // every study of the store
  // The study and trial run `run_id` trained (the first, when several share it); nullopt: none.
  std::optional<std::pair<StudyKey, StudyTrialRow>> study_trial_of(int64_t run_id);

  // Takes in another database's runs (matched by uid: a run here already is replaced, figures
  // and all), their experiments (by name) and its studies (replaced whole), in one transaction;
  // returns the runs taken in (db/store_import.cpp). How a study trained by a Slurm job in its
  // own database joins this one. Throws when the other has another schema version.
  int import_store(const std::string& other_path);

  const std::string& path() const { return db_.path(); }

 private:
  void migrate();
  sql::Database db_;
  bool read_only_ = false;
};

// A study's trial paused at a rung by successive halving: `interrupted`, its error beginning with
// kPausedError ("paused after epoch 3 by ..."); a promotion continues it, nothing else does.
inline constexpr const char* kPausedError = "paused after epoch";
bool is_paused(const RunRecord& run);

// Where a run's files start: its log path without ".log"
// (logs/<experiment>/run-<id>-<variant>-<uid>), to which ".yaml", "-rank<R>.log", ".safetensors",
// ".state" are added; "" before it started.
std::string run_files_stem(const RunRecord& run);

// A run's controller was of this host and its process is gone: known at once, without waiting for
// its heartbeat to go stale.
bool controller_gone(const RunRecord& run);

}  // namespace trainyard
