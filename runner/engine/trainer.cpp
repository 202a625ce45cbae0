// The run (runner/engine/trainer.h says which file holds what; the training step is the
// StepRunner's, step_runner.h): train_run() builds the run's components (trainer_build.cpp), fits —
// each epoch trains (Trainer::train_epoch), validates and keeps the best weights
// (Trainer::end_of_epoch) — and finishes: restores the best weights, tests, and reads out the
// figures (Trainer::finish).
#include "runner/engine/trainer.h"

#include <fmt/format.h>
#include <torch/cuda.h>

#include "common/text.h"
#include "runner/engine/checkpoint.h"
#include "trainyard/error.h"

namespace trainyard {

namespace {

// Which split a quality figure is of: an epoch's training, a validation, the test.
enum class Split { train, val, test };

// A split's quality figure under the run's task (its traits): accuracy (classification), or
// perplexity — the exponential of the mean loss per token — for a language model.
void add_quality(const TrainingTask& task, Split split, const SplitResult& result,
                 MetricValues& values) {
  const TaskTraits& traits = task.traits();
  const char* key = split == Split::train ? traits.train_quality
                    : split == Split::val ? traits.val_quality
                                          : traits.test_quality;
  values[key] = traits.has_accuracy ? result.accuracy : std::exp(result.loss);
  // A classifier's evaluation: macro-F1 (and top-5 with more than five classes).
  if (split == Split::train || std::isnan(result.macro_f1)) return;
  values[split == Split::val ? metric::kValF1 : metric::kTestF1] = result.macro_f1;
  if (split == Split::test && !std::isnan(result.top5)) values[metric::kTestTop5] = result.top5;
}

// "loss 0.6931 acc 50.00%", or "loss 3.2189 ppl 25.00" for a language model.
std::string describe(const TrainingTask& task, const SplitResult& split) {
  if (!task.traits().has_accuracy)
    return fmt::format("loss {:.4f} ppl {:.2f}", split.loss, std::exp(split.loss));
  if (std::isnan(split.macro_f1))
    return fmt::format("loss {:.4f} acc {:.2f}%", split.loss, 100 * split.accuracy);
  return fmt::format("loss {:.4f} acc {:.2f}% macro-F1 {:.2f}%{}", split.loss, 100 * split.accuracy,
                     100 * split.macro_f1,
                     std::isnan(split.top5) ? "" : fmt::format(" top-5 {:.2f}%", 100 * split.top5));
}

// A watched figure (train.monitor, train.early_stop.metric) of a split's result.
double watched_figure(WatchedMetric monitor, const SplitResult& split) {
  switch (monitor) {
    case WatchedMetric::val_loss:
      return split.loss;
    case WatchedMetric::val_acc:
      return split.accuracy;
    case WatchedMetric::val_f1:
      return split.macro_f1;
  }
  return std::nan("");
}

// The figure train.monitor names, of an epoch's recorded figures; NaN when it has none.
double monitored_figure(WatchedMetric monitor, const TrainerState& progress, int64_t epoch) {
  const auto figures = progress.epochs.find(epoch);
  if (figures == progress.epochs.end()) return std::nan("");
  const auto value = figures->second.find(metric_key(monitor));
  return value == figures->second.end() ? std::nan("") : value->second;
}

// train.monitor: whether the epoch just validated is kept over the one kept so far
// (progress.best_epoch). The first epoch is; a number beats a NaN (a diverged epoch); a tie goes to
// the later epoch, whose weights trained longer.
bool is_kept_over(WatchedMetric monitor, const SplitResult& val, const TrainerState& progress) {
  if (progress.best_epoch == 0) return true;
  const double kept = monitored_figure(monitor, progress, progress.best_epoch);
  const bool loss = lower_is_better(monitor);
  const double value = watched_figure(monitor, val);
  if (std::isnan(value)) return std::isnan(kept);
  if (std::isnan(kept)) return true;
  return loss ? value <= kept : value >= kept;
}

// Why the tested weights are those of progress.best_epoch: for the log and the run's details.
std::string kept_epoch_reason(const TrainOptions& train, const TrainerState& progress) {
  if (train.checkpoint == TestedWeights::last)
    return "the last epoch trained (train.checkpoint: last)";
  const double value = monitored_figure(train.monitor, progress, progress.best_epoch);
  const std::string figure =
      fmt::format("{} {} {}", lower_is_better(train.monitor) ? "lowest" : "highest",
                  find_metric(metric_key(train.monitor))->label, figure_text(train.monitor, value));
  return figure + " (train.monitor: " + metric_key(train.monitor) +
         "; a tie keeps the later epoch)";
}

}  // namespace

MetricValues Trainer::run() {
  build();
  meter_.start_device(device_);
  meter_.start_steps(step_);
  run_start_ = last_checkpoint_ = Clock::now();
  fit();
  return finish(train_seconds());
}

void Trainer::fit() {
  for (int64_t epoch = progress_.epoch; epoch < run_.train.epochs && !stopped_early(); ++epoch) {
    const auto epoch_start = Clock::now();
    const SplitResult train = train_epoch(epoch);
    const auto val_start = Clock::now();
    const SplitResult val = evaluate(*val_loader_);
    record_validation(val, seconds_since(val_start));
    // An epoch continued after an interruption: its time before, too.
    const double before =
        resume_.inside(epoch) ? resume_.epoch_seconds + resume_.epoch_validation_seconds : 0;
    end_of_epoch(epoch, seconds_since(epoch_start) + before, train, val);
    // Paused at a study's rung: the epoch's checkpoint is written, the run continues from it.
    if (context_.pause_after_epochs > 0 && epoch + 1 >= context_.pause_after_epochs &&
        epoch + 1 < run_.train.epochs && !stopped_early())
      throw Interrupted();
  }
}

SplitResult Trainer::train_epoch(int64_t epoch) {
  const TrainOptions& train = run_.train;
  model_->train();
  // A run resumed inside this epoch starts at its batch, with the sums of the batches before.
  const bool resumed_here = resume_.inside(epoch);
  const int64_t first = resumed_here ? resume_.batch : 0;
  train_loader_->start_epoch(epoch, train_batches_, first);
  Accumulator metrics(device_, task_);
  if (resumed_here) metrics.restore(resume_.rank_state);
  EpochClock clock(*this, resumed_here);
  const int64_t samples_before = metrics.samples;  // the rate is of this process's batches
  auto save = [&](int64_t batches_done) {
    checkpoint(epoch, batches_done, metrics, clock.loop_seconds(), clock.validation_seconds(),
               clock.communicated(), step_ - clock.steps_before);
  };
  for (int64_t b = first; b < train_batches_; ++b) {
    if (stop_requested()) {
      // One process at a step's boundary can save where it is; ranks cannot agree on the moment
      // without a collective per step, so they fall back to their last checkpoint.
      if (strategy_->world_size() == 1 && b % train.grad_accum == 0 && b > first) save(b);
      throw Interrupted();
    }
    const bool step_now = (b + 1) % train.grad_accum == 0 || b + 1 == train_batches_;
    torch::Tensor loss;
    {
      SyncDebugGuard no_host_waits(sync_debug_);
      const auto wait_start = Clock::now();
      Batch batch = fetch(*train_loader_, data_.train_transform, epoch, b, /*training=*/true);
      meter_.add_data_wait(seconds_since(wait_start));
      if (task_.language_model()) tokens_per_sample_ = batch.targets.size(1);
      if (step_now) set_learning_rate(base_lr_ * schedule_(step_));
      loss = steps_->train_batch(std::move(batch), step_now, step_ + 1,
                                 /*measure_norm=*/logs_after(step_ + 1), metrics);
    }
    if (!step_now) continue;
    if (logs_after(++step_)) {
      // What the run's learning is measured from: the mean up to its first progress line, when
      // that line comes in the first epoch (the accumulator holds one epoch's).
      if (std::isnan(progress_.first_loss) && epoch == 0) {
        progress_.first_loss = metrics.result().loss;
        progress_.first_loss_step = step_;
      }
      log_progress(epoch, loss, metrics.samples - samples_before, clock.start);
    }
    // (At the epoch's last step the epoch's own validation follows.)
    if (b + 1 < train_batches_ && validates_after(step_))
      clock.validating += validate_inside_epoch();
    if (b + 1 < train_batches_ && checkpoint_due()) save(b + 1);
  }
  // The host may be many steps (graph replays) ahead of the GPU: the epoch's time is the device's.
  // Waiting here is intended, outside runtime.sync_debug's check.
  if (device_.is_cuda()) torch::cuda::synchronize(device_.index());
  const double seconds = clock.loop_seconds();
  meter_.add_epoch(seconds, clock.communicated(), step_ - clock.steps_before);
  metrics.sum_over_ranks(*strategy_);  // loss and accuracy over every rank's share
  epoch_samples_per_s_ = static_cast<double>(metrics.samples) / seconds;
  return metrics.result();
}

Trainer::EpochClock::EpochClock(const Trainer& trainer, bool resumed_here)
    : trainer(trainer),
      start(Clock::now()),
      steps_before(trainer.step_),
      seconds_before(resumed_here ? trainer.resume_.epoch_seconds : 0),
      validated_before(resumed_here ? trainer.resume_.epoch_validation_seconds : 0),
      communicated_before(trainer.strategy_->communicated_bytes() -
                          trainer.checkpoint_comm_bytes_) {}

double Trainer::EpochClock::communicated() const {
  return trainer.strategy_->communicated_bytes() - trainer.checkpoint_comm_bytes_ -
         communicated_before;
}

// A progress line: the logging read of the loss (and gradient norm) waits for the device, which is
// allowed here, outside the sync check; the interval's ms per step then count the device's time.
void Trainer::log_progress(int64_t epoch, const torch::Tensor& loss, int64_t epoch_samples,
                           Clock::time_point epoch_start) {
  const double loss_value = host_value(loss);
  const torch::Tensor& grad_norm = steps_->grad_norm();
  const std::string norm =
      grad_norm.defined() ? fmt::format(" grad norm {:.3g}", host_value(grad_norm)) : "";
  const double ms_per_step = meter_.ms_per_step_since_last(step_);
  const double elapsed = seconds_since(run_start_);
  const double eta = elapsed / static_cast<double>(step_ - resume_.step) *
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
                                 .micro_batch = steps_->micro_batch().size,
                                 .oom_events = steps_->micro_batch().oom_events,
                                 .line = std::move(line)});
}

SplitResult Trainer::evaluate(DataLoader& loader) {
  torch::NoGradGuard no_grad;
  model_->eval();
  strategy_->before_evaluation(*model_);  // every rank evaluates the same model
  Accumulator metrics(device_, task_, /*per_class=*/true);
  const int64_t batches = limited(loader.num_batches(), run_.train.limit_eval_batches);
  loader.start_epoch(0, batches);
  for (int64_t b = 0; b < batches; ++b) {
    check_stop();
    Batch batch = fetch(loader, data_.eval_transform, 0, b, /*training=*/false);
    // With micro-batches, evaluation takes them too: what fits training fits here.
    for (const MicroBatch& part : micro_batches(batch, steps_->micro_batch().size)) {
      Precision::AutocastScope autocast(*precision_, device_.type());
      auto logits = strategy_->forward(*model_, part.batch);
      metrics.add(task_.loss(logits, part.batch.targets), logits, part.batch.targets);
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
  add_quality(task_, Split::val, val, values);
  context_.observer.on_step(step_, values);
}

// Keeps the best epoch's weights, records the epoch's metrics and, with train.save_state, writes
// the training state.
void Trainer::end_of_epoch(int64_t epoch, double epoch_seconds, const SplitResult& train,
                           const SplitResult& val) {
  const TrainOptions& options = run_.train;
  if (task_.traits().has_accuracy)
    progress_.best_val_acc = std::max(progress_.best_val_acc, val.accuracy);
  if (is_kept_over(options.monitor, val, progress_)) {
    progress_.best_epoch = epoch + 1;
    if (options.checkpoint == TestedWeights::best && epoch + 1 < options.epochs)
      best_weights_ = snapshot_weights();
    else
      best_weights_.clear();  // the live weights are the best
  }
  watch_for_early_stop(val);
  MetricValues values = {{metric::kTrainLoss, train.loss},
                         {metric::kValLoss, val.loss},
                         {metric::kEpochSeconds, epoch_seconds},
                         {metric::kLearningRate, base_lr_ * schedule_(step_ - 1)},
                         {metric::kEpochSamplesPerSecond, epoch_samples_per_s_},
                         {metric::kEpochStep, static_cast<double>(step_)}};
  add_quality(task_, Split::train, train, values);
  add_quality(task_, Split::val, val, values);
  log("epoch {}/{} done in {}: train {} | val {}", epoch + 1, options.epochs,
      format_duration(epoch_seconds), describe(task_, train), describe(task_, val));
  // Recorded before the checkpoint: a run killed between the two trains the epoch again and
  // records the same figures over these.
  context_.observer.on_epoch(epoch + 1, values);
  progress_.epochs[epoch + 1] = values;
  if (std::isnan(progress_.first_loss) && epoch == 0) {  // no progress line in it: its mean
    progress_.first_loss = train.loss;
    progress_.first_loss_step = step_;
  }
  progress_.epoch = epoch + 1;
  progress_.batch = 0;
  progress_.step = step_;
  progress_.epoch_seconds = 0;
  progress_.epoch_validation_seconds = 0;
  progress_.meter = meter_.counts();
  write_state(rank_state(Accumulator(device_, task_)));
  if (context_.output_prefix.empty()) return;
  const std::string dir = checkpoint_dir(context_.output_prefix);
  if (options.save_state && epoch == resume_.epoch)
    context_.observer.on_setup({{"state_path", dir}});
  log("training state of epoch {} written to {}", epoch + 1, dir);
}

void Trainer::watch_for_early_stop(const SplitResult& val) {
  const TrainOptions& options = run_.train;
  if (options.early_stop_patience == 0) return;
  const bool loss = lower_is_better(options.early_stop_metric);
  const double value = watched_figure(options.early_stop_metric, val);
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
      progress_.epoch + 1, options.epochs, metric_key(options.early_stop_metric),
      options.early_stop_min_delta, plural(options.early_stop_patience, "epoch"),
      progress_.best_monitored);
  log("{}", reason);
  context_.observer.on_setup({{"end_reason", reason}});
}

MetricValues Trainer::finish(double train_seconds) {
  if (const CudaGraphStep* graph = steps_->graph())
    context_.observer.on_setup({{"cuda_graphs", graph->summary(step_ - resume_.step)}});
  if (const auto dtype = steps_->forward_dtype())
    context_.observer.on_setup({{"forward_dtype", c10::toString(*dtype)}});
  const MicroBatchState& micro = steps_->micro_batch();
  if (!run_.train.micro_batch_size.whole())  // the report's run details
    context_.observer.on_setup(
        {{"micro_batch",
          fmt::format("{} of {}{}", steps_->micro_batch_size(), run_.train.batch_size,
                      micro.oom_events > 0 ? fmt::format(" after {} on out-of-memory ({} lost)",
                                                         plural(micro.oom_events, "halving"),
                                                         format_duration(micro.oom_seconds))
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
  if (!test.confusion.empty()) log_classes(test.confusion);
  std::string verdict = !task_.traits().has_accuracy
                            ? ""
                            : chance_verdict(test.accuracy, data_.num_classes,
                                             static_cast<int64_t>(data_.test->size()));
  if (verdict.empty() && !progress_.epochs.empty()) {
    const auto& last_epoch = progress_.epochs.rbegin()->second;
    if (const auto loss = last_epoch.find(metric::kTrainLoss); loss != last_epoch.end())
      verdict =
          loss_verdict(progress_.first_loss, progress_.first_loss_step, loss->second, total_steps_);
  }
  if (!verdict.empty()) {
    log("{}", verdict);
    context_.observer.on_setup({{"learning", verdict}});  // in the report's run details
  }
  return final_metrics(test, train_seconds, test_seconds);
}

// The test's figures class by class: in the log (up to 20 classes; the report shows them all) and,
// as the confusion matrix, in the run's record, where the report reads them.
void Trainer::log_classes(const ConfusionMatrix& confusion) {
  context_.observer.on_setup({{"test_confusion", confusion.to_json()}});
  if (confusion.classes() > 20) return;
  const auto recorded = data_.details.find("dataset_classes");
  const std::vector<std::string> names = class_names(
      recorded == data_.details.end() ? std::string() : recorded->second, confusion.classes());
  for (int64_t c = 0; c < confusion.classes(); ++c) {
    const ClassFigures f = confusion.figures(c);
    log("test class {}: precision {:.2f}% recall {:.2f}% F1 {:.2f}% ({} samples, {} predicted)",
        names[static_cast<size_t>(c)], 100 * f.precision, 100 * f.recall, 100 * f.f1, f.support,
        f.predicted);
  }
}

// train.checkpoint: best tests the best validation epoch's weights; last, the last epoch's.
void Trainer::restore_best_weights() {
  if (run_.train.checkpoint == TestedWeights::last) {
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
  add_quality(task_, Split::test, test, metrics);
  // A run that trained no epoch (train.epochs: 0, or resumed with none left) only tested: it has
  // no training time (nor a speedup), and a best epoch only if its weights came from one.
  // A run continuing after an interruption counts the epochs it trained before, too.
  if (progress_.epoch > (resume_.continuing ? 0 : resume_.epoch))
    metrics[metric::kTrainSeconds] = train_seconds;
  if (progress_.best_epoch > 0) {
    if (task_.traits().has_accuracy) metrics[metric::kBestValAcc] = progress_.best_val_acc;
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
  if (!run_.train.micro_batch_size.whole()) {  // train.micro_batch_size: where it ended
    metrics[metric::kMicroBatchSize] = static_cast<double>(steps_->micro_batch_size());
    metrics[metric::kOomEvents] = static_cast<double>(steps_->micro_batch().oom_events);
    metrics[metric::kOomSeconds] = steps_->micro_batch().oom_seconds;
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
