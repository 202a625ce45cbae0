// runtime.compile: cuda-graphs. The whole training step — forward, backward, loss scaling and the
// optimizer — is captured once into a CUDA graph over static input buffers, then replayed for every
// batch: one launch per step instead of hundreds, no host in the loop. The C++ counterpart of the
// studies' torch.compile row, following PyTorch's "whole network capture" recipe:
//
//   1. a few eager steps on a side stream (lazy initialisation — cuBLAS workspaces, optimizer
//      state, autograd's buffers — must not happen during capture);
//   2. one capture of the step on that stream, over copies of the next batch (gradients unset, so
//      the captured backward writes them rather than accumulating);
//   3. replay: copy each batch into the static buffers, launch the graph.
//
// Before capture the caching allocator's cache is emptied (as torch.cuda.graph does), so capture
// does not hold a second copy of the warm-up steps' activations. Validation refuses dynamic
// padding (batches of varying shape); a batch of another shape would run eagerly. A failed capture
// fails the run with the cause and the fix (runtime.compile: none): after one, the allocator and
// the random generator stay in capture mode, and nothing can safely run in the process. An eager
// warm-up step that fails throws what it threw, and may be run again (train.micro_batch_size:
// auto halves the step's micro-batch and retries it).
#pragma once

#include <functional>
#include <memory>
#include <stdexcept>
#include <string>

#include "trainyard/batch.h"

namespace trainyard {

// A capture that failed: the run ends (nothing is retried after it, not even an out-of-memory).
class CaptureFailed : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class CudaGraphStep {
 public:
  // One training step on `batch`: forward, backward, optimizer step; sets logits and loss.
  using StepFn =
      std::function<void(const Batch& batch, torch::Tensor& logits, torch::Tensor& loss)>;
  using LogFn = std::function<void(const std::string&)>;

  CudaGraphStep(const torch::Device& device, StepFn step, LogFn log, int warmup_steps = 3);
  ~CudaGraphStep();

  // Runs one step, eagerly or by replay. The returned tensors are the graph's static outputs once
  // captured: read them before the next run().
  void run(const Batch& batch, torch::Tensor& logits, torch::Tensor& loss);

  bool captured() const;
  // Whether the next run() captures (the eager warm-up steps are done).
  bool captures_next() const;
  // One more eager step before capture (the step's shape changed: it warms up at the new one).
  void warm_up_again();
  // What happened, for the run's record: "captured; 28 of 32 steps replayed", or why not.
  std::string summary(int64_t steps) const;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace trainyard
