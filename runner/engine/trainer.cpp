// The training loop. train_run() builds the run's components (Trainer::build, in named stages),
// fits — each epoch trains (Trainer::train_epoch), validates and keeps the best weights
// (Trainer::end_of_epoch) — and finishes: restores the best weights, tests, and reads out the
// figures (Trainer::finish). The step itself — forward, backward, loss scaling, clipping, the
// optimizer — is Trainer::train_step, one screen; throughput, FLOP/s, data wait and memory are
// counted by the TrainingMeter (meter.h).
#include <malloc.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <optional>

#include <ATen/Context.h>
#include <ATen/Parallel.h>
#include <ATen/core/Generator.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <torch/cuda.h>
#include <torch/nn/functional/loss.h>
#include <torch/utils.h>

#include "common/error.h"
#include "common/metrics.h"
#include "common/text.h"
#include "components/data/loader.h"
#include "components/device/cuda_module.h"
#include "components/optim/optimizers.h"
#include "components/optim/schedulers.h"
#include "components/precision/loss_scaler.h"
#include "components/precision/precision.h"
#include "components/strategy/strategy.h"
#include "components/weights/load_weights.h"
#include "runner/engine/checkpoint.h"
#include "runner/engine/cuda_graph_step.h"
#include "runner/engine/device_feed.h"
#include "runner/engine/engine.h"
#include "runner/engine/meter.h"
#include "runner/engine/sync_debug.h"
#include "runner/engine/task.h"

namespace trainyard {

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// A figure read to the host. A NaN comes back without its sign: a diverged loss or gradient norm
// is often a NaN with the sign bit set, which fmt prints as "-nan", and "nan" and "-nan" in one
// log read as two different failures.
double host_value(const torch::Tensor& scalar) {
  const double value = scalar.item<double>();
  return std::isnan(value) ? std::numeric_limits<double>::quiet_NaN() : value;
}

// Out of memory on some rank, as every rank learned from agree_on_memory's collective: the only
// error a step split over several ranks retries (any other leaves the ranks out of step).
class AgreedOutOfMemory : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct SplitResult {
  double loss = 0;
  double accuracy = 0;  // NaN for a language model, which has none
};

// A split's quality figure under the run's task: accuracy (classification), or perplexity — the
// exponential of the mean loss per token — for a language model; under the given keys.
void add_quality(const Task& task, const SplitResult& split, const char* accuracy_key,
                 const char* perplexity_key, MetricValues& values) {
  if (task.language_model())
    values[perplexity_key] = std::exp(split.loss);
  else
    values[accuracy_key] = split.accuracy;
}

// "loss 0.6931 acc 50.00%", or "loss 3.2189 ppl 25.00" for a language model.
std::string describe(const Task& task, const SplitResult& split) {
  if (task.language_model())
    return fmt::format("loss {:.4f} ppl {:.2f}", split.loss, std::exp(split.loss));
  return fmt::format("loss {:.4f} acc {:.2f}%", split.loss, 100 * split.accuracy);
}

// The figure train.monitor names, of an epoch's recorded figures; NaN when it has none.
double monitored_figure(const std::string& monitor, const TrainerState& progress, int64_t epoch) {
  const auto figures = progress.epochs.find(epoch);
  if (figures == progress.epochs.end()) return std::nan("");
  const auto value = figures->second.find(monitor);  // "val_loss", "val_acc": metric names
  return value == figures->second.end() ? std::nan("") : value->second;
}

// train.monitor: whether the epoch just validated is kept over the one kept so far
// (progress.best_epoch). The first epoch is; a number beats a NaN (a diverged epoch); a tie goes to
// the later epoch, whose weights trained longer.
bool is_kept_over(const std::string& monitor, const SplitResult& val,
                  const TrainerState& progress) {
  if (progress.best_epoch == 0) return true;
  const double kept = monitored_figure(monitor, progress, progress.best_epoch);
  const bool loss = monitor == metric::kValLoss;
  const double value = loss ? val.loss : val.accuracy;
  if (std::isnan(value)) return std::isnan(kept);
  if (std::isnan(kept)) return true;
  return loss ? value <= kept : value >= kept;
}

// Why the tested weights are those of progress.best_epoch: for the log and the run's details.
std::string kept_epoch_reason(const TrainOptions& train, const TrainerState& progress) {
  if (train.checkpoint == "last") return "the last epoch trained (train.checkpoint: last)";
  const double value = monitored_figure(train.monitor, progress, progress.best_epoch);
  const std::string figure = train.monitor == metric::kValLoss
                                 ? fmt::format("lowest val loss {:.4f}", value)
                                 : fmt::format("highest val acc {:.2f}%", 100 * value);
  return figure + " (train.monitor: " + train.monitor + "; a tie keeps the later epoch)";
}

// Sums of loss and correct predictions kept on the device, read once per split: no host
// synchronisation inside the loop. The loss is summed over what the task's mean is over (samples,
// or a language model's tokens: `units`).
struct Accumulator {
  Accumulator(const torch::Device& device, const Task& task)
      : task(task),
        loss_sum(torch::zeros({}, torch::TensorOptions().dtype(torch::kDouble).device(device))),
        correct(torch::zeros({}, torch::TensorOptions().dtype(torch::kLong).device(device))) {}
  void add(const torch::Tensor& loss, const torch::Tensor& logits, const torch::Tensor& targets) {
    const int64_t n = task.loss_units(targets);
    loss_sum += loss.detach().to(torch::kDouble) * n;
    if (!task.language_model()) correct += task.correct(logits, targets);
    samples += targets.size(0);
    units += n;
  }
  SplitResult result() const {
    if (samples == 0) return {};
    return {host_value(loss_sum) / static_cast<double>(units),
            task.language_model()
                ? std::nan("")
                : static_cast<double>(correct.item<int64_t>()) / static_cast<double>(samples)};
  }
  const Task& task;
  torch::Tensor loss_sum, correct;
  int64_t samples = 0;
  int64_t units = 0;  // what loss_sum is over: samples, or tokens
};

int64_t limited(int64_t batches, int64_t limit) {
  return limit > 0 ? std::min(batches, limit) : batches;
}

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
  const Task task_;  // the model's: what the step's loss is and what the figures are

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

// --- build ---------------------------------------------------------------------------------------

void Trainer::build() {
  const DeviceInfo device = setup_device();
  setup_data();
  setup_model_and_resume();
  setup_optimization();
  setup_cuda_graph();
  restore_rank_state();
  log_setup(device);
  // The epochs this run finished before, once more: the store keeps one record per epoch, and one
  // may never have reached it (the controller killed between receiving and recording it).
  if (continuing_)
    for (const auto& [epoch, values] : progress_.epochs) context_.observer.on_epoch(epoch, values);
}

DeviceInfo Trainer::setup_device() {
  load_cuda_if_wanted(run_.runtime.accelerator);  // before anything asks LibTorch about CUDA
  std::string threads_why;
  at::set_num_threads(intra_op_threads(run_.runtime, threads_why));
  progress_.intra_op_threads = at::get_num_threads();  // recorded: a continued run uses it again
  threads_ = fmt::format("intra-op {} ({}), inter-op {}, data workers {}", at::get_num_threads(),
                         threads_why, at::get_num_interop_threads(), run_.runtime.data_workers);
  at::globalContext().setFloat32MatmulPrecision(run_.runtime.matmul_precision);
  DeviceInfo device = resolve_device(run_.runtime);
  if (!device.unavailable_reason.empty()) throw UserError(device.unavailable_reason);
  device_name_ = device.name;
  // One GPU per rank: the launcher's LOCAL_RANK picks it, as under torchrun.
  const char* local_rank = std::getenv("LOCAL_RANK");
  device_ =
      device.type == "cuda"
          ? torch::Device(torch::kCUDA,
                          static_cast<c10::DeviceIndex>(local_rank ? std::atoi(local_rank) : 0))
          : torch::Device(torch::kCPU);
  // The rank's GPU becomes this thread's current device, as torchrun scripts set it: what is
  // allocated by the current device rather than by a tensor's (FlatParameters' storage, pinned
  // memory's context, NCCL) lands on it.
  if (device_.is_cuda()) c10::cuda::set_device(device_.index());
  torch::manual_seed(static_cast<uint64_t>(run_.train.seed));
  feed_ = std::make_unique<DeviceFeed>(device_);
  return device;
}

void Trainer::setup_data() {
  const TrainOptions& train = run_.train;
  // The dataset adapts to the model's input: images resized to its image_size, sequences no longer
  // than its max_positions.
  DataContext data_context{
      .image_size = run_.model.capabilities.image_size,
      .max_positions = run_.model.capabilities.max_positions,
      .vocab_size = run_.model.capabilities.vocab_size,
      .log = [this](const std::string& line) { context_.observer.on_log(line); }};
  data_ = build_dataset(context_.registry, run_.dataset, data_context);
  // Training data are split across ranks (global batch = batch_size x ranks); every rank
  // evaluates the whole validation and test splits, so their figures agree without a reduction.
  strategy_ = build_strategy(context_.registry, run_.strategy,
                             {.timeout_s = run_.runtime.timeout_s, .device = device_});
  // Per-batch image work runs in the loader's threads on CPU runs, on the GPU after the copy on
  // CUDA runs (fetch()); pinned host memory lets that copy run asynchronously.
  const bool on_cpu = device_.is_cpu();
  auto loader_options = [&](bool training, const BatchTransform& transform) {
    return LoaderOptions{.shuffle = training && !data_.train_in_order,
                         .drop_last = training,
                         .workers = run_.runtime.data_workers,
                         .prefetch = run_.runtime.prefetch,
                         .pin_memory = !on_cpu,
                         .transform = on_cpu ? transform : BatchTransform(),
                         .rank = training ? strategy_->rank() : 0,
                         .world_size = training ? strategy_->world_size() : 1};
  };
  const auto seed = static_cast<uint64_t>(train.seed);
  const int64_t eval_batch = train.eval_batch_size > 0 ? train.eval_batch_size : train.batch_size;
  train_loader_ = std::make_unique<DataLoader>(data_.train, train.batch_size, seed,
                                               loader_options(true, data_.train_transform));
  val_loader_ = std::make_unique<DataLoader>(data_.validation, eval_batch, seed,
                                             loader_options(false, data_.eval_transform));
  test_loader_ = std::make_unique<DataLoader>(data_.test, eval_batch, seed,
                                              loader_options(false, data_.eval_transform));
  train_batches_ = limited(train_loader_->num_batches(), train.limit_train_batches);
  if (train_batches_ == 0)
    throw UserError(
        fmt::format("the training split has {} samples, fewer than one batch of {}; "
                    "lower train.batch_size",
                    data_.train->size(), train.batch_size));
}

void Trainer::setup_model_and_resume() {
  model_ =
      build_model(context_.registry, run_.model,
                  ModelContext{.num_classes = data_.num_classes, .vocab_size = data_.vocab_size});
  if (!run_.weights.weights.empty()) {
    WeightsReport report = load_weights(*model_, run_.weights.weights, run_.weights.strict);
    log("weights {}: {}", run_.weights.weights, report.summary());
  }
  continuing_ = !context_.continue_from.empty();
  resume_dir_ = continuing_ ? context_.continue_from : run_.train.resume_from;
  const std::string& resume = resume_dir_;
  if (resume.empty()) return;
  progress_ = read_trainer_state(resume);
  if (progress_.epoch > run_.train.epochs)
    throw UserError(
        fmt::format("train.resume_from: {} has trained {}, more than train.epochs ({}); "
                    "raise train.epochs",
                    resume, plural(progress_.epoch, "epoch"), run_.train.epochs));
  load_model_state(resume, *model_);
  best_weights_ = load_best_weights(resume, *model_);
  step_ = progress_.step;
  start_epoch_ = progress_.epoch;
  start_step_ = progress_.step;
  if (progress_.batch > 0) start_batch_ = batch_within_epoch(progress_);
  if (continuing_) {
    trained_before_ = progress_.train_seconds;
    resumed_epoch_seconds_ = progress_.epoch_seconds;
    resumed_epoch_validation_seconds_ = progress_.epoch_validation_seconds;
    meter_.restore_counts(progress_.meter);
  }
  const std::vector<std::map<std::string, torch::Tensor>> ranks = load_rank_states(resume);
  if (ranks.size() == static_cast<size_t>(strategy_->world_size())) {
    resumed_rank_state_ = ranks[static_cast<size_t>(strategy_->rank())];
  } else if (!ranks.empty() && strategy_->rank() == 0) {
    // Another world size: the unfinished epoch's sums go on at rank 0 (the epoch's figures are
    // the sum over ranks), the random states start afresh.
    for (const auto& rank : ranks)
      for (const char* name : {"loss_sum", "correct", "samples", "units"})
        if (rank.count(name))
          resumed_rank_state_[name] = resumed_rank_state_.count(name)
                                          ? resumed_rank_state_[name] + rank.at(name)
                                          : rank.at(name);
  }
}

void Trainer::setup_optimization() {
  const TrainOptions& train = run_.train;
  precision_ =
      build_precision(context_.registry, run_.runtime.precision, {.device = device_.type()});
  strategy_->setup(*model_, device_, precision_->param_dtype());
  if (precision_->loss_scaling()) scaler_ = std::make_unique<LossScaler>(device_);
  std::map<std::string, std::string> attributes = precision_->attributes();
  attributes["matmul_precision"] = run_.runtime.matmul_precision;
  attributes["threads"] = threads_;
  // Every rank's device counts in the run's device-hours (reports' cost), over all nodes.
  attributes["ranks"] = std::to_string(strategy_->world_size());
  attributes["device_type"] = device_.type() == torch::kCUDA ? "cuda" : "cpu";
  attributes["reduce_dtype"] =
      c10::toString(strategy_->reduce_dtype());  // the strategy may reduce in another
  attributes.merge(strategy_->attributes());
  attributes.insert(data_.details.begin(), data_.details.end());  // the classes' names, the split
  std::vector<std::string> plugins;  // where the run's components may come from, and which build
  for (const auto& plugin : run_.plugins)
    plugins.push_back(fmt::format("{} (sha256 {})", plugin.path, plugin.sha256.substr(0, 16)));
  if (!plugins.empty()) attributes["plugins"] = join(plugins, "; ");
  context_.observer.on_setup(attributes);
  optimizer_ =
      build_optimizer(context_.registry, run_.optimizer, strategy_->optimizer_parameters(*model_));
  const std::string& resume = resume_dir_;
  if (!resume.empty()) {
    load_optimizer_state(resume, *model_, *strategy_, *optimizer_, scaler_.get());
    log("resumed from {}: {} and {} done (written by {} on {})", resume,
        plural(progress_.epoch, "epoch"), plural(progress_.step, "optimizer step"),
        progress_.strategy, plural(progress_.world_size, "rank"));
    // The resumed weights are the best so far: keep a copy, as the uninterrupted run would have.
    if (train.checkpoint == "best" && best_weights_.empty() &&
        progress_.best_epoch == progress_.epoch && progress_.epoch < train.epochs)
      best_weights_ = snapshot_weights();
  }
  progress_.strategy = run_.strategy.name;
  progress_.world_size = strategy_->world_size();
  progress_.batch_size = train.batch_size;
  // The same run continuing starts at the micro-batch it had come down to.
  micro_batch_ = train.micro_batch_auto() && continuing_ ? progress_.micro_batch_size
                                                         : train.micro_batch_fixed();
  if (micro_batch_ >= train.batch_size) micro_batch_ = 0;
  progress_.micro_batch_size = train.micro_batch_auto() ? micro_batch_ : 0;
  if (continuing_) {
    oom_events_ = progress_.oom_events, oom_seconds_ = progress_.oom_seconds;
  } else {  // a state of another run (train.resume_from): its events are not this run's
    progress_.oom_events = 0, progress_.oom_seconds = 0;
  }
  base_lr_ = base_learning_rate(run_.optimizer.options);
  total_steps_ = train.epochs * ((train_batches_ + train.grad_accum - 1) / train.grad_accum);
  schedule_ = build_schedule(context_.registry, run_.scheduler, {.total_steps = total_steps_});
}

void Trainer::setup_cuda_graph() {
  sync_debug_ = SyncDebugGuard::mode(run_.runtime.sync_debug, device_);
  if (run_.runtime.compile != "cuda-graphs") return;
  // Validation ensured a CUDA device, one process, whole steps and an optimizer stepping on the
  // device.
  DeviceStepping* on_device = device_stepping(optimizer_->libtorch());
  if (!device_.is_cuda() || !on_device)
    throw std::logic_error(
        "cuda-graphs without a CUDA device or an optimizer that steps on the device");
  lr_tensor_ = on_device->learning_rate_tensor(device_);
  graph_ = std::make_unique<CudaGraphStep>(
      device_,
      [this](const Batch& batch, torch::Tensor& logits, torch::Tensor& loss) {
        captured_step(batch, logits, loss);
      },
      [this](const std::string& line) { context_.observer.on_log(line); });
}

// Last in build(): building the model drew from the random generators; from here on they must be
// where the interrupted run left them.
void Trainer::restore_rank_state() {
  if (resumed_rank_state_.empty()) return;
  auto restore = [&](const char* name, at::Generator generator) {
    auto it = resumed_rank_state_.find(name);
    if (it == resumed_rank_state_.end()) return;
    std::lock_guard<std::mutex> lock(generator.mutex());
    generator.set_state(it->second);
  };
  restore("cpu_rng", at::detail::getDefaultCPUGenerator());
  if (device_.is_cuda()) restore("cuda_rng", at::globalContext().defaultGenerator(device_));
  if (progress_.batch > 0)
    log("continuing epoch {} at batch {} of {} (optimizer step {})", progress_.epoch + 1,
        start_batch_, train_batches_, step_);
}

void Trainer::log_setup(const DeviceInfo& device) const {
  const int ranks = strategy_->world_size();
  log("device {} ({}), precision {} ({}), strategy {} on {} rank{} (gradients averaged in {})",
      device.type, device.name, precision_->name(), precision_->describe(), run_.strategy.name,
      ranks, ranks == 1 ? "" : "s", c10::toString(strategy_->reduce_dtype()));
  log("CPU threads: {}", threads_);
  log("model {} with {} parameters; data: {} train / {} val / {} test {}", run_.model.name,
      count_parameters(*model_), data_.train->size(), data_.validation->size(), data_.test->size(),
      task_.language_model() ? "token windows (causal-lm)"
                             : fmt::format("samples, {} classes", data_.num_classes));
  log("{} x {} of {}, {}", plural(run_.train.epochs, "epoch"),
      plural(train_batches_, "batch", "batches"), run_.train.batch_size,
      plural(total_steps_, "optimizer step"));
}

// --- fit -----------------------------------------------------------------------------------------

void Trainer::fit() {
  for (int64_t epoch = progress_.epoch; epoch < run_.train.epochs && !stopped_early(); ++epoch) {
    const auto epoch_start = Clock::now();
    const SplitResult train = train_epoch(epoch);
    const auto val_start = Clock::now();
    const SplitResult val = evaluate(*val_loader_);
    record_validation(val, seconds_since(val_start));
    // An epoch continued after an interruption: its time before, too.
    const double before =
        resumed_inside(epoch) ? resumed_epoch_seconds_ + resumed_epoch_validation_seconds_ : 0;
    end_of_epoch(epoch, seconds_since(epoch_start) + before, train, val);
  }
}

SplitResult Trainer::train_epoch(int64_t epoch) {
  const TrainOptions& train = run_.train;
  model_->train();
  // A run resumed inside this epoch starts at its batch, with the sums of the batches before.
  const bool resumed_here = resumed_inside(epoch);
  const int64_t first = resumed_here ? start_batch_ : 0;
  train_loader_->start_epoch(epoch, train_batches_, first);
  Accumulator metrics(device_, task_);
  if (resumed_here) {
    auto take = [&](const char* name) {
      auto it = resumed_rank_state_.find(name);
      return it == resumed_rank_state_.end() ? torch::Tensor() : it->second;
    };
    if (auto loss_sum = take("loss_sum"); loss_sum.defined())
      metrics.loss_sum.copy_(loss_sum.reshape({}));
    if (auto correct = take("correct"); correct.defined())
      metrics.correct.copy_(correct.reshape({}));
    if (auto samples = take("samples"); samples.defined())
      metrics.samples = samples.item<int64_t>();
    // (A state written before the task seam has no units: they were the samples.)
    auto units = take("units");
    metrics.units = units.defined() ? units.item<int64_t>() : metrics.samples;
  }
  const auto start = Clock::now();
  const int64_t samples_before = metrics.samples;  // the rate is of this process's batches
  const double before_seconds = resumed_here ? resumed_epoch_seconds_ : 0;
  // Training's traffic, not the checkpoints' gathers.
  const double communicated_before = strategy_->communicated_bytes() - checkpoint_comm_bytes_;
  auto communicated = [&] {
    return strategy_->communicated_bytes() - checkpoint_comm_bytes_ - communicated_before;
  };
  const int64_t steps_before = step_;
  std::vector<Batch> step_batches;  // with micro-batches: the step's loader batches, until its last
  double validating = 0;            // seconds of validations inside the epoch: not the loop's time
  const double validated_before = resumed_here ? resumed_epoch_validation_seconds_ : 0;
  auto loop_seconds = [&] { return before_seconds + seconds_since(start) - validating; };
  for (int64_t b = first; b < train_batches_; ++b) {
    if (stop_requested()) {
      // One process at a step's boundary can save where it is; ranks cannot agree on the moment
      // without a collective per step, so they fall back to their last checkpoint.
      if (strategy_->world_size() == 1 && b % train.grad_accum == 0 && b > first)
        checkpoint(epoch, b, metrics, loop_seconds(), validated_before + validating, communicated(),
                   step_ - steps_before);
      throw Interrupted();
    }
    const bool step_now = (b + 1) % train.grad_accum == 0 || b + 1 == train_batches_;
    torch::Tensor logits, loss;
    {
      SyncDebugGuard no_host_waits(sync_debug_);
      const auto wait_start = Clock::now();
      Batch batch = fetch(*train_loader_, data_.train_transform, epoch, b, /*training=*/true);
      meter_.add_data_wait(seconds_since(wait_start));
      if (task_.language_model()) tokens_per_sample_ = batch.targets.size(1);

      if (step_now) set_learning_rate(base_lr_ * schedule_(step_));
      if (splits_steps() && !graph_) {  // a graph splits its own (grad_accum is 1)
        step_batches.push_back(std::move(batch));
        if (step_now) {
          train_split_step(step_batches, /*measure_norm=*/logs_after(step_ + 1), metrics, loss);
          step_batches.clear();
        }
      } else {
        if (graph_)
          graph_step(batch, logits, loss);  // step_now always: graphs need grad_accum 1
        else
          train_step(batch, step_now, /*measure_norm=*/step_now && logs_after(step_ + 1), logits,
                     loss);
        metrics.add(loss, logits, batch.targets);
        meter_.add_batch(batch.size(), model_->training_flops(batch));
      }
    }
    if (!step_now) continue;
    if (logs_after(++step_)) log_progress(epoch, loss, metrics.samples - samples_before, start);
    // (At the epoch's last step the epoch's own validation follows.)
    if (b + 1 < train_batches_ && validates_after(step_)) validating += validate_inside_epoch();
    if (b + 1 < train_batches_ && checkpoint_due())
      checkpoint(epoch, b + 1, metrics, loop_seconds(), validated_before + validating,
                 communicated(), step_ - steps_before);
  }
  // The host may be many steps (graph replays) ahead of the GPU: the epoch's time is the device's.
  // Waiting here is intended, outside runtime.sync_debug's check.
  if (device_.is_cuda()) torch::cuda::synchronize(device_.index());
  const double seconds = loop_seconds();
  meter_.add_epoch(seconds, communicated(), step_ - steps_before);
  if (strategy_->world_size() > 1) {  // loss and accuracy over every rank's share
    auto samples = torch::tensor({static_cast<double>(metrics.samples)}, torch::kDouble);
    auto units = torch::tensor({static_cast<double>(metrics.units)}, torch::kDouble);
    strategy_->all_reduce_sum(units);
    metrics.units = static_cast<int64_t>(units.item<double>());
    strategy_->all_reduce_sum(metrics.loss_sum);
    strategy_->all_reduce_sum(metrics.correct);
    strategy_->all_reduce_sum(samples);
    metrics.samples = static_cast<int64_t>(samples.item<double>());
  }
  epoch_samples_per_s_ = static_cast<double>(metrics.samples) / seconds;
  return metrics.result();
}

void Trainer::train_step(const Batch& batch, bool step_now, bool measure_norm,
                         torch::Tensor& logits, torch::Tensor& loss) {
  forward_backward(batch, 1.0, /*sync=*/step_now, logits, loss);
  if (step_now) optimizer_step(measure_norm);
}

void Trainer::forward_backward(const Batch& batch, double weight, bool sync, torch::Tensor& logits,
                               torch::Tensor& loss) {
  const TrainOptions& train = run_.train;
  {
    Precision::AutocastScope autocast(*precision_, device_.type());
    logits = strategy_->forward(*model_, batch);
    loss = task_.loss(logits, batch.targets);
  }
  if (!forward_dtype_) forward_dtype_ = logits.scalar_type();          // metadata: no device read
  torch::Tensor backward_loss = weight != 1.0 ? loss * weight : loss;  // a micro-batch's share
  if (train.grad_accum > 1) backward_loss = backward_loss / static_cast<double>(train.grad_accum);
  strategy_->backward(scaler_ ? scaler_->scale(backward_loss) : backward_loss, sync);
}

void Trainer::train_split_step(const std::vector<Batch>& batches, bool measure_norm,
                               Accumulator& metrics, torch::Tensor& loss) {
  struct Part {
    torch::Tensor loss, logits, targets;
  };
  std::vector<Part> parts;
  const StepStart step_start = remember_step_start();
  // With several ranks every micro-batch's backward runs apart (nothing communicated) and the ranks
  // agree after each whether any ran out of memory, so none goes on at another size; once all
  // agree the step fitted, its gradients are synchronised as the last backward would have.
  const bool agree = run_.train.micro_batch_auto() && strategy_->world_size() > 1;
  // Allocated now, not when memory has run out.
  torch::Tensor flag =
      agree ? torch::zeros({1}, torch::TensorOptions().dtype(torch::kDouble).device(device_))
            : torch::Tensor();
  std::vector<int64_t> tried;
  while (true) {
    const auto attempt_start = Clock::now();
    try {
      for (size_t i = 0; i < batches.size(); ++i) {
        const Batch& batch = batches[i];
        const int64_t n = batch.size();
        const int64_t m = micro_batch_ > 0 ? std::min(micro_batch_, n) : n;
        for (int64_t start = 0; start < n; start += m) {
          const int64_t length = std::min(m, n - start);
          const bool last = i + 1 == batches.size() && start + length == n;
          Part part;
          const Batch micro = length == n ? batch : batch.slice(start, length);
          std::string out_of_memory;
          try {
            forward_backward(micro, length == n ? 1.0 : static_cast<double>(length) / n,
                             /*sync=*/last && !agree, part.logits, part.loss);
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
          part.targets = micro.targets;
          parts.push_back(std::move(part));
        }
      }
      break;
    } catch (const std::exception& error) {
      // With several ranks only an agreed out-of-memory is retried: one rank retrying alone would
      // leave the others in a collective it never joins.
      const bool retried = agree
                               ? dynamic_cast<const AgreedOutOfMemory*>(&error) != nullptr
                               : run_.train.micro_batch_auto() && says_out_of_memory(error.what());
      if (!retried) throw;
      parts.clear();
      abandon_and_halve(step_start, error, attempt_start, tried);
    }
  }
  // Not retried, as the optimizer step is not: the ranks are in their collectives by then.
  if (agree) strategy_->synchronize_gradients();
  // Not retried: an optimizer that failed part-way has updated some parameters already.
  optimizer_step(measure_norm);
  // The step is done: its figures count, and the step's loss to log is its last batch's mean.
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
    meter_.add_batch(batch.size(), model_->training_flops(batch));
    // One part: its own mean, as a step of whole batches logs it.
    loss = count == 1 ? parts[next - 1].loss : sum / static_cast<double>(batch.size());
  }
}

void Trainer::halve_micro_batch() {
  micro_batch_ = (micro_batch_size() + 1) / 2;
  ++oom_events_;
  progress_.micro_batch_size = micro_batch_;  // a continued run starts there
  progress_.oom_events = oom_events_;
  progress_.oom_seconds = oom_seconds_;
}

Trainer::StepStart Trainer::remember_step_start() {
  StepStart start;
  if (!run_.train.micro_batch_auto()) return start;
  start.generators.emplace_back(at::detail::getDefaultCPUGenerator(), torch::Tensor());
  if (device_.is_cuda())
    start.generators.emplace_back(at::globalContext().defaultGenerator(device_), torch::Tensor());
  for (auto& [generator, state] : start.generators) {
    std::lock_guard<std::mutex> lock(generator.mutex());
    state = generator.get_state();
  }
  for (const auto& buffer : model_->buffers()) start.buffers.push_back(buffer.detach().clone());
  return start;
}

void Trainer::abandon_and_halve(const StepStart& start, const std::exception& error,
                                Clock::time_point attempt_start, std::vector<int64_t>& tried) {
  // The attempt's activations, gradients and cached blocks go. What the failed attempt queued (on
  // CUDA graphs' side stream too) ends before its tensors are dropped and the buffers put back.
  // Waiting is intended, outside runtime.sync_debug's check.
  if (device_.is_cuda()) {
    SyncDebugGuard allowed(c10::cuda::SyncDebugMode::L_DISABLED);
    torch::cuda::synchronize(device_.index());
  }
  optimizer_->libtorch().zero_grad(/*set_to_none=*/true);
  // (Under zero2 the optimizer's are chunks; the model's own gradients accumulated apart.)
  for (auto& parameter : model_->parameters()) parameter.mutable_grad().reset();
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
    for (auto& buffer : model_->buffers()) buffer.copy_(start.buffers[i++]);
  }
  const int64_t size = micro_batch_size();
  tried.push_back(size);
  oom_seconds_ += seconds_since(attempt_start);
  if (size <= 1)
    throw std::runtime_error(fmt::format(
        "out of memory at every micro-batch size tried ({} samples), down to one sample: {}",
        fmt::join(tried, ", "), first_line(error.what())));
  halve_micro_batch();
  log("out of memory at micro-batch {} (step {}): the same step again at micro-batch {} ({})", size,
      step_ + 1, micro_batch_, first_line(error.what()));
}

void Trainer::graph_step(const Batch& batch, torch::Tensor& logits, torch::Tensor& loss) {
  if (!run_.train.micro_batch_auto() || graph_->captured()) {
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
    const auto attempt_start = Clock::now();
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
          log("micro-batch {} fitted only after CUDA's allocator emptied its cache and tried "
              "again, which it cannot do while capturing: the CUDA graph is captured at "
              "micro-batch {}",
              size, micro_batch_);
          graph_->warm_up_again();
        }
      }
      return;
    } catch (const CaptureFailed&) {
      throw;  // the process cannot go on (see CudaGraphStep)
    } catch (const std::exception& error) {
      // Once captured (a failure in the first replay) the graph keeps its size: not retried.
      if (!says_out_of_memory(error.what()) || graph_->captured()) throw;
      abandon_and_halve(step_start, error, attempt_start, tried);
    }
  }
}

void Trainer::captured_step(const Batch& batch, torch::Tensor& logits, torch::Tensor& loss) {
  const int64_t n = batch.size(), m = micro_batch_ > 0 ? std::min(micro_batch_, n) : n;
  // A language model's figures need no logits (a whole batch's would take GiBs of the graph's
  // pool: [batch, context, vocabulary]); a classifier's are [batch, classes].
  const bool keep_logits = !task_.language_model();
  if (m == n) {
    train_step(batch, /*step_now=*/true, /*measure_norm=*/true, logits, loss);
    if (!keep_logits) logits = torch::Tensor();
    return;
  }
  std::vector<torch::Tensor> all_logits;
  torch::Tensor loss_sum;  // of the micro-batches' mean losses, each times its samples
  for (int64_t start = 0; start < n; start += m) {
    const int64_t length = std::min(m, n - start);
    torch::Tensor part_logits, part_loss;
    forward_backward(batch.slice(start, length), static_cast<double>(length) / n,
                     /*sync=*/start + length == n, part_logits, part_loss);
    if (keep_logits) all_logits.push_back(part_logits.detach());
    const torch::Tensor share = part_loss.detach() * static_cast<double>(length);
    loss_sum = loss_sum.defined() ? loss_sum + share : share;
  }
  logits = keep_logits ? torch::cat(all_logits) : torch::Tensor();
  loss = loss_sum / static_cast<double>(n);
  optimizer_step(/*measure_norm=*/true);
}

void Trainer::agree_on_memory(const std::string& out_of_memory, torch::Tensor& flag) {
  // The highest rank that ran out, plus one; 0 when none did. Read on the host, outside
  // runtime.sync_debug's check: the decision needs it.
  SyncDebugGuard allowed(c10::cuda::SyncDebugMode::L_DISABLED);
  flag.fill_(out_of_memory.empty() ? 0.0 : static_cast<double>(strategy_->rank() + 1));
  strategy_->all_reduce_max(flag);
  const auto rank = static_cast<int64_t>(flag.item<double>()) - 1;
  if (rank < 0) return;
  if (!out_of_memory.empty())
    throw AgreedOutOfMemory(fmt::format("rank {}: {}", strategy_->rank(), out_of_memory));
  throw AgreedOutOfMemory(fmt::format("rank {} ran out of memory", rank));
}

void Trainer::optimizer_step(bool measure_norm) {
  const TrainOptions& train = run_.train;
  if (scaler_)
    scaler_->unscale(optimizer_->libtorch());  // true gradients before clipping and the step
  if (train.clip_grad_norm > 0)
    grad_norm_ = strategy_->clip_grad_norm(optimizer_->libtorch(), train.clip_grad_norm);
  else if (measure_norm)
    grad_norm_ = strategy_->gradient_norm(optimizer_->libtorch());
  strategy_->step(optimizer_->libtorch(),
                  scaler_ ? scaler_->found_inf() : torch::Tensor());  // skipped on overflow
  if (scaler_) scaler_->update();
}

// A progress line: the logging read of the loss (and gradient norm) waits for the device, which is
// allowed here, outside the sync check; the interval's ms per step then count the device's time.
void Trainer::log_progress(int64_t epoch, const torch::Tensor& loss, int64_t epoch_samples,
                           Clock::time_point epoch_start) {
  const double loss_value = host_value(loss);
  const std::string norm =
      grad_norm_.defined() ? fmt::format(" grad norm {:.3g}", host_value(grad_norm_)) : "";
  const double ms_per_step = meter_.ms_per_step_since_last(step_);
  const double elapsed = seconds_since(run_start_);
  const double eta = elapsed / static_cast<double>(step_ - start_step_) *
                     static_cast<double>(total_steps_ - step_);
  const double samples_per_s = static_cast<double>(epoch_samples) / seconds_since(epoch_start);
  const std::string rate =
      task_.language_model()
          ? fmt::format("{:.0f} tokens/s", samples_per_s * static_cast<double>(tokens_per_sample_))
          : fmt::format("{:.1f} samples/s", samples_per_s);
  std::string line =
      fmt::format("epoch {}/{} step {}/{} loss {:.4f} lr {:.3g}{} {:.1f} ms/step {} ETA {}",
                  epoch + 1, run_.train.epochs, step_, total_steps_, loss_value,
                  base_lr_ * schedule_(step_ - 1), norm, ms_per_step, rate, format_duration(eta));
  context_.observer.on_step(
      step_, {{metric::kTrainLoss, loss_value}, {metric::kElapsedSeconds, train_seconds()}});
  context_.observer.on_progress({.epoch = epoch + 1,
                                 .epochs = run_.train.epochs,
                                 .step = step_,
                                 .total_steps = total_steps_,
                                 .loss = loss_value,
                                 .samples_per_s = samples_per_s * strategy_->world_size(),
                                 .tokens_per_sample = tokens_per_sample_,
                                 .eta_seconds = eta,
                                 .micro_batch = micro_batch_,
                                 .oom_events = oom_events_,
                                 .line = std::move(line)});
}

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
  state.emplace_back("loss_sum", metrics.loss_sum.reshape({1}));
  state.emplace_back("correct", metrics.correct.reshape({1}));
  state.emplace_back("samples", torch::tensor({metrics.samples}, torch::kLong));
  state.emplace_back("units", torch::tensor({metrics.units}, torch::kLong));
  return state;
}

int64_t Trainer::batch_within_epoch(const TrainerState& state) const {
  const int64_t samples_done = state.batch * state.batch_size * state.world_size;
  const int64_t per_batch = run_.train.batch_size * strategy_->world_size();
  if (state.batch_size <= 0 || samples_done % per_batch != 0)
    throw UserError(fmt::format(
        "{} stopped inside epoch {} after {} samples, which is not a whole number of this run's "
        "batches ({} x {} ranks); resume it with a batch size that divides it, or from a state "
        "written at an epoch's end",
        resume_dir_, state.epoch + 1, samples_done, run_.train.batch_size,
        strategy_->world_size()));
  return samples_done / per_batch;
}

SplitResult Trainer::evaluate(DataLoader& loader) {
  torch::NoGradGuard no_grad;
  model_->eval();
  strategy_->before_evaluation(*model_);  // every rank evaluates the same model
  Accumulator metrics(device_, task_);
  const int64_t batches = limited(loader.num_batches(), run_.train.limit_eval_batches);
  loader.start_epoch(0, batches);
  for (int64_t b = 0; b < batches; ++b) {
    check_stop();
    Batch batch = fetch(loader, data_.eval_transform, 0, b, /*training=*/false);
    // With micro-batches, evaluation takes them too: what fits training fits here.
    const int64_t n = batch.size(), m = micro_batch_ > 0 ? std::min(micro_batch_, n) : n;
    for (int64_t start = 0; start < n; start += m) {
      const Batch part = m == n ? batch : batch.slice(start, std::min(m, n - start));
      Precision::AutocastScope autocast(*precision_, device_.type());
      auto logits = strategy_->forward(*model_, part);
      metrics.add(task_.loss(logits, part.targets), logits, part.targets);
    }
  }
  return metrics.result();
}

double Trainer::validate_inside_epoch() {
  // The steps queued before are training's time, not the validation's.
  if (device_.is_cuda()) torch::cuda::synchronize(device_.index());
  const auto start = Clock::now();
  const SplitResult val = evaluate(*val_loader_);
  model_->train();
  const double seconds = seconds_since(start);
  record_validation(val, seconds);
  log("step {}/{}: val {} ({})", step_, total_steps_, describe(task_, val),
      format_duration(seconds));
  meter_.ms_per_step_since_last(step_);  // the next progress line's interval starts here
  return seconds;
}

void Trainer::record_validation(const SplitResult& val, double seconds) {
  MetricValues values = {{metric::kValLoss, val.loss},
                         {metric::kValSeconds, seconds},
                         {metric::kElapsedSeconds, train_seconds()}};
  add_quality(task_, val, metric::kValAcc, metric::kValPerplexity, values);
  context_.observer.on_step(step_, values);
}

// Keeps the best epoch's weights, records the epoch's metrics and, with train.save_state, writes
// the training state.
void Trainer::end_of_epoch(int64_t epoch, double epoch_seconds, const SplitResult& train,
                           const SplitResult& val) {
  const TrainOptions& options = run_.train;
  if (!task_.language_model())
    progress_.best_val_acc = std::max(progress_.best_val_acc, val.accuracy);
  if (is_kept_over(options.monitor, val, progress_)) {
    progress_.best_epoch = epoch + 1;
    if (options.checkpoint == "best" && epoch + 1 < options.epochs)
      best_weights_ = snapshot_weights();
    else
      best_weights_.clear();  // the live weights are the best
  }
  watch_for_early_stop(val);
  MetricValues values = {{metric::kTrainLoss, train.loss},
                         {metric::kValLoss, val.loss},
                         {metric::kEpochSeconds, epoch_seconds},
                         {metric::kLearningRate, base_lr_ * schedule_(step_ - 1)},
                         {metric::kEpochSamplesPerSecond, epoch_samples_per_s_}};
  add_quality(task_, train, metric::kTrainAcc, metric::kTrainPerplexity, values);
  add_quality(task_, val, metric::kValAcc, metric::kValPerplexity, values);
  log("epoch {}/{} done in {}: train {} | val {}", epoch + 1, options.epochs,
      format_duration(epoch_seconds), describe(task_, train), describe(task_, val));
  // Recorded before the checkpoint: a run killed between the two trains the epoch again and
  // records the same figures over these.
  context_.observer.on_epoch(epoch + 1, values);
  progress_.epochs[epoch + 1] = values;
  progress_.epoch = epoch + 1;
  progress_.batch = 0;
  progress_.step = step_;
  progress_.epoch_seconds = 0;
  progress_.epoch_validation_seconds = 0;
  progress_.meter = meter_.counts();
  write_state(rank_state(Accumulator(device_, task_)));
  if (context_.output_prefix.empty()) return;
  const std::string dir = checkpoint_dir(context_.output_prefix);
  if (options.save_state && epoch == start_epoch_)
    context_.observer.on_setup({{"state_path", dir}});
  log("training state of epoch {} written to {}", epoch + 1, dir);
}

void Trainer::watch_for_early_stop(const SplitResult& val) {
  const TrainOptions& options = run_.train;
  if (options.early_stop_patience == 0) return;
  const bool loss = options.early_stop_metric == "val_loss";
  const double value = loss ? val.loss : val.accuracy;
  const bool first = std::isnan(progress_.best_monitored);
  const bool improved =
      first || (loss ? value < progress_.best_monitored - options.early_stop_min_delta
                     : value > progress_.best_monitored + options.early_stop_min_delta);
  if (improved) {
    progress_.best_monitored = value;
    progress_.epochs_without_improvement = 0;
    return;
  }
  if (++progress_.epochs_without_improvement < options.early_stop_patience) return;
  const std::string reason = fmt::format(
      "early stop after epoch {} of {}: {} did not improve by more than {} for {} (best {:.4f})",
      progress_.epoch + 1, options.epochs, options.early_stop_metric, options.early_stop_min_delta,
      plural(options.early_stop_patience, "epoch"), progress_.best_monitored);
  log("{}", reason);
  context_.observer.on_setup({{"end_reason", reason}});
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

// --- finish --------------------------------------------------------------------------------------

MetricValues Trainer::run() {
  build();
  meter_.start_device(device_);
  meter_.start_steps(step_);
  run_start_ = last_checkpoint_ = Clock::now();
  fit();
  return finish(train_seconds());
}

MetricValues Trainer::finish(double train_seconds) {
  if (graph_) context_.observer.on_setup({{"cuda_graphs", graph_->summary(step_ - start_step_)}});
  if (forward_dtype_)
    context_.observer.on_setup({{"forward_dtype", c10::toString(*forward_dtype_)}});
  if (!run_.train.micro_batch_size.empty())  // the report's run details
    context_.observer.on_setup(
        {{"micro_batch",
          fmt::format("{} of {}{}", micro_batch_size(), run_.train.batch_size,
                      oom_events_ > 0 ? fmt::format(" after {} on out-of-memory ({} lost)",
                                                    plural(oom_events_, "halving"),
                                                    format_duration(oom_seconds_))
                                      : "")}});
  restore_best_weights();
  if (progress_.best_epoch > 0)
    context_.observer.on_setup(
        {{"kept_epoch", fmt::format("epoch {} of {}: {}", progress_.best_epoch, progress_.epoch,
                                    kept_epoch_reason(run_.train, progress_))}});
  if (run_.train.save_weights) save_tested_weights();
  const auto test_start = Clock::now();
  const SplitResult test = evaluate(*test_loader_);
  const double test_seconds = seconds_since(test_start);
  log("test {} ({}); training time {}", describe(task_, test), format_duration(test_seconds),
      format_duration(train_seconds));
  const std::string verdict = task_.language_model()
                                  ? ""
                                  : chance_verdict(test.accuracy, data_.num_classes,
                                                   static_cast<int64_t>(data_.test->size()));
  if (!verdict.empty()) {
    log("{}", verdict);
    context_.observer.on_setup({{"learning", verdict}});  // in the report's run details
  }
  return final_metrics(test, train_seconds, test_seconds);
}

// train.checkpoint: best tests the best validation epoch's weights; last, the last epoch's.
void Trainer::restore_best_weights() {
  if (run_.train.checkpoint == "last") {
    progress_.best_epoch = progress_.epoch;  // the last trained (early stopping may end it sooner)
    return;
  }
  if (best_weights_.empty()) return;  // the live weights are the best
  log("restoring the weights of epoch {} ({})", progress_.best_epoch,
      kept_epoch_reason(run_.train, progress_));
  restore_weights(best_weights_);
}

// The full model whatever the strategy and world size: loadable by any run (model.weights).
void Trainer::save_tested_weights() {
  const std::string path = context_.output_prefix + ".safetensors";
  strategy_->with_full_parameters(*model_, [&] {
    if (strategy_->rank() == 0) save_weights(*model_, path);
  });
  context_.observer.on_setup({{"weights_path", path}});
  log("weights of epoch {} written to {}", progress_.best_epoch, path);
}

MetricValues Trainer::final_metrics(const SplitResult& test, double train_seconds,
                                    double test_seconds) {
  const TrainingStateBytes state =
      strategy_->state_bytes(*model_, *optimizer_);  // rank 0's; ranks hold equal shares
  MetricValues metrics = {
      {metric::kTestSeconds, test_seconds},
      {metric::kTestLoss, test.loss},
      {metric::kParameters, static_cast<double>(count_parameters(*model_))},
      {metric::kParameterBytes, state.parameters},
      {metric::kGradientBytes, state.gradients},
      {metric::kOptimizerStateBytes, state.optimizer_state},
      {metric::kSteps, static_cast<double>(step_)},
      {metric::kSkippedSteps, static_cast<double>(scaler_ ? scaler_->skipped_steps() : 0)}};
  add_quality(task_, test, metric::kTestAcc, metric::kTestPerplexity, metrics);
  // A run that trained no epoch (train.epochs: 0, or resumed with none left) only tested: it has
  // no training time (nor a speedup), and a best epoch only if its weights came from one.
  // A run continuing after an interruption counts the epochs it trained before, too.
  if (progress_.epoch > (continuing_ ? 0 : start_epoch_))
    metrics[metric::kTrainSeconds] = train_seconds;
  if (progress_.best_epoch > 0) {
    if (!task_.language_model()) metrics[metric::kBestValAcc] = progress_.best_val_acc;
    metrics[metric::kBestEpoch] = static_cast<double>(progress_.best_epoch);
  }
  // float32 products run on TF32 tensor cores unless runtime.matmul_precision is highest.
  std::string compute = c10::toString(precision_->compute_dtype());
  if (compute == "Float" && run_.runtime.matmul_precision != "highest") compute = "TensorFloat32";
  meter_.record_throughput(metrics, strategy_->world_size(), peak_tflops(device_name_, compute));
  // Every sample of a language model is a window of the same seq_len tokens.
  if (task_.language_model() && metrics.count(metric::kSamplesPerSecond) && tokens_per_sample_ > 0)
    metrics[metric::kTokensPerSecond] =
        metrics[metric::kSamplesPerSecond] * static_cast<double>(tokens_per_sample_);
  meter_.record_memory(metrics);
  if (!run_.train.micro_batch_size.empty()) {  // train.micro_batch_size: where it ended
    metrics[metric::kMicroBatchSize] = static_cast<double>(micro_batch_size());
    metrics[metric::kOomEvents] = static_cast<double>(oom_events_);
    metrics[metric::kOomSeconds] = oom_seconds_;
  }
  for (const char* key : {metric::kPeakMemory, metric::kPeakRss, metric::kCudaPeakReserved,
                          metric::kCudaPeakAllocated}) {
    if (!metrics.count(key)) continue;
    auto peak = torch::tensor({metrics[key]}, torch::kDouble);
    strategy_->all_reduce_max(peak);  // the busiest rank's
    metrics[key] = peak.item<double>();
  }
  return metrics;
}

}  // namespace

MetricValues train_run(const RunSpec& run, const RunContext& context) {
  try {
    Trainer trainer(run, context);
    return trainer.run();
  } catch (const c10::Error& e) {
    // LibTorch's message without its C++ backtrace: that is what the user and the store need...
    std::string message = e.what_without_backtrace();
    // ...except when runtime.sync_debug caught a host synchronisation: the frames say where.
    if (message.find(kSyncDebugMessage) != std::string::npos) {
      std::string frames = e.what();
      size_t end = 0;
      for (int line = 0; line < 30 && end != std::string::npos; ++line)
        end = frames.find('\n', end + 1);
      message = fmt::format("{} inside a training step (runtime.sync_debug: error); where:\n{}",
                            message, frames.substr(0, end));
    }
    throw std::runtime_error(message);
  }
}

}  // namespace trainyard
