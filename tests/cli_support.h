// Helpers of the end-to-end tests, which run the trainyard executable on real experiment files
// into temporary databases: running it and reading its output, starting it in the background and
// finding its worker processes, and the fixture that gives each test a folder and a database.
#pragma once

#include <sys/types.h>

#include <filesystem>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "tests/test_support.h"

namespace trainyard::testing {

struct Result {
  int exit_code = -1;
  std::string output{};  // stdout and stderr
};

// The six files of a CIFAR-10 binary-version folder (cifar-10-batches-bin).
inline const std::vector<std::string> kCifar10Files = {"data_batch_1.bin", "data_batch_2.bin",
                                                       "data_batch_3.bin", "data_batch_4.bin",
                                                       "data_batch_5.bin", "test_batch.bin"};

// Runs `trainyard ARGS` to completion.
Result trainyard(const std::string& args);
// Runs a shell command line to completion (stdout and stderr together).
Result shell(const std::string& command_line);

// A file of the source tree, by its path relative to the root.
std::string source(const std::string& relative);

// Writes `name` in `dir`: a well-formed safetensors file whose one tensor no model has. Validation
// reads its header and refuses it at model.weights (strict weights): data for that check, and
// placeholder weights with model.strict: false.
std::string write_foreign_weights(const TempDir& dir, const std::string& name);
// A variant's `set:` whose run fails as bad input when it reads its data, after validation: a
// CIFAR-10 folder (written in `dir`) whose six files are there but truncated — validation looks for
// them, the run reads them ("data_batch_1.bin: 100 bytes is not a whole number of records") — with
// model.num_classes 10, CIFAR-10's.
std::string failing_data_set(const TempDir& dir);
std::string read_file(const std::filesystem::path& path);

// Kills a forked trainyard (and, through PR_SET_PDEATHSIG, its workers) when a test ends early.
struct KillOnExit {
  pid_t pid = -1;
  ~KillOnExit();
};

// Starts `trainyard run FILE --db DB EXTRA...` in the background, its output discarded, with
// `environment`'s variables set on top of this process's.
pid_t start_run(const std::string& file, const std::string& db, std::vector<std::string> extra = {},
                const std::vector<std::pair<std::string, std::string>>& environment = {});
// `trainyard status --db DB`, asked every 100 ms until its output holds `text` (60 s at most):
// the last answer.
Result status_showing(const std::string& db, const std::string& text);
// Waits for `child` and returns its exit code (128 + the signal when a signal ended it).
int exit_code_of(pid_t child);

// The pids of the direct children of `parent`, from /proc.
std::vector<pid_t> children_of(pid_t parent);
// The rank number a worker process was given (RANK in its environment), or -1.
int rank_of(pid_t pid);
// The worker processes of a run `controller` started, once there are `count` of them (60 s at
// most).
std::vector<pid_t> wait_for_workers(pid_t controller, size_t count);
// Rank 1 of a 2-rank run `controller` started, a few seconds into training (past the rendezvous);
// -1 when the workers did not appear.
pid_t rank_one_once_training(pid_t controller);

// The figures of a run that measure the clock or the process, not the training.
bool is_wall_clock_figure(const std::string& key);
// Every completed run's figures but the wall-clock ones, keyed "<experiment>/<variant>/<config
// hash>/<epoch or final>/<figure>": what a continued run must reproduce bit for bit.
// `runs_per_config`, when given, counts every run the database holds of each configuration.
std::map<std::string, double> training_figures(
    const std::string& db, std::map<std::string, int>* runs_per_config = nullptr);
// The weights every completed run of `db` saved and tested (train.save_weights), keyed
// "<experiment>/<variant>/<config hash>/<tensor>": each tensor's dtype, shape and bytes.
std::map<std::string, std::string> tested_weights(const std::string& db);
// What a continued run must equal: every training figure of `db` (training_figures) and every
// weight its runs saved (tested_weights) are `reference_db`'s, bit for bit; and there are some.
void expect_same_training(const std::string& db, const std::string& reference_db);
// Where the newest checkpoint under `logs` stands: (epochs done, batch within the next), or
// (-1, -1) when there is none.
std::pair<int64_t, int64_t> checkpoint_position(const std::filesystem::path& logs);

// Trains `file` undisturbed into a database of its own; then into `db` with the controller
// SIGKILLed after a mid-epoch checkpoint in epoch 2, and runs the batch again: the run continues
// from its checkpoint, and every figure and the tested weights are the undisturbed run's, bit for
// bit. (The file's train.epochs is 2, and it checkpoints inside epochs; every run saves its
// weights: --set train.save_weights=true.)
void expect_a_kill_in_epoch_2_changes_nothing(const TempDir& dir, const std::string& file,
                                              const std::string& db);

// Each test gets its own folder, and a database path inside it that does not exist yet.
class CliTest : public ::testing::Test {
 protected:
  std::string db() const { return (dir.path() / "runs" / "t.db").string(); }
  TempDir dir;
};

}  // namespace trainyard::testing
