// The training step: what turns the loader's batches into optimizer steps. The trainer
// (trainer.h) hands it each batch of an epoch; it runs forward, backward, loss scaling, clipping
// and the optimizer over them, and owns what only the step needs:
//   - micro-batches (train.micro_batch_size): a step's batches cut into pieces, and under auto,
//     on out-of-memory, the step abandoned, the micro-batch halved and the same step run again;
//     with several ranks the ranks agree first, so none goes on at another size;
//   - runtime.compile: cuda-graphs: warm-up steps, then one captured step replayed;
//   - what a step observed: the last measured gradient norm, the dtype the forward computed in.
// Nothing in a step reads the device from the host but the ranks' agreement on out-of-memory.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <ATen/core/Generator.h>
#include <torch/types.h>

#include "components/precision/loss_scaler.h"
#include "components/precision/precision.h"
#include "components/strategy/strategy.h"
#include "runner/config/run_spec.h"
#include "runner/engine/cuda_graph_step.h"
#include "runner/engine/meter.h"
#include "runner/engine/split_metrics.h"
#include "runner/engine/task.h"
#include "trainyard/batch.h"
#include "trainyard/model.h"
#include "trainyard/optimizers.h"

namespace trainyard {

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

// The run's components a step runs on; built and owned by the trainer, which outlives the runner.
struct StepParts {
  const TrainOptions& train;
  const TrainingTask& task;
  torch::Device device;
  Model& model;
  const Precision& precision;
  LossScaler* scaler;  // 16-mixed only
  Strategy& strategy;
  Optimizer& optimizer;
  TrainingMeter& meter;  // counts every micro-batch trained
  std::function<void(const std::string&)> log;
};

// train.micro_batch_size's state: the micro-batch steps run at (0: whole batches) and the
// out-of-memory events that halved it, with the time their abandoned attempts took. A continued
// run starts where the interrupted one had come to (TrainerState records it).
struct MicroBatchState {
  int64_t size = 0;
  int64_t oom_events = 0;
  double oom_seconds = 0;
};

class StepRunner {
 public:
  StepRunner(StepParts parts, MicroBatchState micro_batch);

  // runtime.compile: cuda-graphs: from here every step is the graph's (warm-up, capture,
  // replays). Needs a CUDA device and whole-batch steps (train.grad_accum 1).
  void use_cuda_graph();
  const CudaGraphStep* graph() const { return graph_.get(); }

  // One loader batch of the epoch, the `step_now` one ending an optimizer step (train.grad_accum).
  // `step` is the optimizer step it belongs to (1-based, for the log); `measure_norm`: whether that
  // step measures the gradient norm (a progress line shows it). The batch's figures go to
  // `metrics` (with micro-batches, once the step is done). Returns the loss to log: the batch's
  // mean loss, at a step's end its last batch's.
  torch::Tensor train_batch(Batch batch, bool step_now, int64_t step, bool measure_norm,
                            Accumulator& metrics);

  // The micro-batch a step runs at now (the whole batch: train.batch_size), and whether steps are
  // cut at all.
  int64_t micro_batch_size() const {
    return micro_batch_.size > 0 ? micro_batch_.size : train_.batch_size;
  }
  // What a training state records: the size only under auto (a fixed size is the config's).
  MicroBatchState recorded_micro_batch() const;
  const MicroBatchState& micro_batch() const { return micro_batch_; }

  // The gradient norm of the last step that measured it, on the device; undefined before.
  const torch::Tensor& grad_norm() const { return grad_norm_; }
  // The dtype of the model's output in the first training step: what its forward computed in, as
  // observed rather than as configured (a precision whose autocast did not reach the model's
  // operations would show here as Float).
  std::optional<c10::ScalarType> forward_dtype() const { return forward_dtype_; }

 private:
  // Forward, backward and — when `step_now` — the optimizer step, over a whole batch.
  void whole_step(const Batch& batch, bool step_now, bool measure_norm, torch::Tensor& logits,
                  torch::Tensor& loss);
  // Forward and backward of one (micro-)batch whose loss counts `weight` of the step's.
  void forward_backward(const Batch& batch, double weight, bool sync, torch::Tensor& logits,
                        torch::Tensor& loss);
  // The optimizer step over the gradients backward left: unscale, clip, step.
  void optimizer_step(bool measure_norm);
  // One optimizer step over `batches` (its loader batches), each split into micro-batches; their
  // figures go to `metrics` once the step is done. Returns the last batch's mean loss. With auto,
  // an allocation failure in a forward or backward abandons the step (gradients dropped, the
  // allocator's cache emptied, the random generators put back), halves the micro-batch and runs
  // the same step again: what it computes is what a run started at that size computes.
  torch::Tensor split_step(const std::vector<Batch>& batches, int64_t step, bool measure_norm,
                           Accumulator& metrics);
  // One step by the CUDA graph: eager warm-up steps, then capture, then replays. With auto a
  // warm-up step that runs out of memory is abandoned and halved as in split_step, so the graph is
  // captured at the micro-batch that fitted; a replay allocates nothing, so once captured the size
  // stays.
  void graph_step(const Batch& batch, int64_t step, torch::Tensor& logits, torch::Tensor& loss);
  // What a CUDA graph captures: the optimizer step over `batch` in micro-batches (whole when 0),
  // with the whole batch's mean loss and a classifier's logits (a language model's are not kept).
  // Nothing is read by the host and nothing is retried inside.
  void captured_step(const Batch& batch, torch::Tensor& logits, torch::Tensor& loss);

  // Where the random generators (dropout draws from them) and the model's buffers (BatchNorm's
  // running statistics, which each forward moves) stand at a step's start, so that an abandoned
  // attempt leaves them as they were. Empty unless train.micro_batch_size is auto.
  struct StepStart {
    std::vector<std::pair<at::Generator, torch::Tensor>> generators;
    std::vector<torch::Tensor> buffers;
  };
  StepStart remember_step_start();
  // After an attempt of optimizer step `step` ran out of memory (`error`, from `attempt_start`):
  // drops its gradients and cached blocks, puts `start` back, counts the event and halves the
  // micro-batch; throws when it was one sample already (`tried`: the sizes so far).
  void abandon_and_halve(const StepStart& start, const std::exception& error, int64_t step,
                         std::chrono::steady_clock::time_point attempt_start,
                         std::vector<int64_t>& tried);
  void halve_micro_batch();
  // Under several ranks with auto, after each micro-batch: whether any rank ran out of memory
  // (`out_of_memory`: this rank's error, empty when it did not). One collective of one number;
  // when any did, it throws AgreedOutOfMemory on every rank, so all abandon the step together.
  // `flag` is a one-element double tensor on the device, allocated before the step.
  void agree_on_memory(const std::string& out_of_memory, torch::Tensor& flag);

  const TrainOptions& train_;
  const TrainingTask& task_;
  const torch::Device device_;
  Model& model_;
  const Precision& precision_;
  LossScaler* scaler_;
  Strategy& strategy_;
  Optimizer& optimizer_;
  TrainingMeter& meter_;
  std::function<void(const std::string&)> log_;

  MicroBatchState micro_batch_;
  std::vector<Batch> pending_;  // with micro-batches: the step's loader batches, until its last
  std::unique_ptr<CudaGraphStep> graph_;
  torch::Tensor grad_norm_;
  std::optional<c10::ScalarType> forward_dtype_;
};

}  // namespace trainyard
