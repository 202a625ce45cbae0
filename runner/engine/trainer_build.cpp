// Building a run's components, in named stages (Trainer::build): the device and its threads, the
// data and the ranks, the model with its weights and what a resumed run brings, optimization, CUDA
// graphs; then a resumed run's random states. (runner/engine/trainer.h: the other files.)
#include <fmt/format.h>

#include <ATen/Context.h>
#include <ATen/Parallel.h>
#include <torch/utils.h>

#include "common/text.h"
#include "components/device/cuda_module.h"
#include "components/weights/load_weights.h"
#include "runner/engine/checkpoint.h"
#include "runner/engine/trainer.h"
#include "trainyard/error.h"

namespace trainyard {

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
  if (resume_.continuing)
    for (const auto& [epoch, values] : progress_.epochs) context_.observer.on_epoch(epoch, values);
}

DeviceInfo Trainer::setup_device() {
  // Before anything asks LibTorch about CUDA.
  load_cuda_if_wanted(option_word(run_.runtime.accelerator));
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
  resume_.continuing = !context_.continue_from.empty();
  resume_.dir = resume_.continuing ? context_.continue_from : run_.train.resume_from;
  const std::string& resume = resume_.dir;
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
  resume_.epoch = progress_.epoch;
  resume_.step = progress_.step;
  if (progress_.batch > 0) resume_.batch = batch_within_epoch(progress_);
  if (resume_.continuing) {
    resume_.trained_seconds = progress_.train_seconds;
    resume_.epoch_seconds = progress_.epoch_seconds;
    resume_.epoch_validation_seconds = progress_.epoch_validation_seconds;
    meter_.restore_counts(progress_.meter);
  }
  const std::vector<std::map<std::string, torch::Tensor>> ranks = load_rank_states(resume);
  if (ranks.size() == static_cast<size_t>(strategy_->world_size())) {
    resume_.rank_state = ranks[static_cast<size_t>(strategy_->rank())];
  } else if (!ranks.empty() && strategy_->rank() == 0) {
    // Another world size: the unfinished epoch's sums go on at rank 0 (the epoch's figures are
    // the sum over ranks), the random states start afresh.
    for (const auto& rank : ranks)
      for (const char* name : {"loss_sum", "correct", "samples", "units"})
        if (rank.count(name))
          resume_.rank_state[name] = resume_.rank_state.count(name)
                                         ? resume_.rank_state[name] + rank.at(name)
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
  attributes["task"] = to_string(run_.model.capabilities.task);  // what the report's columns are
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
  const std::string& resume = resume_.dir;
  if (!resume.empty()) {
    load_optimizer_state(resume, *model_, *strategy_, *optimizer_, scaler_.get());
    log("resumed from {}: {} and {} done (written by {} on {})", resume,
        plural(progress_.epoch, "epoch"), plural(progress_.step, "optimizer step"),
        progress_.strategy, plural(progress_.world_size, "rank"));
    // The resumed weights are the best so far: keep a copy, as the uninterrupted run would have.
    if (train.checkpoint == TestedWeights::best && best_weights_.empty() &&
        progress_.best_epoch == progress_.epoch && progress_.epoch < train.epochs)
      best_weights_ = snapshot_weights();
  }
  progress_.strategy = run_.strategy.name;
  progress_.world_size = strategy_->world_size();
  progress_.batch_size = train.batch_size;
  // The same run continuing starts at the micro-batch it had come down to; a state of another run
  // (train.resume_from): its events are not this run's.
  MicroBatchState micro{.size = train.micro_batch_auto() && resume_.continuing
                                    ? progress_.micro_batch_size
                                    : train.micro_batch_size.samples};
  if (micro.size >= train.batch_size) micro.size = 0;
  if (resume_.continuing)
    micro.oom_events = progress_.oom_events, micro.oom_seconds = progress_.oom_seconds;
  steps_ = std::make_unique<StepRunner>(
      StepParts{.train = train,
                .task = task_,
                .device = device_,
                .model = *model_,
                .precision = *precision_,
                .scaler = scaler_.get(),
                .strategy = *strategy_,
                .optimizer = *optimizer_,
                .meter = meter_,
                .log = [this](const std::string& line) { context_.observer.on_log(line); }},
      micro);
  record_micro_batch();
  base_lr_ = base_learning_rate(run_.optimizer.options);
  total_steps_ = train.epochs * ((train_batches_ + train.grad_accum - 1) / train.grad_accum);
  schedule_ = build_schedule(context_.registry, run_.scheduler, {.total_steps = total_steps_});
}

void Trainer::setup_cuda_graph() {
  sync_debug_ = SyncDebugGuard::mode(run_.runtime.sync_debug, device_);
  if (run_.runtime.compile != Compile::cuda_graphs) return;
  // Validation ensured a CUDA device, one process, whole steps and an optimizer stepping on the
  // device.
  DeviceStepping* on_device = device_stepping(optimizer_->libtorch());
  if (!device_.is_cuda() || !on_device)
    throw std::logic_error(
        "cuda-graphs without a CUDA device or an optimizer that steps on the device");
  lr_tensor_ = on_device->learning_rate_tensor(device_);
  steps_->use_cuda_graph();
}

// Last in build(): building the model drew from the random generators; from here on they must be
// where the interrupted run left them.
void Trainer::restore_rank_state() {
  if (resume_.rank_state.empty()) return;
  auto restore = [&](const char* name, at::Generator generator) {
    auto it = resume_.rank_state.find(name);
    if (it == resume_.rank_state.end()) return;
    std::lock_guard<std::mutex> lock(generator.mutex());
    generator.set_state(it->second);
  };
  restore("cpu_rng", at::detail::getDefaultCPUGenerator());
  if (device_.is_cuda()) restore("cuda_rng", at::globalContext().defaultGenerator(device_));
  if (progress_.batch > 0)
    log("continuing epoch {} at batch {} of {} (optimizer step {})", progress_.epoch + 1,
        resume_.batch, train_batches_, step_);
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

}  // namespace trainyard
