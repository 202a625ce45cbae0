// Where a training-state folder (checkpoint.h) says a run is: trainer_state.json, and the marks
// that tie the folder's safetensors files to it. LibTorch-free (trainyard_core), so that the fuzzer
// drives the very code that reads a state back; checkpoint.cpp writes and loads the tensors.
#pragma once

#include <cmath>
#include <cstdint>
#include <map>
#include <string>

namespace trainyard {

struct TrainerState {
  int64_t epoch = 0;  // epochs completed
  int64_t batch = 0;  // batches of the next epoch already trained (0 at an epoch's end)
  int64_t step = 0;   // optimizer steps taken
  int64_t best_epoch = 0;
  double best_val_acc = -1;
  std::string strategy;  // what wrote it, for the log and for mid-epoch positions
  // The intra-op threads it trained with: with runtime.threads 0, the same run continuing uses
  // them again (other threads sum in another order). 0: not recorded (an earlier trainyard's).
  int64_t intra_op_threads = 0;
  int64_t world_size = 1;
  int64_t batch_size = 0;  // per rank, with world_size: where a mid-epoch position lies in the data
  // train.micro_batch_size: auto: the micro-batch it had come down to (0: the whole batch, or not
  // recorded): the same run continuing starts there.
  int64_t micro_batch_size = 0;
  int64_t oom_events = 0;  // the out-of-memory events that halved it, and the time they took
  double oom_seconds = 0;
  // The run's own counts, for the same run continuing: a new run resuming from the state starts
  // its own.
  double train_seconds = 0;  // spent training (and validating) before this state was written
  double epoch_seconds = 0;  // of the unfinished epoch's training loop
  double epoch_validation_seconds = 0;     // of its validations so far (train.val_every_steps)
  int64_t epochs_without_improvement = 0;  // train.early_stop's count
  double best_monitored = std::nan("");    // train.early_stop's best value so far; NaN: none yet
  std::map<std::string, double> meter;     // TrainingMeter::counts()
  // The mean training loss of the steps up to the first progress line in the first epoch (or of
  // the whole first epoch, when it has none), and the step it ends at: what the last epoch's loss
  // is held against to see whether the run learned (loss_verdict, common/metrics.h). NaN: not yet,
  // or a state written before it was kept.
  double first_loss = std::nan("");
  int64_t first_loss_step = 0;
  // Every finished epoch's figures, by epoch: a run that continues sends them again, so none is
  // lost when its controller died between receiving an epoch and recording it.
  std::map<int64_t, std::map<std::string, double>> epochs;
};

// The folder's files.
inline constexpr const char* kModelStateFile = "model.safetensors";
inline constexpr const char* kOptimizerStateFile = "optimizer.safetensors";
inline constexpr const char* kBestStateFile = "best.safetensors";
inline constexpr const char* kRanksStateFile = "ranks.safetensors";
inline constexpr const char* kTrainerStateFile = "trainer_state.json";

// At most this many ranks wrote a state (a larger world_size, or a "rank<N>/" entry past it, is a
// damaged file, not a bigger cluster).
inline constexpr int64_t kMaxStateRanks = 1 << 16;

// trainer_state.json's text for `state`, and back. Figures that are not finite (a diverged epoch's
// loss) travel as "nan", "inf" and "-inf". Parsing throws UserError naming `path` on anything that
// is not a state this version can continue from: a field missing or of the wrong type, a count
// below zero, a position past what int64 counts.
std::string trainer_state_json(const TrainerState& state);
TrainerState parse_trainer_state(const std::string& text, const std::string& path);

// What every safetensors file of a folder records (metadata "state") of the state it belongs to.
std::string state_mark(const TrainerState& state);

// Reads `dir`/trainer_state.json and checks that every safetensors file of the folder belongs to
// it. Throws UserError naming what is wrong.
TrainerState read_trainer_state(const std::string& dir);
// Whether `dir` holds a whole training state (what read_trainer_state accepts).
bool has_training_state(const std::string& dir);

// "rank<R>/<name>" of ranks.safetensors: R, and <name> in `name`. Throws UserError naming `path`
// for any other entry, or R not below kMaxStateRanks.
int64_t rank_of_state_entry(const std::string& entry, const std::string& path, std::string& name);

}  // namespace trainyard
