// The trainer, private to the engine (runner/engine/engine.h is its face: train_run). One class,
// in files by job:
//   trainer.cpp             the run: build's order, fit (epoch by epoch), evaluation, validation
//                           inside epochs, the kept epoch, finish (best weights, test, figures)
//   trainer_build.cpp       build, in named stages: device and threads, data and ranks, the model
//                           and what a resumed run brings, optimization, CUDA graphs
//   trainer_checkpoint.cpp  checkpoints inside and between epochs, each rank's state, copies of
//                           the weights (the best epoch's)
// and collaborators that own their own state: the StepRunner (step_runner.h: forward, backward,
// the optimizer step, micro-batches, CUDA graphs), the ResumePoint (where a resumed run starts),
// the Accumulator (split_metrics.h: an epoch's or an evaluation's sums) and the TrainingMeter
// (meter.h: throughput, FLOP/s, data wait and memory).
#pragma once

#include <chrono>
#include <cmath>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <ATen/core/Generator.h>
#include <fmt/format.h>
#include <torch/types.h>

#include "common/classification.h"
#include "common/metrics.h"
#include "components/data/loader.h"
#include "components/precision/loss_scaler.h"
#include "components/precision/precision.h"
#include "components/strategy/strategy.h"
#include "components/weights/load_weights.h"
#include "runner/engine/cuda_graph_step.h"
#include "runner/engine/device_feed.h"
#include "runner/engine/engine.h"
#include "runner/engine/meter.h"
#include "runner/engine/split_metrics.h"
#include "runner/engine/step_runner.h"
#include "runner/engine/sync_debug.h"
#include "runner/engine/task.h"
#include "runner/engine/trainer_state.h"
#include "trainyard/batch.h"
#include "trainyard/model.h"
#include "trainyard/optimizers.h"
#include "trainyard/schedulers.h"

namespace trainyard {

// `batches` capped at `limit` (train.limit_train_batches, limit_eval_batches); 0: no cap.
inline int64_t limited(int64_t batches, int64_t limit) {
  return limit > 0 ? std::min(batches, limit) : batches;
}

// Where a resumed run starts — from train.resume_from, or this same run continuing after an
// interruption (RunContext::continue_from) — and what it brings of the time before. A fresh run's
// is empty: epoch 0, batch 0.
struct ResumePoint {
  std::string dir;          // the training state's folder; empty: a fresh run
  bool continuing = false;  // this same run goes on: its clocks and counts go on too
  int64_t epoch = 0;        // epochs done before
  int64_t step = 0;         // optimizer steps done before
  int64_t batch = 0;        // batches of `epoch` trained before a mid-epoch resume (this run's)
  // This rank's random generators and the unfinished epoch's sums (Accumulator::state()).
  std::map<std::string, torch::Tensor> rank_state;
  // continuing only: seconds trained before the last interruption, and of the unfinished epoch's
  // loop and its validations (train.val_every_steps).
  double trained_seconds = 0;
  double epoch_seconds = 0;
  double epoch_validation_seconds = 0;

  // Whether the state was written inside `e`: that epoch starts at `batch`, with its sums.
  bool inside(int64_t e) const { return e == epoch && batch > 0; }
};

class Trainer {
 public:
  Trainer(const RunSpec& run, const RunContext& context)
      : run_(run), context_(context), task_(run.model.capabilities.task) {}

  MetricValues run();

 private:
  // --- build, in stages ---
  void build();
  DeviceInfo setup_device();      // threads, matmul precision, the device, the seed
  void setup_data();              // the dataset, the ranks (strategy), the three loaders
  void setup_model_and_resume();  // the model, its weights, and a resumed run's progress
  void setup_optimization();      // precision, strategy setup, optimizer, loss scaler, schedule
  void setup_cuda_graph();        // runtime.compile: cuda-graphs and runtime.sync_debug
  void restore_rank_state();      // a resumed run's random states and unfinished epoch's sums
  void log_setup(const DeviceInfo& device) const;

  // --- fit, epoch by epoch ---
  void fit();
  SplitResult train_epoch(
      int64_t epoch);  // the epoch's training loss and accuracy, over every rank
  // An epoch's clocks and counters, from its start: its loop's time without the validations inside
  // it (and, in an epoch continued after an interruption, with the time before), and the strategy's
  // training traffic (not the checkpoints' gathers).
  struct EpochClock {
    EpochClock(const Trainer& trainer, bool resumed_here);
    double loop_seconds() const { return seconds_before + seconds_since(start) - validating; }
    double validation_seconds() const { return validated_before + validating; }
    double communicated() const;

    const Trainer& trainer;
    const Clock::time_point start;
    const int64_t steps_before;
    const double seconds_before, validated_before, communicated_before;
    double validating = 0;  // seconds of validations inside the epoch so far
  };
  void log_progress(int64_t epoch, const torch::Tensor& loss, int64_t epoch_samples,
                    Clock::time_point epoch_start);
  SplitResult evaluate(DataLoader& loader);
  // train.val_every_steps: whether a validation is due after `step` optimizer steps, inside an
  // epoch; and that validation, which returns its time.
  bool validates_after(int64_t step) const {
    return run_.train.val_every_steps > 0 && step % run_.train.val_every_steps == 0;
  }
  double validate_inside_epoch();
  // A validation's figures at this step, with its own time and the training time so far.
  void record_validation(const SplitResult& val, double seconds);
  // Mid-epoch checkpoints: whether one is due after this optimizer step (ranks agree), and writing
  // one at `batches_done` batches into `epoch`.
  bool checkpoint_due();
  void checkpoint(int64_t epoch, int64_t batches_done, const Accumulator& metrics,
                  double epoch_loop_seconds, double epoch_validation_seconds,
                  double epoch_comm_bytes, int64_t epoch_steps);
  void write_state(const NamedTensors& rank_state);
  NamedTensors rank_state(const Accumulator& metrics) const;
  // The step runner's micro-batch and out-of-memory counts into progress_: a continued run starts
  // there.
  void record_micro_batch();
  double train_seconds() const {
    return resume_.trained_seconds + seconds_since(run_start_) - checkpoint_seconds_;
  }
  void end_of_epoch(int64_t epoch, double epoch_seconds, const SplitResult& train,
                    const SplitResult& val);

  // --- finish: best weights, test, figures ---
  MetricValues finish(double train_seconds);
  void restore_best_weights();
  void log_classes(const ConfusionMatrix& confusion);
  void save_tested_weights();
  MetricValues final_metrics(const SplitResult& test, double train_seconds, double test_seconds);

  // --- helpers ---
  template <class... Args>
  void log(fmt::format_string<Args...> format, Args&&... args) const {
    context_.observer.on_log(fmt::format(format, std::forward<Args>(args)...));
  }
  // train.early_stop: the watched figure has not improved for `patience` epochs.
  bool stopped_early() const {
    return run_.train.early_stop_patience > 0 &&
           progress_.epochs_without_improvement >= run_.train.early_stop_patience;
  }
  void watch_for_early_stop(const SplitResult& val);
  bool stop_requested() const { return context_.stop_requested && context_.stop_requested->load(); }
  void check_stop() const {
    if (stop_requested()) throw Interrupted();
  }
  void set_learning_rate(double lr) {
    for (auto& group : optimizer_->libtorch().param_groups()) group.options().set_lr(lr);
    if (lr_tensor_.defined()) lr_tensor_.fill_(lr);  // what a captured step reads
  }
  // The loader's next batch on the training device, with the dataset's per-batch work done (on
  // CUDA on the feed's own stream, overlapping the step before it).
  // `training`: a batch for the training step (which a CUDA graph may replay), not for evaluation.
  Batch fetch(DataLoader& loader, const BatchTransform& transform, int64_t epoch, int64_t index,
              bool training) {
    Batch loaded = loader.next();
    return feed_->next([&] {
      Batch batch = loaded.to(device_, /*non_blocking=*/device_.is_cuda());
      if (device_.is_cuda() && transform)
        batch = transform(std::move(batch), loader.batch_seed(epoch, index));
      // bf16-true and 16-true: float inputs in the parameters' dtype (autocast casts them itself).
      if (!precision_->autocast() && batch.inputs.is_floating_point())
        batch.inputs = batch.inputs.to(precision_->param_dtype());
      // A CUDA graph replays one input layout: a training batch of sequences without padding
      // (which the loader sends without a mask) gets its all-ones mask back, so every batch
      // replays the graph. Evaluation is not captured: its batches keep no mask, so attention may
      // use its fused kernels there.
      if (training && steps_->graph() && run_.model.capabilities.max_positions > 0 &&
          !batch.attention_mask.defined())
        batch.attention_mask = torch::ones_like(batch.inputs);
      return batch;
    });
  }
  // Whether the optimizer step after `step` optimizer steps gets a progress line.
  bool logs_after(int64_t step) const {
    return step % run_.train.log_every == 0 || step == total_steps_;
  }
  std::vector<torch::Tensor> snapshot_weights();
  void restore_weights(const std::vector<torch::Tensor>& weights);
  // Where a mid-epoch state's position lies in this run's batches: the same samples trained, under
  // this run's batch size and world size.
  int64_t batch_within_epoch(const TrainerState& state) const;

  // The run as configured, and where it reports.
  const RunSpec& run_;
  const RunContext& context_;
  const TrainingTask task_;  // the model's: what the step's loss is and what the figures are

  // Components, built once by build().
  torch::Device device_{torch::kCPU};
  std::string device_name_;
  std::string threads_;  // the CPU threads it uses, and why: for the run's details
  DataSplits data_;
  std::unique_ptr<DataLoader> train_loader_, val_loader_, test_loader_;
  std::unique_ptr<DeviceFeed> feed_;  // the loaders' batches onto the device
  int64_t train_batches_ = 0;         // per epoch, after train.limit_train_batches
  ModelPtr model_;
  PrecisionPtr precision_;
  std::unique_ptr<LossScaler> scaler_;  // 16-mixed only
  StrategyPtr strategy_;
  OptimizerPtr optimizer_;
  LrSchedule schedule_;
  double base_lr_ = 0;

  // CUDA graphs and the sync check (runtime.compile, runtime.sync_debug).
  torch::Tensor lr_tensor_;  // the learning rate a device-stepping optimizer reads, with graphs
  c10::cuda::SyncDebugMode sync_debug_ = c10::cuda::SyncDebugMode::L_DISABLED;

  // Progress: steps, epochs, the best epoch — what a training state records — and where a resumed
  // run started.
  TrainerState progress_;
  int64_t step_ = 0;         // optimizer steps so far
  int64_t total_steps_ = 0;  // optimizer steps in the run

  // Checkpoints: where from (train.resume_from, or this run's own state when it continues), what
  // the state held for this rank, and the time they take (not training time).
  ResumePoint resume_;
  double checkpoint_seconds_ = 0;     // spent writing checkpoints
  double checkpoint_comm_bytes_ = 0;  // their gathers between ranks (not training traffic)
  Clock::time_point last_checkpoint_;
  std::vector<torch::Tensor>
      best_weights_;  // the best epoch's, when not the live ones (checkpoint: best)

  // The training step: forward, backward, the optimizer step, micro-batches, CUDA graphs. Built
  // by setup_optimization, once its parts are.
  std::unique_ptr<StepRunner> steps_;

  // Measurement.
  TrainingMeter meter_;
  Clock::time_point run_start_;
  double epoch_samples_per_s_ = 0;
  int64_t tokens_per_sample_ = 0;  // a language model's context (its batches' seq_len)
};

}  // namespace trainyard
