// Checkpoints (runner/engine/trainer.h: the other files): whether one is due inside an epoch
// (ranks agree on the clock), writing the training state with each rank's own (random generators,
// the unfinished epoch's sums), where a mid-epoch state lies in this run's batches; and copies of
// the weights in host memory (the best epoch's).
#include <fmt/format.h>
#include <torch/cuda.h>

#include "common/text.h"
#include "runner/engine/checkpoint.h"
#include "runner/engine/trainer.h"
#include "trainyard/error.h"

namespace trainyard {

bool Trainer::checkpoint_due() {
  const TrainOptions& train = run_.train;
  if (train.checkpoint_every_steps > 0 && step_ % train.checkpoint_every_steps == 0) return true;
  if (train.checkpoint_every_minutes <= 0) return false;
  const bool late = seconds_since(last_checkpoint_) >= 60 * train.checkpoint_every_minutes;
  if (strategy_->world_size() == 1) return late;
  // Ranks' clocks differ: they agree at progress-line steps, with one small collective.
  if (step_ % train.log_every != 0) return false;
  auto flag = torch::tensor({late ? 1.0 : 0.0}, torch::kDouble);
  strategy_->all_reduce_max(flag);
  return flag.item<double>() > 0;
}

// A checkpoint inside epoch `epoch` after `batches_done` batches. The meter's counts include the
// unfinished epoch's loop, as they would at its end.
void Trainer::checkpoint(int64_t epoch, int64_t batches_done, const Accumulator& metrics,
                         double epoch_loop_seconds, double epoch_validation_seconds,
                         double epoch_comm_bytes, int64_t epoch_steps) {
  TrainingMeter with_epoch = meter_;
  with_epoch.add_epoch(epoch_loop_seconds, epoch_comm_bytes, epoch_steps);
  progress_.epoch = epoch;
  progress_.batch = batches_done;
  progress_.step = step_;
  progress_.epoch_seconds = epoch_loop_seconds;
  progress_.epoch_validation_seconds = epoch_validation_seconds;
  progress_.meter = with_epoch.counts();
  write_state(rank_state(metrics));
  if (!context_.output_prefix.empty())
    log("checkpoint at epoch {} batch {}/{} (step {}) written to {}", epoch + 1, batches_done,
        train_batches_, step_, checkpoint_dir(context_.output_prefix));
}

// Writes progress_ and the live state to <output_prefix>.state. Its time is not training time.
void Trainer::write_state(const NamedTensors& rank_state) {
  if (context_.output_prefix.empty()) return;  // a run without files (the engine on its own)
  // The steps queued before are training time, not the checkpoint's: wait for them first
  // (between steps, outside runtime.sync_debug's check).
  if (device_.is_cuda()) torch::cuda::synchronize(device_.index());
  const auto start = Clock::now();
  const double communicated_before = strategy_->communicated_bytes();
  progress_.train_seconds = train_seconds();
  record_micro_batch();
  const bool best_is_live = progress_.best_epoch == progress_.epoch && progress_.batch == 0;
  save_training_state(checkpoint_dir(context_.output_prefix), *model_, *strategy_, *optimizer_,
                      scaler_.get(), progress_,
                      best_is_live ? std::vector<torch::Tensor>() : best_weights_, rank_state);
  checkpoint_seconds_ += seconds_since(start);
  checkpoint_comm_bytes_ += strategy_->communicated_bytes() - communicated_before;
  last_checkpoint_ = Clock::now();
}

NamedTensors Trainer::rank_state(const Accumulator& metrics) const {
  NamedTensors state;
  {
    at::Generator cpu = at::detail::getDefaultCPUGenerator();
    std::lock_guard<std::mutex> lock(cpu.mutex());
    state.emplace_back("cpu_rng", cpu.get_state());
  }
  if (device_.is_cuda()) {
    at::Generator cuda = at::globalContext().defaultGenerator(device_);
    std::lock_guard<std::mutex> lock(cuda.mutex());
    state.emplace_back("cuda_rng", cuda.get_state());
  }
  for (auto& sum : metrics.state()) state.push_back(std::move(sum));
  return state;
}

void Trainer::record_micro_batch() {
  const MicroBatchState micro = steps_->recorded_micro_batch();
  progress_.micro_batch_size = micro.size;
  progress_.oom_events = micro.oom_events;
  progress_.oom_seconds = micro.oom_seconds;
}

int64_t Trainer::batch_within_epoch(const TrainerState& state) const {
  const int64_t samples_done = state.batch * state.batch_size * state.world_size;
  const int64_t per_batch = run_.train.batch_size * strategy_->world_size();
  if (state.batch_size <= 0 || samples_done % per_batch != 0)
    throw UserError(fmt::format(
        "{} stopped inside epoch {} after {} samples, which is not a whole number of this run's "
        "batches ({} x {} ranks); resume it with a batch size that divides it, or from a state "
        "written at an epoch's end",
        resume_.dir, state.epoch + 1, samples_done, run_.train.batch_size,
        strategy_->world_size()));
  return samples_done / per_batch;
}

// Copies of the model's state, in host memory: a copy on the GPU would hold a second model there
// for the rest of the run, in every rank's peak memory (and a whole one under fsdp). Sharded
// strategies hold a rank's share of the parameters: they are gathered whole for the copy, so
// "best" weights work the same under every strategy.
std::vector<torch::Tensor> Trainer::snapshot_weights() {
  std::vector<torch::Tensor> weights;
  auto host_copy = [](const torch::Tensor& t) {
    return t.detach().to(torch::kCPU, /*non_blocking=*/false, /*copy=*/true);
  };
  strategy_->with_full_parameters(*model_, [&] {
    for (const auto& p : model_->parameters()) weights.push_back(host_copy(p));
    for (const auto& b : model_->buffers()) weights.push_back(host_copy(b));
  });
  return weights;
}

void Trainer::restore_weights(const std::vector<torch::Tensor>& weights) {
  strategy_->with_full_parameters(*model_, [&] {
    torch::NoGradGuard no_grad;
    size_t i = 0;
    for (auto& p : model_->parameters()) p.copy_(weights[i++]);
    for (auto& b : model_->buffers()) b.copy_(weights[i++]);
  });
}

}  // namespace trainyard
