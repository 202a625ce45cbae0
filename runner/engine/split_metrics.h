// A split's figures (SplitResult) and the sums they are read from (Accumulator): an epoch's
// training, a validation, the test. The trainer keeps one Accumulator an epoch; the step runner
// (step_runner.h) adds to it; a checkpoint inside an epoch carries its sums.
#pragma once

#include <chrono>
#include <cmath>
#include <cstdint>
#include <limits>
#include <map>
#include <string>

#include <torch/types.h>

#include "common/classification.h"
#include "common/clock.h"
#include "components/strategy/strategy.h"
#include "components/weights/load_weights.h"
#include "runner/engine/task.h"

namespace trainyard {

using Clock = std::chrono::steady_clock;  // seconds_since: common/clock.h

// A figure read to the host. A NaN comes back without its sign: a diverged loss or gradient norm
// is often a NaN with the sign bit set, which fmt prints as "-nan", and "nan" and "-nan" in one
// log read as two different failures.
inline double host_value(const torch::Tensor& scalar) {
  const double value = scalar.item<double>();
  return std::isnan(value) ? std::numeric_limits<double>::quiet_NaN() : value;
}

struct SplitResult {
  double loss = 0;
  double accuracy = 0;  // NaN for a language model, which has none
  // A classifier's evaluation (validation, test) only; NaN and empty otherwise.
  double macro_f1 = std::nan("");
  double top5 = std::nan("");  // with more than five classes
  ConfusionMatrix confusion{};
};

// Sums of loss and correct predictions kept on the device, read once per split: no host
// synchronisation inside the loop. The loss is summed over what the task's mean is over (samples,
// or a language model's tokens: `units`). With `per_class` (a classifier's evaluation) it counts
// the confusion matrix and the top-5 hits too; training keeps to loss and accuracy, the sums a
// checkpoint inside an epoch carries.
struct Accumulator {
  Accumulator(const torch::Device& device, const TrainingTask& task, bool per_class = false)
      : task(task),
        per_class(per_class && !task.language_model()),
        loss_sum(torch::zeros({}, torch::TensorOptions().dtype(torch::kDouble).device(device))),
        correct(torch::zeros({}, torch::TensorOptions().dtype(torch::kLong).device(device))) {}
  void add(const torch::Tensor& loss, const torch::Tensor& logits, const torch::Tensor& targets) {
    const int64_t n = task.loss_units(targets);
    loss_sum += loss.detach().to(torch::kDouble) * n;
    if (!task.language_model()) correct += task.correct(logits, targets);
    if (per_class) {
      if (!class_counts.defined()) {  // the model's classes, known at the first batch
        classes = logits.size(1);
        class_counts = classes <= ConfusionMatrix::kMaxCellClasses
                           ? torch::zeros({classes * classes}, correct.options())
                           : torch::zeros({3, classes}, correct.options());
        top5 = torch::zeros({}, correct.options());
      }
      if (classes <= ConfusionMatrix::kMaxCellClasses)
        task.count_cells(logits, targets, class_counts);
      else
        task.count_tallies(logits, targets, class_counts);
      if (classes > 5) top5 += task.top_k_correct(logits, targets, 5);
    }
    samples += targets.size(0);
    units += n;
  }
  SplitResult result() const {
    if (samples == 0) return {};
    SplitResult split{host_value(loss_sum) / static_cast<double>(units),
                      task.language_model() ? std::nan("")
                                            : static_cast<double>(correct.item<int64_t>()) /
                                                  static_cast<double>(samples)};
    if (class_counts.defined()) {
      const torch::Tensor counts = class_counts.to(torch::kCPU).contiguous();
      const int64_t* data = counts.data_ptr<int64_t>();
      if (classes <= ConfusionMatrix::kMaxCellClasses) {
        split.confusion =
            ConfusionMatrix::from_cells(classes, std::vector<int64_t>(data, data + counts.numel()));
      } else {
        auto row = [&](int64_t r) {
          return std::vector<int64_t>(data + r * classes, data + (r + 1) * classes);
        };
        split.confusion = ConfusionMatrix::from_tallies(row(0), row(1), row(2));
      }
      split.macro_f1 = split.confusion.macro_f1();
      if (classes > 5)
        split.top5 = static_cast<double>(top5.item<int64_t>()) / static_cast<double>(samples);
    }
    return split;
  }
  // The sums a checkpoint inside an epoch carries (loss_sum, correct, samples, units), and back:
  // a run resumed inside an epoch starts from them. A state written before the task seam has no
  // units: they were the samples.
  NamedTensors state() const {
    return {{"loss_sum", loss_sum.reshape({1})},
            {"correct", correct.reshape({1})},
            {"samples", torch::tensor({samples}, torch::kLong)},
            {"units", torch::tensor({units}, torch::kLong)}};
  }
  void restore(const std::map<std::string, torch::Tensor>& state) {
    auto take = [&](const char* name) {
      auto it = state.find(name);
      return it == state.end() ? torch::Tensor() : it->second;
    };
    if (auto sum = take("loss_sum"); sum.defined()) loss_sum.copy_(sum.reshape({}));
    if (auto hits = take("correct"); hits.defined()) correct.copy_(hits.reshape({}));
    if (auto count = take("samples"); count.defined()) samples = count.item<int64_t>();
    auto loss_units = take("units");
    units = loss_units.defined() ? loss_units.item<int64_t>() : samples;
  }
  // The sums over every rank's share (each rank trained its own batches).
  void sum_over_ranks(Strategy& strategy) {
    if (strategy.world_size() == 1) return;
    auto sample_count = torch::tensor({static_cast<double>(samples)}, torch::kDouble);
    auto unit_count = torch::tensor({static_cast<double>(units)}, torch::kDouble);
    strategy.all_reduce_sum(unit_count);
    units = static_cast<int64_t>(unit_count.item<double>());
    strategy.all_reduce_sum(loss_sum);
    strategy.all_reduce_sum(correct);
    strategy.all_reduce_sum(sample_count);
    samples = static_cast<int64_t>(sample_count.item<double>());
  }

  const TrainingTask& task;
  bool per_class;
  torch::Tensor loss_sum, correct;
  // per_class, defined at the first batch: the confusion matrix's cells (up to
  // ConfusionMatrix::kMaxCellClasses classes, else each class's tallies), the top-5 hits.
  torch::Tensor class_counts, top5;
  int64_t classes = 0;
  int64_t samples = 0;
  int64_t units = 0;  // what loss_sum is over: samples, or tokens
};

}  // namespace trainyard
