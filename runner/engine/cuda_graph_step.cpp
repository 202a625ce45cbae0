#include "runner/engine/cuda_graph_step.h"

#include <algorithm>

#include <ATen/cuda/CUDAEvent.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAFunctions.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <fmt/format.h>

#include "components/device/cuda_module.h"
#include "runner/engine/sync_debug.h"
#include "trainyard/error.h"

namespace trainyard {

namespace {

bool same_shapes(const Batch& a, const Batch& b) {
  return a.inputs.sizes() == b.inputs.sizes() && a.targets.sizes() == b.targets.sizes() &&
         a.attention_mask.defined() == b.attention_mask.defined() &&
         (!a.attention_mask.defined() || a.attention_mask.sizes() == b.attention_mask.sizes());
}

Batch device_copy(const Batch& batch) {
  Batch copy;
  copy.inputs = batch.inputs.clone();
  copy.targets = batch.targets.clone();
  if (batch.attention_mask.defined()) copy.attention_mask = batch.attention_mask.clone();
  return copy;
}

}  // namespace

struct CudaGraphStep::State {
  State(const torch::Device& device, StepFn step, LogFn log, int warmup)
      : stream(c10::cuda::getStreamFromPool(false, device.index())),
        step(std::move(step)),
        log(std::move(log)),
        warmup(warmup) {}

  c10::cuda::CUDAStream stream;
  StepFn step;
  LogFn log;
  int warmup;
  int eager_steps = 0;
  int64_t replays = 0;
  at::cuda::CUDAEvent queued, done;  // the caller's work before a step; the step's end
  bool warned_shape = false;         // "another shape, eager" said once
  std::unique_ptr<CudaGraph> graph;
  Batch inputs;                // static input buffers of the graph
  torch::Tensor logits, loss;  // static outputs

  // Captures the step over copies of `batch`. A failed capture fails the run: the caching
  // allocator and the default CUDA generator would stay in capture mode (the next eager dropout
  // throws "Offset increment outside graph capture", a later emptyCache asserts), so no step can
  // safely run eagerly in this process after it — and each run is its own process.
  void capture(const Batch& batch) {
    inputs = device_copy(batch);
    {
      // As torch.cuda.graph: the warm-up steps' activations cached in the general pool cannot be
      // reused by the graph's private pool; without this capture holds a second copy (peak
      // memory of every cuda-graphs run inflated, large batches out of memory). Waiting for the
      // device here is intended, outside runtime.sync_debug's check.
      SyncDebugGuard allowed(c10::cuda::SyncDebugMode::L_DISABLED);
      c10::cuda::device_synchronize();
      c10::cuda::CUDACachingAllocator::emptyCache();
    }
    std::string not_loaded;
    const CudaModule* cuda = cuda_module(&not_loaded);
    if (!cuda) throw std::runtime_error("cuda-graphs: LibTorch's CUDA side: " + not_loaded);
    graph = cuda->new_graph();
    try {
      graph->begin();  // thread-local capture: see CudaGraph
      step(inputs, logits, loss);
      graph->end();
    } catch (const std::exception& e) {
      // Out of memory while capturing (the private pool on top of what the warm-up left) is
      // not retried either: a smaller micro-batch set by hand is the way on.
      const std::string or_smaller =
          says_out_of_memory(e.what()) ? " or a smaller train.micro_batch_size" : "";
      throw CaptureFailed(fmt::format(
          "cuda-graphs: the training step could not be captured: {}. A failed capture leaves "
          "the process unable to go on (the allocator and the random generator stay in capture "
          "mode), so the run stops here; set runtime.compile: none{} for it",
          e.what(), or_smaller));
    }
  }
};

CudaGraphStep::CudaGraphStep(const torch::Device& device, StepFn step, LogFn log, int warmup_steps)
    : state_(std::make_unique<State>(device, std::move(step), std::move(log), warmup_steps)) {}

CudaGraphStep::~CudaGraphStep() = default;

bool CudaGraphStep::captured() const { return state_->graph != nullptr; }

bool CudaGraphStep::captures_next() const {
  return !state_->graph && state_->eager_steps >= state_->warmup;
}

void CudaGraphStep::warm_up_again() {
  if (!state_->graph) state_->eager_steps = std::min(state_->eager_steps, state_->warmup - 1);
}

std::string CudaGraphStep::summary(int64_t steps) const {
  const State& s = *state_;
  if (s.graph) return fmt::format("captured; {} of {} steps replayed", s.replays, steps);
  return fmt::format("not captured: {} steps, fewer than the {} eager warm-up steps before capture",
                     steps, s.warmup);
}

void CudaGraphStep::run(const Batch& batch, torch::Tensor& logits, torch::Tensor& loss) {
  State& s = *state_;
  const c10::cuda::CUDAStream caller =
      c10::cuda::getCurrentCUDAStream(batch.inputs.device().index());
  // The side stream starts after what the caller queued, which waits for the batch (DeviceFeed).
  s.queued.record(caller);
  s.queued.block(s.stream);
  {
    c10::cuda::CUDAStreamGuard on_side_stream(s.stream);
    if (!s.graph && s.eager_steps >= s.warmup) {
      s.capture(batch);
      s.graph->replay();  // capturing recorded the step; this runs it
      ++s.replays;
      logits = s.logits;
      loss = s.loss;
    } else if (s.graph && same_shapes(batch, s.inputs)) {
      s.inputs.inputs.copy_(batch.inputs, /*non_blocking=*/true);
      s.inputs.targets.copy_(batch.targets, true);
      if (batch.attention_mask.defined()) s.inputs.attention_mask.copy_(batch.attention_mask, true);
      s.graph->replay();
      ++s.replays;
      logits = s.logits;
      loss = s.loss;
    } else {
      if (s.graph && !s.warned_shape) {
        s.log(
            "cuda-graphs: a batch of another shape than the captured one runs eagerly (validation "
            "refuses dynamic padding; this should not happen)");
        s.warned_shape = true;
      }
      s.step(batch, logits, loss);
      ++s.eager_steps;
    }
  }
  // The caller's stream reads the outputs next: it waits for the step.
  s.done.record(s.stream);
  s.done.block(caller);
}

}  // namespace trainyard
