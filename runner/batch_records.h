// What the controller (`trainyard run`), `trainyard submit` and a Slurm task share about a batch's
// runs: the experiment's record, a run's queued fields and files, its progress as the store keeps
// it, and its checkpoint folder.
#pragma once

#include <filesystem>
#include <string>

#include "db/store.h"
#include "runner/config/experiment.h"

namespace trainyard {

struct TrainingProgress;

// Two files that say the same `name:` would mix their runs in one report and take each other's
// baseline: refused (UserError naming both), before anything is written.
void check_experiment_name_is_free(Store& store, const Experiment& experiment);
// The experiment's record (created, or its file, description and report settings updated).
int64_t record_experiment(Store& store, const Experiment& experiment);
// What the store keeps of a run when it is queued; `position`: its place in its experiment.
QueuedRun queued_run(const RunSpec& run, size_t position);
// Where a new run's files go: <log_dir>/<experiment>/run-<id>-<variant>-<uid> plus ".log",
// ".yaml", "-rank<R>.log", ".safetensors", ".state/", ".events.jsonl". Run ids restart in every
// database; the uid does not, so two databases in one folder never share a file name. Throws when a
// file of the name exists (never overwritten).
std::filesystem::path new_run_files_stem(const std::string& log_dir, const Experiment& experiment,
                                         const RunRecord& record, int node_rank = 0);
// What the store keeps of a progress line (for `trainyard status`).
RunProgress run_progress_of(const TrainingProgress& progress);
// A completed run's checkpoint folder, and a half-written one beside it.
void remove_checkpoint(const std::string& state_dir);
// Where a run's checkpoint says it stopped, for the log ("" when it has none).
std::string checkpoint_position(const std::string& state_dir);

// Short git revision of the repository holding `path` ("" outside git), "-dirty" when modified.
std::string git_revision_of(const std::string& path);

}  // namespace trainyard
