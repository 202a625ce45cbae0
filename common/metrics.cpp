#include "common/metrics.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "common/text.h"

namespace trainyard {

const char* describe_unit(MetricUnit unit) {
  switch (unit) {
    case MetricUnit::seconds:
      return "seconds";
    case MetricUnit::bytes:
      return "bytes";
    case MetricUnit::fraction:
      return "a fraction (0-1)";
    case MetricUnit::count:
      return "a count";
    case MetricUnit::per_second:
      return "per second";
    case MetricUnit::plain:
      return "a number";
    case MetricUnit::ratio:
      return "a ratio (x)";
    case MetricUnit::money:
      return "money (report.price_per_device_hour's unit)";
  }
  return "?";
}

const std::vector<MetricInfo>& metric_vocabulary() {
  using enum MetricUnit;
  using B = Better;
  using S = MetricScope;
  static const std::vector<MetricInfo> vocabulary = {
      {metric::kTrainLoss, "train loss", plain, B::lower, S::epoch,
       "mean training loss of the epoch"},
      {metric::kTrainAcc, "train acc", fraction, B::higher, S::epoch,
       "training accuracy of the epoch"},
      {metric::kValLoss, "val loss", plain, B::lower, S::epoch, "validation loss after the epoch"},
      {metric::kValAcc, "val acc", fraction, B::higher, S::epoch,
       "validation accuracy after the epoch"},
      {metric::kValF1, "val macro-F1", fraction, B::higher, S::epoch,
       "validation macro-F1 after the epoch: the mean of the classes' F1, each class counting "
       "alike however rare"},
      {metric::kTrainPerplexity, "train ppl", plain, B::lower, S::epoch,
       "training perplexity of the epoch (causal-lm: exp of the train loss)"},
      {metric::kValPerplexity, "val ppl", plain, B::lower, S::epoch,
       "validation perplexity (causal-lm: exp of the val loss)"},
      {metric::kEpochSeconds, "epoch time", seconds, B::lower, S::epoch,
       "training + validation time of the epoch"},
      {metric::kLearningRate, "lr", plain, B::neither, S::epoch,
       "learning rate at the end of the epoch"},
      {metric::kEpochSamplesPerSecond, "samples/s", per_second, B::higher, S::epoch,
       "training samples per second in the epoch's training loop (later epochs: warmed up)"},
      {metric::kEpochStep, "step", count, B::neither, S::epoch,
       "optimizer steps taken by the epoch's end (where TensorBoard and MLflow plot the epoch)"},
      {metric::kElapsedSeconds, "elapsed", seconds, B::neither, S::step,
       "training time up to the step, validation included (MLPerf's rule for time-to-target)"},
      {metric::kValSeconds, "validation time", seconds, B::lower, S::step,
       "time of the validation at the step (at epochs' ends and train.val_every_steps)"},
      {metric::kTrainSeconds, "training time", seconds, B::lower, S::final,
       "training plus per-epoch validation, as the reference studies time it"},
      {metric::kTestSeconds, "test time", seconds, B::lower, S::final,
       "evaluation of the best model on the test split"},
      {metric::kTestLoss, "test loss", plain, B::lower, S::final,
       "test loss of the best-validation model"},
      {metric::kTestAcc, "test acc", fraction, B::higher, S::final,
       "test accuracy of the best-validation model"},
      {metric::kTestF1, "test macro-F1", fraction, B::higher, S::final,
       "test macro-F1 of the best-validation model: the mean of the classes' F1 (each F1 = 2 "
       "precision recall / (precision + recall))"},
      {metric::kTestTop5, "test top-5", fraction, B::higher, S::final,
       "share of test samples whose label is among the model's 5 highest scores (more than five "
       "classes)"},
      {metric::kTestPerplexity, "test ppl", plain, B::lower, S::final,
       "test perplexity of the best-validation model (causal-lm: exp of the test loss)"},
      {metric::kBestValAcc, "best val acc", fraction, B::higher, S::final,
       "best validation accuracy over the epochs"},
      {metric::kBestEpoch, "best epoch", count, B::neither, S::final,
       "epoch whose weights were kept for the test"},
      {metric::kSamplesPerSecond, "samples/s", per_second, B::higher, S::final,
       "training samples per second per run (all devices)"},
      {metric::kTokensPerSecond, "tokens/s", per_second, B::higher, S::final,
       "causal-lm: training tokens per second per run (all devices)"},
      {metric::kTflops, "TFLOP/s", plain, B::higher, S::final,
       "achieved training TFLOP/s (model FLOPs, forward + backward) over the training loop"},
      {metric::kMfu, "MFU", fraction, B::higher, S::final,
       "model FLOPs utilisation: achieved TFLOP/s over the device's peak for the compute dtype"},
      {metric::kDataWait, "data wait", fraction, B::lower, S::final,
       "share of training time spent waiting for batches"},
      {metric::kPeakMemory, "peak memory", bytes, B::lower, S::final,
       "peak reserved CUDA memory on GPU runs, peak resident memory (RSS) on CPU runs"},
      {metric::kPeakRss, "peak RSS", bytes, B::lower, S::final,
       "peak resident memory of the process during the run"},
      {metric::kCudaPeakReserved, "CUDA peak reserved", bytes, B::lower, S::final,
       "peak memory reserved by the CUDA caching allocator"},
      {metric::kCudaPeakAllocated, "CUDA peak allocated", bytes, B::lower, S::final,
       "peak memory allocated to tensors on the GPU"},
      {metric::kParameters, "parameters", count, B::neither, S::final,
       "trainable parameters of the model"},
      {metric::kCommBytesPerStep, "comm/step", bytes, B::lower, S::final,
       "bytes of gradients and parameters all-reduced, reduce-scattered or all-gathered per "
       "optimizer step, training only"},
      {metric::kParameterBytes, "param bytes/rank", bytes, B::lower, S::final,
       "parameter bytes each rank keeps (1/N of the model under fsdp)"},
      {metric::kGradientBytes, "grad bytes/rank", bytes, B::lower, S::final,
       "gradient bytes each rank's optimizer step reads (1/N under zero2 and fsdp)"},
      {metric::kOptimizerStateBytes, "optim state bytes/rank", bytes, B::lower, S::final,
       "optimizer state bytes each rank keeps (1/N under zero2 and fsdp)"},
      {metric::kSteps, "steps", count, B::neither, S::final, "optimizer steps taken"},
      {metric::kSkippedSteps, "skipped steps", count, B::lower, S::final,
       "steps skipped by the fp16 loss scaler because the gradients overflowed"},
      {metric::kMicroBatchSize, "micro-batch", count, B::neither, S::final,
       "the micro-batch the run's steps ended at (train.micro_batch_size)"},
      {metric::kOomEvents, "out-of-memory events", count, B::lower, S::final,
       "times train.micro_batch_size: auto halved the micro-batch after running out of memory"},
      {metric::kOomSeconds, "out-of-memory time", seconds, B::lower, S::final,
       "training time spent in steps abandoned for running out of memory"},
      {metric::kSpeedup, "speedup", ratio, B::higher, S::derived,
       "baseline training time / this variant's training time"},
      {metric::kTimeToTarget, "time to target", seconds, B::lower, S::derived,
       "training time (validation included) until the first validation that reaches "
       "report.target"},
      {metric::kTargetSpeedup, "speedup to target", ratio, B::higher, S::derived,
       "baseline time-to-target / this variant's time-to-target"},
      {metric::kDeviceHours, "device-hours", plain, B::lower, S::derived,
       "training time x ranks (every device of every node), in hours"},
      {metric::kCost, "cost", money, B::lower, S::derived,
       "device-hours x report.price_per_device_hour"},
      {metric::kCostToTarget, "cost to target", money, B::lower, S::derived,
       "time-to-target x ranks in hours x report.price_per_device_hour"},
  };
  return vocabulary;
}

const MetricInfo* find_metric(std::string_view key) {
  for (const auto& m : metric_vocabulary())
    if (m.key == key) return &m;
  return nullptr;
}

std::vector<std::string> metric_keys(MetricScope scope) {
  std::vector<std::string> keys;
  for (const auto& m : metric_vocabulary())
    if (m.scope == scope) keys.push_back(m.key);
  return keys;
}

std::string format_metric(const MetricInfo& metric, double value) {
  switch (metric.unit) {
    case MetricUnit::seconds:
      return format_duration(value);
    case MetricUnit::bytes:
      return format_bytes(value);
    case MetricUnit::fraction:
      return fmt::format("{:.1f}%", 100 * value);
    case MetricUnit::count:
      return fmt::format("{:L}", static_cast<long long>(value));
    case MetricUnit::per_second:
      return fmt::format("{:.1f}/s", value);
    case MetricUnit::ratio:
      return fmt::format("{:.2f}x", value);
    case MetricUnit::money: {  // cents, or two significant digits below them (a CPU minute)
      if (std::abs(value) >= 0.01 || value == 0 || !std::isfinite(value))
        return fmt::format("{:.2f}", value);
      const int decimals =
          std::min(12, 1 - static_cast<int>(std::floor(std::log10(std::abs(value)))));
      return fmt::format("{:.{}f}", value, decimals);
    }
    case MetricUnit::plain:
      return fmt::format("{:.4g}", value);
  }
  return fmt::format("{}", value);
}

std::string chance_verdict(double accuracy, int64_t classes, int64_t samples) {
  if (classes < 2 || samples < 1 || !std::isfinite(accuracy)) return "";
  const double chance = 1.0 / static_cast<double>(classes);
  const double sigma = std::sqrt(chance * (1 - chance) / static_cast<double>(samples));
  if (accuracy > chance + 2 * sigma) return "";
  return fmt::format("did not learn: test accuracy {:.1f}% is at chance ({:.1f}% for {} classes)",
                     100 * accuracy, 100 * chance, classes);
}

std::string loss_verdict(double first, int64_t first_step, double last, int64_t total_steps) {
  if (!std::isfinite(first) || !std::isfinite(last) || first <= 0 || first_step < 1 ||
      2 * first_step > total_steps)
    return "";
  const double fall = (first - last) / first;
  if (fall >= 0.02) return "";
  return fmt::format(
      "did not learn: the training loss {} {:.1f}% ({:.4g} over the first {} steps, {:.4g} over "
      "the last epoch)",
      fall >= 0 ? "fell only" : "rose", 100 * std::abs(fall), first, first_step, last);
}

const char* metric_key(WatchedMetric metric) {
  switch (metric) {
    case WatchedMetric::val_loss:
      return metric::kValLoss;
    case WatchedMetric::val_acc:
      return metric::kValAcc;
    case WatchedMetric::val_f1:
      return metric::kValF1;
  }
  return "?";
}

std::optional<WatchedMetric> watched_metric(std::string_view key) {
  for (WatchedMetric m : {WatchedMetric::val_loss, WatchedMetric::val_acc, WatchedMetric::val_f1})
    if (key == metric_key(m)) return m;
  return std::nullopt;
}

bool lower_is_better(WatchedMetric metric) {
  return find_metric(metric_key(metric))->better == Better::lower;
}

bool reaches(WatchedMetric metric, double value, double target) {
  return lower_is_better(metric) ? value <= target : value >= target;
}

std::string figure_text(WatchedMetric metric, double value, int decimals) {
  if (find_metric(metric_key(metric))->unit == MetricUnit::fraction)
    return fmt::format("{:.{}f}%", 100 * value, decimals < 0 ? 2 : decimals);
  return fmt::format("{:.{}f}", value, decimals < 0 ? 4 : decimals);
}

}  // namespace trainyard
