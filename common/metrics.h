// The fixed metrics vocabulary: every figure Trainyard records has one key here, used unchanged on
// the console, in the database and in the reports. Adding a metric is one line in metrics.cpp.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace trainyard {

// money: in the units of report.price_per_device_hour.
enum class MetricUnit { seconds, bytes, fraction, count, per_second, plain, ratio, money };

// Which way is better, for highlighting the best value in a report column.
enum class Better { lower, higher, neither };

// epoch: each epoch's (epoch_metrics); step: at optimizer steps (step_metrics); final: a completed
// run's; derived: computed by reports from the others.
enum class MetricScope { epoch, step, final, derived };

struct MetricInfo {
  std::string key;
  std::string label;  // column title in reports
  MetricUnit unit;
  Better better;
  MetricScope scope;
  std::string help;
};

const std::vector<MetricInfo>& metric_vocabulary();

// nullptr when the key is not in the vocabulary.
const MetricInfo* find_metric(std::string_view key);

std::vector<std::string> metric_keys(MetricScope scope);

// "95.4%", "2m 05s", "1.2 GiB", "1,234.5/s".
std::string format_metric(const MetricInfo& metric, double value);

// What a stored value of `unit` is: "seconds", "bytes", "a fraction (0-1)", ...
const char* describe_unit(MetricUnit unit);

// "did not learn: test accuracy 26.0% is at chance (25.0% for 4 classes)" when `accuracy` over
// `samples` test samples is no better than guessing among `classes` — within two binomial standard
// deviations above 1/classes — else "". A run whose accuracy stays there learned nothing the test
// can see (a learning rate off by orders of magnitude, labels shuffled apart from their inputs).
std::string chance_verdict(double accuracy, int64_t classes, int64_t samples);
// "did not learn: the training loss fell only 0.4% (2.303 over the first 8 steps, 2.294 over the
// last epoch)" when the last epoch's mean training loss `last` is not 2% below `first`, the mean
// over the first `first_step` of `total_steps` steps (up to the first progress line, or the first
// epoch); else "".
// Above-chance accuracy can hide such a run (a learning rate far too small, trained weights that
// nothing moves). Said only when that line came in the first half of training: later, the loss
// has had its chance to move.
std::string loss_verdict(double first, int64_t first_step, double last, int64_t total_steps);

// A validation figure a run is watched by: train.monitor keeps an epoch's weights by it,
// train.early_stop stops by it, sweep.search.metric decides a study's trials by it and
// report.target.metric times runs to it. One type for the four; which way is better is the
// figure's own record's (MetricInfo::better), never a comparison of its name.
enum class WatchedMetric { val_loss, val_acc, val_f1 };

// Its key in the vocabulary ("val_loss"), and back: nullopt for a key that is none of them.
const char* metric_key(WatchedMetric metric);
std::optional<WatchedMetric> watched_metric(std::string_view key);
// What the figure's record says: lower is better (a loss), or higher (accuracy, macro-F1).
bool lower_is_better(WatchedMetric metric);
// Whether `value` reaches `target` (at or beyond it, in the better direction).
bool reaches(WatchedMetric metric, double value, double target);
// "0.4123" for a loss, "86.30%" for a fraction (`decimals` after the point either way: 4 and 2
// by default).
std::string figure_text(WatchedMetric metric, double value, int decimals = -1);

// Keys the engine writes; spelled once here so a typo is a compile error, not a silent new metric.
namespace metric {
inline constexpr const char* kTrainLoss = "train_loss";
inline constexpr const char* kTrainAcc = "train_acc";
inline constexpr const char* kValLoss = "val_loss";
inline constexpr const char* kValAcc = "val_acc";
inline constexpr const char* kValF1 =
    "val_f1";  // classification: macro-F1 (common/classification.h)
inline constexpr const char* kEpochSeconds = "epoch_seconds";
inline constexpr const char* kLearningRate = "lr";
inline constexpr const char* kEpochSamplesPerSecond = "epoch_samples_per_s";
// The optimizer steps taken by an epoch's end: where trackers plot its figures (Lightning's rule).
inline constexpr const char* kEpochStep = "step";
inline constexpr const char* kElapsedSeconds = "elapsed_seconds";
inline constexpr const char* kValSeconds = "val_seconds";
inline constexpr const char* kTrainSeconds = "train_seconds";
inline constexpr const char* kTestSeconds = "test_seconds";
inline constexpr const char* kTestLoss = "test_loss";
inline constexpr const char* kTestAcc = "test_acc";
inline constexpr const char* kTestF1 = "test_f1";
inline constexpr const char* kTestTop5 = "test_top5";         // with more than five classes
inline constexpr const char* kTrainPerplexity = "train_ppl";  // causal-lm: exp(the loss)
inline constexpr const char* kValPerplexity = "val_ppl";
inline constexpr const char* kTestPerplexity = "test_ppl";
inline constexpr const char* kTokensPerSecond = "tokens_per_s";
inline constexpr const char* kBestValAcc = "best_val_acc";
inline constexpr const char* kBestEpoch = "best_epoch";
inline constexpr const char* kSamplesPerSecond = "samples_per_s";
inline constexpr const char* kDataWait = "data_wait";
inline constexpr const char* kPeakMemory = "peak_memory_bytes";
inline constexpr const char* kPeakRss = "peak_rss_bytes";
inline constexpr const char* kCudaPeakReserved = "cuda_peak_reserved_bytes";
inline constexpr const char* kCudaPeakAllocated = "cuda_peak_allocated_bytes";
inline constexpr const char* kParameters = "parameters";
inline constexpr const char* kParameterBytes = "param_bytes_per_rank";
inline constexpr const char* kGradientBytes = "grad_bytes_per_rank";
inline constexpr const char* kOptimizerStateBytes = "optimizer_state_bytes_per_rank";
inline constexpr const char* kCommBytesPerStep = "comm_bytes_per_step";
inline constexpr const char* kSteps = "steps";
inline constexpr const char* kSkippedSteps = "skipped_steps";
inline constexpr const char* kMicroBatchSize = "micro_batch_size";
inline constexpr const char* kOomEvents = "oom_events";
inline constexpr const char* kOomSeconds = "oom_seconds";
inline constexpr const char* kTflops = "tflops";
inline constexpr const char* kMfu = "mfu";
inline constexpr const char* kSpeedup = "speedup";
inline constexpr const char* kTimeToTarget = "time_to_target";
inline constexpr const char* kTargetSpeedup = "target_speedup";
inline constexpr const char* kDeviceHours = "device_hours";
inline constexpr const char* kCost = "cost";
inline constexpr const char* kCostToTarget = "cost_to_target";
}  // namespace metric

}  // namespace trainyard
