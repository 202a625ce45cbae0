// The trainer, private to the engine (runner/engine/engine.h is its face: train_run). One class,
// in files by job:
//   trainer.cpp             the run: build's order, fit (epoch by epoch), evaluation, validation
//                           inside epochs, the kept epoch, finish (best weights, test, figures)
//   trainer_build.cpp       build, in named stages: device and threads, data and ranks, the model
//                           and what a resumed run brings, optimization, CUDA graphs
//   trainer_step.cpp        the training step: forward and backward (train_step, forward_backward),
//                           the optimizer step, micro-batches (train_split_step) and their
//                           out-of-memory retry, the CUDA graph's step (graph_step, captured_step)
//   trainer_checkpoint.cpp  checkpoints inside and between epochs, each rank's state, copies of
//                           the weights (the best epoch's)
// Throughput, FLOP/s, data wait and memory are counted by the TrainingMeter (meter.h).
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
#include "runner/engine/sync_debug.h"
#include "runner/engine/task.h"
#include "runner/engine/trainer_state.h"
#include "trainyard/batch.h"
#include "trainyard/model.h"
#include "trainyard/optimizers.h"
#include "trainyard/schedulers.h"

namespace trainyard {

using Clock = std::chrono::steady_clock;

inline double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// A figure read to the host. A NaN comes back without its sign: a diverged loss or gradient norm
// is often a NaN with the sign bit set, which fmt prints as "-nan", and "nan" and "-nan" in one
// log read as two different failures.
inline double host_value(const torch::Tensor& scalar) {
  const double value = scalar.item<double>();
  return std::isnan(value) ? std::numeric_limits<double>::quiet_NaN() : value;
}

// `batches` capped at `limit` (train.limit_train_batches, limit_eval_batches); 0: no cap.
inline int64_t limited(int64_t batches, int64_t limit) {
  return limit > 0 ? std::min(batches, limit) : batches;
}

struct SplitResult {
  double loss = 0;
  double accuracy = 0;  // NaN for a language model, which has none
  // A classifier's evaluation (validation, test) only; NaN and empty otherwise.
  double macro_f1 = std::nan("");
  double top5 = std::nan("");  // with more than five classes
  ConfusionMatrix confusion{};
};

// Sums of loss and correct predictions kept on the device, read once per split: no host
// synchronisation inside the loop. The loss is summed over what the task's mean is over (samples,
// or a language model's tokens: `units`). With `per_class` (a classifier's evaluation) it counts
// the confusion matrix and the top-5 hits too; training keeps to loss and accuracy, the sums a
// checkpoint inside an epoch carries.
struct Accumulator {
  Accumulator(const torch::Device& device, const TrainingTask& task, bool per_class = false)
      : task(task),
        per_class(per_class && !task.language_model()),
        loss_sum(torch::zeros({}, torch::TensorOptions().dtype(torch::kDouble).device(device))),
        correct(torch::zeros({}, torch::TensorOptions().dtype(torch::kLong).device(device))) {}
  void add(const torch::Tensor& loss, const torch::Tensor& logits, const torch::Tensor& targets) {
    const int64_t n = task.loss_units(targets);
    loss_sum += loss.detach().to(torch::kDouble) * n;
    if (!task.language_model()) correct += task.correct(logits, targets);
    if (per_class) {
      if (!class_counts.defined()) {  // the model's classes, known at the first batch
        classes = logits.size(1);
        class_counts = classes <= ConfusionMatrix::kMaxCellClasses
                           ? torch::zeros({classes * classes}, correct.options())
                           : torch::zeros({3, classes}, correct.options());
        top5 = torch::zeros({}, correct.options());
      }
      if (classes <= ConfusionMatrix::kMaxCellClasses)
        task.count_cells(logits, targets, class_counts);
      else
        task.count_tallies(logits, targets, class_counts);
      if (classes > 5) top5 += task.top_k_correct(logits, targets, 5);
    }
    samples += targets.size(0);
    units += n;
  }
  SplitResult result() const {
    if (samples == 0) return {};
    SplitResult split{host_value(loss_sum) / static_cast<double>(units),
                      task.language_model() ? std::nan("")
                                            : static_cast<double>(correct.item<int64_t>()) /
                                                  static_cast<double>(samples)};
    if (class_counts.defined()) {
      const torch::Tensor counts = class_counts.to(torch::kCPU).contiguous();
      const int64_t* data = counts.data_ptr<int64_t>();
      if (classes <= ConfusionMatrix::kMaxCellClasses) {
        split.confusion =
            ConfusionMatrix::from_cells(classes, std::vector<int64_t>(data, data + counts.numel()));
      } else {
        auto row = [&](int64_t r) {
          return std::vector<int64_t>(data + r * classes, data + (r + 1) * classes);
        };
        split.confusion = ConfusionMatrix::from_tallies(row(0), row(1), row(2));
      }
      split.macro_f1 = split.confusion.macro_f1();
      if (classes > 5)
        split.top5 = static_cast<double>(top5.item<int64_t>()) / static_cast<double>(samples);
    }
    return split;
  }
  const TrainingTask& task;
  bool per_class;
  torch::Tensor loss_sum, correct;
  // per_class, defined at the first batch: the confusion matrix's cells (up to
  // ConfusionMatrix::kMaxCellClasses classes, else each class's tallies), the top-5 hits.
  torch::Tensor class_counts, top5;
  int64_t classes = 0;
  int64_t samples = 0;
  int64_t units = 0;  // what loss_sum is over: samples, or tokens
};

// One micro-batch of a batch cut into pieces of `size` samples: the slice (the batch itself when
// whole), the share of the batch's mean loss it carries, and whether it ends the batch.
struct MicroBatch {
  Batch batch;
  double weight = 1.0;
  bool last = true;
};
// `batch` in micro-batches of `size` samples, the last one smaller when `size` does not divide it;
// `size` 0 (or the batch's size or more): the whole batch, weight 1.
std::vector<MicroBatch> micro_batches(const Batch& batch, int64_t size);

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
  // Forward, backward and — when `step_now` (the last micro-batch of a step) — the optimizer step.
  // The part of the loop a CUDA graph captures; nothing in it reads the device from the host.
  void train_step(const Batch& batch, bool step_now, bool measure_norm, torch::Tensor& logits,
                  torch::Tensor& loss);
  // Forward and backward of one (micro-)batch whose loss counts `weight` of the step's.
  void forward_backward(const Batch& batch, double weight, bool sync, torch::Tensor& logits,
                        torch::Tensor& loss);
  // The optimizer step over the gradients backward left: unscale, clip, step.
  void optimizer_step(bool measure_norm);
  // train.micro_batch_size: whether steps are split into micro-batches (a number, or auto).
  bool splits_steps() const { return micro_batch_ > 0 || run_.train.micro_batch_auto(); }
  // The micro-batch a step runs at now: micro_batch_, or the whole batch.
  int64_t micro_batch_size() const {
    return micro_batch_ > 0 ? micro_batch_ : run_.train.batch_size;
  }
  // Halves it (auto), counts the halving and records both where a continued run reads them.
  void halve_micro_batch();
  // One optimizer step over `batches` (its loader batches), each split into micro-batches of
  // micro_batch_ samples; their figures go to `metrics` once the step is done. `loss` is the last
  // batch's mean loss. With auto, an allocation failure in a forward or backward abandons the step
  // (gradients dropped, the allocator's cache emptied, the random generators put back), halves the
  // micro-batch and runs the same step again: what it computes is what a run started at that size
  // computes.
  void train_split_step(const std::vector<Batch>& batches, bool measure_norm, Accumulator& metrics,
                        torch::Tensor& loss);
  // runtime.compile: cuda-graphs. One step by the graph: eager warm-up steps, then capture, then
  // replays. With auto a warm-up step that runs out of memory is abandoned and halved as in
  // train_split_step, so the graph is captured at the micro-batch that fitted; a replay allocates
  // nothing, so once captured the size stays.
  void graph_step(const Batch& batch, torch::Tensor& logits, torch::Tensor& loss);
  // What a CUDA graph captures: the optimizer step over `batch` in micro-batches of micro_batch_
  // samples (whole when 0), with the whole batch's mean loss and a classifier's logits (a
  // language model's are not kept). Nothing is read by the host and nothing is retried inside.
  void captured_step(const Batch& batch, torch::Tensor& logits, torch::Tensor& loss);
  // Where the random generators (dropout draws from them) and the model's buffers (BatchNorm's
  // running statistics, which each forward moves) stand at a step's start, so that an abandoned
  // attempt leaves them as they were. Empty unless train.micro_batch_size is auto.
  struct StepStart {
    std::vector<std::pair<at::Generator, torch::Tensor>> generators;
    std::vector<torch::Tensor> buffers;
  };
  StepStart remember_step_start();
  // After an attempt at micro-batch micro_batch_ ran out of memory (`error`, from `attempt_start`):
  // drops its gradients and cached blocks, puts `start` back, counts the event and halves the
  // micro-batch; throws when it was one sample already (`tried`: the sizes so far).
  void abandon_and_halve(const StepStart& start, const std::exception& error,
                         Clock::time_point attempt_start, std::vector<int64_t>& tried);
  // Under several ranks with auto, after each micro-batch: whether any rank ran out of memory
  // (`out_of_memory`: this rank's error, empty when it did not). One collective of one number;
  // when any did, it throws AgreedOutOfMemory on every rank, so all abandon the step together.
  // `flag` is a one-element double tensor on the device, allocated before the step.
  void agree_on_memory(const std::string& out_of_memory, torch::Tensor& flag);
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
  double train_seconds() const {
    return trained_before_ + seconds_since(run_start_) - checkpoint_seconds_;
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
      if (training && graph_ && run_.model.capabilities.max_positions > 0 &&
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
  // Whether the run resumed from a state written inside `epoch`.
  bool resumed_inside(int64_t epoch) const { return epoch == start_epoch_ && start_batch_ > 0; }

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
  std::unique_ptr<CudaGraphStep> graph_;
  torch::Tensor lr_tensor_;  // the learning rate a device-stepping optimizer reads, with graphs
  c10::cuda::SyncDebugMode sync_debug_ = c10::cuda::SyncDebugMode::L_DISABLED;

  // Progress: steps, epochs, the best epoch — what a training state records — and where a resumed
  // run started.
  TrainerState progress_;
  int64_t step_ = 0;         // optimizer steps so far
  int64_t total_steps_ = 0;  // optimizer steps in the run
  int64_t start_epoch_ = 0;  // > 0 when resumed
  int64_t start_step_ = 0;
  int64_t start_batch_ = 0;  // batches of epoch start_epoch_ trained before a mid-epoch resume

  // Checkpoints: where from (train.resume_from, or this run's own state when it continues), what
  // the state held for this rank, and the time they take (not training time).
  std::string resume_dir_;
  bool continuing_ = false;  // this same run goes on (RunContext::continue_from)
  std::map<std::string, torch::Tensor> resumed_rank_state_;
  double trained_before_ = 0;                    // seconds trained before the last interruption
  double resumed_epoch_seconds_ = 0;             // of the unfinished epoch's loop, before it
  double resumed_epoch_validation_seconds_ = 0;  // of its validations (train.val_every_steps)
  double checkpoint_seconds_ = 0;                // spent writing checkpoints
  double checkpoint_comm_bytes_ = 0;  // their gathers between ranks (not training traffic)
  Clock::time_point last_checkpoint_;
  std::vector<torch::Tensor>
      best_weights_;  // the best epoch's, when not the live ones (checkpoint: best)

  // train.micro_batch_size: the micro-batch steps are split into (0: whole batches) and, with
  // auto, the out-of-memory events that halved it and the time their abandoned steps took.
  int64_t micro_batch_ = 0;
  int64_t oom_events_ = 0;
  double oom_seconds_ = 0;

  // Measurement.
  TrainingMeter meter_;
  Clock::time_point run_start_;
  torch::Tensor grad_norm_;  // of the last measured step, on the device (read at progress lines)
  double epoch_samples_per_s_ = 0;
  int64_t tokens_per_sample_ = 0;  // a language model's context (its batches' seq_len)
  // The dtype of the model's output in the first training step: what its forward computed in, as
  // observed rather than as configured (a precision whose autocast did not reach the model's
  // operations would show here as Float).
  std::optional<c10::ScalarType> forward_dtype_;
};

}  // namespace trainyard
