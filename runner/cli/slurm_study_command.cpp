// `trainyard slurm-study`: one study (sweep.search) of a Slurm submission, the whole of it in one
// job (runner/slurm.h, SlurmStudy). Its trials are proposed from the results of those before them,
// so they cannot be an array's independent tasks: the job runs `trainyard run`'s controller over
// the study's one variant, its trials as workers inside the job's allocation — or, with
// sweep.search.parallel, each in a Slurm job of its own that the controller asks for with srun
// (BatchPolicy::slurm_jobs) — into the study's own database. Requeued, preempted or killed, the job
// starts the same study again and it replays from that database to the same trials, decisions and
// best (docs/search.md); `trainyard collect` on the login node takes the database in once the job
// lets go of it.
//
// Signals as `trainyard slurm-task` takes them (slurm_job.h): Slurm's warning before the time
// limit stops the trial training now with a checkpoint and requeues the job; SIGTERM (scancel,
// preemption, `scontrol requeue`) stops it with a checkpoint, and Slurm requeues the job itself
// when it is preemption or a requeue.
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <thread>

#include <fmt/format.h>
#include <boost/program_options.hpp>

#include "common/files.h"
#include "common/process.h"
#include "common/text.h"
#include "components/builtin.h"
#include "runner/batch_lock.h"
#include "runner/cli/commands.h"
#include "runner/cli/options.h"
#include "runner/cli/slurm_job.h"
#include "runner/controller.h"
#include "runner/search/study.h"
#include "runner/slurm.h"

namespace trainyard {

namespace po = boost::program_options;
namespace fs = std::filesystem;

namespace {

// The study's database lock, taken before the database is opened: only its holder opens it
// (SQLite's WAL must not be shared between hosts), and `trainyard collect` holds it for the moment
// it takes the database in. Waited for five minutes at most: longer is another job training the
// same study, or a lock a dead node left on a network file system that has not let it go yet.
BatchLock lock_study_database(const SlurmStudy& study) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::minutes(5);
  for (;;) {
    try {
      return BatchLock(study.db, "a second job of the same study must not train it too");
    } catch (const UserError&) {
      if (std::chrono::steady_clock::now() > deadline) throw;
      std::this_thread::sleep_for(std::chrono::milliseconds(500));
    }
  }
}

}  // namespace

int slurm_study_command(const std::vector<std::string>& args) {
  po::options_description options = command_options(
      "trainyard slurm-study --submission DIR --study N (run by a submission's sbatch script)");
  std::string folder;
  int index = -1;
  options.add_options()("submission", po::value(&folder), "the submission's folder")(
      "study", po::value(&index), "the study's index in studies.json");
  po::variables_map vm;
  if (!parse_command_line(args, options, {}, vm)) return kExitOk;
  take_slurm_signals();

  const std::vector<SlurmStudy> studies = read_slurm_studies(folder);
  if (index < 0 || index >= static_cast<int>(studies.size()))
    throw UserError(fmt::format(
        "slurm-study: {}/studies.json has no study {} (is the submission's folder on a file "
        "system every node sees?)",
        folder, index));
  const SlurmStudy& study = studies[index];
  // The trials are proposed from the file as it is when the job starts (and starts again after a
  // requeue): an edited file would make another study than the one submitted.
  if (file_sha256(study.file) != study.file_sha256)
    throw UserError(fmt::format(
        "slurm-study: {} changed since it was submitted; its study {}/{} would no longer be the "
        "one submitted. Put it back, or cancel the submission and submit the file again",
        study.file, study.experiment, study.variant));

  const std::vector<Experiment> experiments =
      load_checked_batch({study.file}, study.overrides, study.plugins, study.max_runs,
                         RunSelection{.only = {study.experiment + "/" + study.variant}});
  const std::string job = env_or("SLURM_JOB_ID", "?");
  const int restarts = std::atoi(env_or("SLURM_RESTART_COUNT", "0").c_str());
  fmt::print(stderr, "study {}/{} as Slurm job {} (restart {}) on {}, into {}\n", study.experiment,
             study.variant, job, restarts, host_name(), study.db);
  // The file's `extends:`, plugins and data make the study too: its key says whether they changed.
  for (const Experiment& experiment : experiments)
    for (const Study& searched : experiment.studies)
      if (const StudyKey key = study_key(experiment, searched); key.study_hash != study.study_hash)
        throw UserError(fmt::format(
            "slurm-study: the study {}/{} is no longer the one submitted (what its file extends, "
            "its plugins or its data changed since); put them back, or cancel the submission and "
            "submit again",
            study.experiment, study.variant));
  const BatchLock lock = lock_study_database(study);
  Store store(study.db);
  BatchPolicy policy;
  if (!study.trial_job.empty())
    policy.slurm_jobs =
        SlurmJobLaunch{.srun_options = study.trial_job,
                       .setup_lines = study.setup_lines,
                       .cpus = cpus_per_task_of(study.trial_job, cpus_per_node(study.shape))};
  Controller controller(store, plugin_loader().registry(), log_dir_of(study.db), slurm_stop(),
                        NodeSpec(), policy);
  const BatchSummary summary = controller.run_batch(experiments, /*force=*/false);
  print_verdicts(store, experiments);

  if (summary.interrupted && slurm_warned()) {
    const std::string not_requeued =
        requeue_after_warning(folder, job, restarts, study.max_requeues, [&] {
          fmt::print(stderr, "study {}/{}: checkpointed; requeueing Slurm job {}\n",
                     study.experiment, study.variant, job);
        });
    if (not_requeued.empty()) return kExitOk;
    fmt::print(stderr, "study {}/{}: not requeued: {}; `trainyard submit` again continues it\n",
               study.experiment, study.variant, not_requeued);
  }
  return summary.exit_code();
}

}  // namespace trainyard
