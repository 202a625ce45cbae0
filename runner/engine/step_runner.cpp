// The training step (step_runner.h). StepRunner::train_batch takes the epoch's batches: whole,
// they go through whole_step (forward, backward and, at a step's end, the optimizer); with
// train.micro_batch_size they wait for the step's last batch and split_step runs the step's
// micro-batches (micro_batches()) and, under auto, halves them and runs the same step again on
// out-of-memory (remember_step_start, abandon_and_halve; with several ranks they agree first:
// agree_on_memory); with runtime.compile: cuda-graphs, graph_step warms up, captures and replays
// captured_step.
#include <malloc.h>

#include <stdexcept>
#include <utility>

#include <ATen/Context.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <torch/cuda.h>

#include "common/text.h"
#include "runner/engine/step_runner.h"
#include "runner/engine/sync_debug.h"
#include "trainyard/error.h"

namespace trainyard {

namespace {

// Out of memory on some rank, as every rank learned from agree_on_memory's collective: the only
// error a step split over several ranks retries (any other leaves the ranks out of step).
class AgreedOutOfMemory : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace

std::vector<MicroBatch> micro_batches(const Batch& batch, int64_t size) {
  const int64_t n = batch.size(), m = size > 0 ? std::min(size, n) : n;
  if (m == n) return {{batch, 1.0, true}};
  std::vector<MicroBatch> out;
  for (int64_t start = 0; start < n; start += m) {
    const int64_t length = std::min(m, n - start);
    out.push_back({batch.slice(start, length), static_cast<double>(length) / static_cast<double>(n),
                   start + length == n});
  }
  return out;
}

StepRunner::StepRunner(StepParts parts, MicroBatchState micro_batch)
    : train_(parts.train),
      task_(parts.task),
      device_(parts.device),
      model_(parts.model),
      precision_(parts.precision),
      scaler_(parts.scaler),
      strategy_(parts.strategy),
      optimizer_(parts.optimizer),
      meter_(parts.meter),
      log_(std::move(parts.log)),
      micro_batch_(micro_batch) {}

void StepRunner::use_cuda_graph() {
  graph_ = std::make_unique<CudaGraphStep>(
      device_,
      [this](const Batch& batch, torch::Tensor& logits, torch::Tensor& loss) {
        captured_step(batch, logits, loss);
      },
      log_);
}

MicroBatchState StepRunner::recorded_micro_batch() const {
  MicroBatchState recorded = micro_batch_;
  if (!train_.micro_batch_auto()) recorded.size = 0;
  return recorded;
}

torch::Tensor StepRunner::train_batch(Batch batch, bool step_now, int64_t step, bool measure_norm,
                                      Accumulator& metrics) {
  const bool splits = micro_batch_.size > 0 || train_.micro_batch_auto();
  if (splits && !graph_) {  // a graph splits its own (grad_accum is 1)
    pending_.push_back(std::move(batch));
    if (!step_now) return torch::Tensor();
    torch::Tensor loss = split_step(pending_, step, measure_norm, metrics);
    pending_.clear();
    return loss;
  }
  torch::Tensor logits, loss;
  if (graph_)
    graph_step(batch, step, logits, loss);  // step_now always: graphs need grad_accum 1
  else
    whole_step(batch, step_now, step_now && measure_norm, logits, loss);
  metrics.add(loss, logits, batch.targets);
  meter_.add_batch(batch.size(), model_.training_flops(batch));
  return loss;
}

void StepRunner::whole_step(const Batch& batch, bool step_now, bool measure_norm,
                            torch::Tensor& logits, torch::Tensor& loss) {
  forward_backward(batch, 1.0, /*sync=*/step_now, logits, loss);
  if (step_now) optimizer_step(measure_norm);
}

void StepRunner::forward_backward(const Batch& batch, double weight, bool sync,
                                  torch::Tensor& logits, torch::Tensor& loss) {
  const TrainOptions& train = train_;
  {
    Precision::AutocastScope autocast(precision_, device_.type());
    logits = strategy_.forward(model_, batch);
    loss = task_.loss(logits, batch.targets);
  }
  if (!forward_dtype_) forward_dtype_ = logits.scalar_type();          // metadata: no device read
  torch::Tensor backward_loss = weight != 1.0 ? loss * weight : loss;  // a micro-batch's share
  if (train.grad_accum > 1) backward_loss = backward_loss / static_cast<double>(train.grad_accum);
  strategy_.backward(scaler_ ? scaler_->scale(backward_loss) : backward_loss, sync);
}

void StepRunner::optimizer_step(bool measure_norm) {
  const TrainOptions& train = train_;
  if (scaler_)
    scaler_->unscale(optimizer_.libtorch());  // true gradients before clipping and the step
  if (train.clip_grad_norm > 0)
    grad_norm_ = strategy_.clip_grad_norm(optimizer_.libtorch(), train.clip_grad_norm);
  else if (measure_norm)
    grad_norm_ = strategy_.gradient_norm(optimizer_.libtorch());
  strategy_.step(optimizer_.libtorch(),
                 scaler_ ? scaler_->found_inf() : torch::Tensor());  // skipped on overflow
  if (scaler_) scaler_->update();
}

torch::Tensor StepRunner::split_step(const std::vector<Batch>& batches, int64_t step,
                                     bool measure_norm, Accumulator& metrics) {
  struct Part {
    torch::Tensor loss, logits, targets;
  };
  std::vector<Part> parts;
  const StepStart step_start = remember_step_start();
  // With several ranks every micro-batch's backward runs apart (nothing communicated) and the ranks
  // agree after each whether any ran out of memory, so none goes on at another size; once all
  // agree the step fitted, its gradients are synchronised as the last backward would have.
  const bool agree = train_.micro_batch_auto() && strategy_.world_size() > 1;
  // Allocated now, not when memory has run out.
  torch::Tensor flag =
      agree ? torch::zeros({1}, torch::TensorOptions().dtype(torch::kDouble).device(device_))
            : torch::Tensor();
  std::vector<int64_t> tried;
  while (true) {
    const auto attempt_start = std::chrono::steady_clock::now();
    try {
      for (size_t i = 0; i < batches.size(); ++i) {
        for (const MicroBatch& micro : micro_batches(batches[i], micro_batch_.size)) {
          const bool last = i + 1 == batches.size() && micro.last;
          Part part;
          std::string out_of_memory;
          try {
            forward_backward(micro.batch, micro.weight, /*sync=*/last && !agree, part.logits,
                             part.loss);
          } catch (const CollectiveError&) {
            throw;  // inside a collective: the ranks are out of step, nothing to agree on
          } catch (const std::exception& error) {
            if (!agree || !says_out_of_memory(error.what())) throw;
            out_of_memory = error.what();
            part = Part();  // what the failed forward or backward held goes before agreeing
          }
          if (agree) agree_on_memory(out_of_memory, flag);
          // Only their figures are kept: what autograd held is gone with the backward.
          part.loss = part.loss.detach();
          // A language model's figures need no logits: keeping a step's would hold
          // [batch, context, vocabulary] until the step ends, and halve auto further.
          part.logits = task_.language_model() ? torch::Tensor() : part.logits.detach();
          part.targets = micro.batch.targets;
          parts.push_back(std::move(part));
        }
      }
      break;
    } catch (const std::exception& error) {
      // With several ranks only an agreed out-of-memory is retried: one rank retrying alone would
      // leave the others in a collective it never joins.
      const bool retried = agree ? dynamic_cast<const AgreedOutOfMemory*>(&error) != nullptr
                                 : train_.micro_batch_auto() && says_out_of_memory(error.what());
      if (!retried) throw;
      parts.clear();
      abandon_and_halve(step_start, error, step, attempt_start, tried);
    }
  }
  // Not retried, as the optimizer step is not: the ranks are in their collectives by then.
  if (agree) strategy_.synchronize_gradients();
  // Not retried: an optimizer that failed part-way has updated some parameters already.
  optimizer_step(measure_norm);
  // The step is done: its figures count, and the step's loss to log is its last batch's mean.
  torch::Tensor loss;
  size_t next = 0;
  for (const Batch& batch : batches) {
    torch::Tensor sum;  // of the batch's per-sample losses
    size_t count = 0;
    for (int64_t seen = 0; seen < batch.size(); ++count) {
      const Part& part = parts[next++];
      metrics.add(part.loss, part.logits, part.targets);
      const torch::Tensor share = part.loss.detach() * static_cast<double>(part.targets.size(0));
      sum = sum.defined() ? sum + share : share;
      seen += part.targets.size(0);
    }
    meter_.add_batch(batch.size(), model_.training_flops(batch));
    // One part: its own mean, as a step of whole batches logs it.
    loss = count == 1 ? parts[next - 1].loss : sum / static_cast<double>(batch.size());
  }
  return loss;
}

void StepRunner::halve_micro_batch() {
  micro_batch_.size = (micro_batch_size() + 1) / 2;
  ++micro_batch_.oom_events;
}

StepRunner::StepStart StepRunner::remember_step_start() {
  StepStart start;
  if (!train_.micro_batch_auto()) return start;
  start.generators.emplace_back(at::detail::getDefaultCPUGenerator(), torch::Tensor());
  if (device_.is_cuda())
    start.generators.emplace_back(at::globalContext().defaultGenerator(device_), torch::Tensor());
  for (auto& [generator, state] : start.generators) {
    std::lock_guard<std::mutex> lock(generator.mutex());
    state = generator.get_state();
  }
  for (const auto& buffer : model_.buffers()) start.buffers.push_back(buffer.detach().clone());
  return start;
}

void StepRunner::abandon_and_halve(const StepStart& start, const std::exception& error,
                                   int64_t step,
                                   std::chrono::steady_clock::time_point attempt_start,
                                   std::vector<int64_t>& tried) {
  // The attempt's activations, gradients and cached blocks go. What the failed attempt queued (on
  // CUDA graphs' side stream too) ends before its tensors are dropped and the buffers put back.
  // Waiting is intended, outside runtime.sync_debug's check.
  if (device_.is_cuda()) {
    SyncDebugGuard allowed(c10::cuda::SyncDebugMode::L_DISABLED);
    torch::cuda::synchronize(device_.index());
  }
  optimizer_.libtorch().zero_grad(/*set_to_none=*/true);
  // (Under zero2 the optimizer's are chunks; the model's own gradients accumulated apart.)
  for (auto& parameter : model_.parameters()) parameter.mutable_grad().reset();
  if (device_.is_cuda()) c10::cuda::CUDACachingAllocator::emptyCache();
  // The CPU's cache: glibc keeps freed blocks (its mmap threshold grows with each large block
  // freed), which would leave the next allocation — a tensor, a thread's stack — no room.
  malloc_trim(0);
  for (const auto& [generator, state] : start.generators) {
    at::Generator g = generator;
    std::lock_guard<std::mutex> lock(g.mutex());
    g.set_state(state);
  }
  {
    torch::NoGradGuard no_grad;
    size_t i = 0;
    for (auto& buffer : model_.buffers()) buffer.copy_(start.buffers[i++]);
  }
  const int64_t size = micro_batch_size();
  tried.push_back(size);
  micro_batch_.oom_seconds += seconds_since(attempt_start);
  if (size <= 1)
    throw std::runtime_error(fmt::format(
        "out of memory at every micro-batch size tried ({} samples), down to one sample: {}",
        fmt::join(tried, ", "), first_line(error.what())));
  halve_micro_batch();
  log_(fmt::format(
      "out of memory at micro-batch {} (step {}): the same step again at micro-batch {} ({})", size,
      step, micro_batch_.size, first_line(error.what())));
}

void StepRunner::agree_on_memory(const std::string& out_of_memory, torch::Tensor& flag) {
  // The highest rank that ran out, plus one; 0 when none did. Read on the host, outside
  // runtime.sync_debug's check: the decision needs it.
  SyncDebugGuard allowed(c10::cuda::SyncDebugMode::L_DISABLED);
  flag.fill_(out_of_memory.empty() ? 0.0 : static_cast<double>(strategy_.rank() + 1));
  strategy_.all_reduce_max(flag);
  const auto rank = static_cast<int64_t>(flag.item<double>()) - 1;
  if (rank < 0) return;
  if (!out_of_memory.empty())
    throw AgreedOutOfMemory(fmt::format("rank {}: {}", strategy_.rank(), out_of_memory));
  throw AgreedOutOfMemory(fmt::format("rank {} ran out of memory", rank));
}

void StepRunner::graph_step(const Batch& batch, int64_t step, torch::Tensor& logits,
                            torch::Tensor& loss) {
  if (!train_.micro_batch_auto() || graph_->captured()) {
    graph_->run(batch, logits, loss);
    return;
  }
  const StepStart step_start = remember_step_start();
  std::vector<int64_t> tried;
  // How often CUDA's allocator found no room, freed its whole cache and tried again.
  auto allocator_retries = [&] {
    return c10::cuda::CUDACachingAllocator::getDeviceStats(device_.index()).num_alloc_retries;
  };
  while (true) {
    const auto attempt_start = std::chrono::steady_clock::now();
    const int64_t retries_before = allocator_retries();
    try {
      graph_->run(batch, logits, loss);
      // The last warm-up step fitted only by that retry, which the allocator does not make while
      // a capture is under way: the capture would run out of memory, and a failed capture ends
      // the run. It is captured at half the size instead (the steps so far keep theirs), after
      // one eager step at that size (which is checked the same way).
      if (graph_->captures_next() && allocator_retries() > retries_before) {
        const int64_t size = micro_batch_size();
        if (size > 1) {
          halve_micro_batch();
          log_(fmt::format(
              "micro-batch {} fitted only after CUDA's allocator emptied its cache and tried "
              "again, which it cannot do while capturing: the CUDA graph is captured at "
              "micro-batch {}",
              size, micro_batch_.size));
          graph_->warm_up_again();
        }
      }
      return;
    } catch (const CaptureFailed&) {
      throw;  // the process cannot go on (see CudaGraphStep)
    } catch (const std::exception& error) {
      // Once captured (a failure in the first replay) the graph keeps its size: not retried.
      if (!says_out_of_memory(error.what()) || graph_->captured()) throw;
      abandon_and_halve(step_start, error, step, attempt_start, tried);
    }
  }
}

void StepRunner::captured_step(const Batch& batch, torch::Tensor& logits, torch::Tensor& loss) {
  // A language model's figures need no logits (a whole batch's would take GiBs of the graph's
  // pool: [batch, context, vocabulary]); a classifier's are [batch, classes].
  const bool keep_logits = !task_.language_model();
  const std::vector<MicroBatch> parts = micro_batches(batch, micro_batch_.size);
  if (parts.size() == 1) {
    whole_step(batch, /*step_now=*/true, /*measure_norm=*/true, logits, loss);
    if (!keep_logits) logits = torch::Tensor();
    return;
  }
  std::vector<torch::Tensor> all_logits;
  torch::Tensor loss_sum;  // of the micro-batches' mean losses, each times its samples
  for (const MicroBatch& part : parts) {
    torch::Tensor part_logits, part_loss;
    forward_backward(part.batch, part.weight, /*sync=*/part.last, part_logits, part_loss);
    if (keep_logits) all_logits.push_back(part_logits.detach());
    const torch::Tensor share = part_loss.detach() * static_cast<double>(part.batch.size());
    loss_sum = loss_sum.defined() ? loss_sum + share : share;
  }
  logits = keep_logits ? torch::cat(all_logits) : torch::Tensor();
  loss = loss_sum / static_cast<double>(batch.size());
  optimizer_step(/*measure_norm=*/true);
}

}  // namespace trainyard
