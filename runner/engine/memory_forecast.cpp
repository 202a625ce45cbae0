// The memory forecast of `trainyard run --dry-run` (runner/engine/engine.h): a run's state bytes
// from its model and optimizer, built here on the CPU, and its activations measured by real steps
// at two small micro-batch sizes — the peak of the tensor bytes LibTorch's CPU allocator reports.
#include <algorithm>
#include <cmath>
#include <fstream>
#include <string>

#include <ATen/Parallel.h>
#include <c10/core/Allocator.h>
#include <c10/util/ThreadLocalDebugInfo.h>
#include <fmt/format.h>
#include <torch/nn/functional/loss.h>
#include <torch/utils.h>

#include "common/metrics.h"
#include "common/text.h"
#include "components/data/loader.h"
#include "components/precision/precision.h"
#include "components/strategy/place_model.h"
#include "runner/engine/engine.h"
#include "runner/engine/task.h"
#include "trainyard/model.h"
#include "trainyard/optimizers.h"

namespace trainyard {

namespace {

// A field of /proc/self/status in bytes ("VmRSS"); 0 when it cannot be read.
double status_bytes(const std::string& field) {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line))
    if (line.rfind(field + ":", 0) == 0) return 1024.0 * std::atof(line.c_str() + field.size() + 1);
  return 0;
}

// LibTorch's CPU allocator reports every allocation and free, with the bytes then allocated in
// all, to the thread's memory profiler: this one keeps their peak. Exact tensor bytes, unlike the
// process's resident memory, which glibc's caching blurs.
class PeakTensorBytes : public c10::MemoryReportingInfoBase {
 public:
  void reportMemoryUsage(void*, int64_t, size_t total_allocated, size_t,
                         c10::Device device) override {
    if (!device.is_cpu()) return;
    now_ = static_cast<double>(total_allocated);
    peak_ = std::max(peak_, now_);
  }
  bool memoryProfilingEnabled() const override { return true; }
  void restart() { peak_ = now_; }
  double now() const { return now_; }
  double peak() const { return peak_; }

 private:
  double now_ = 0, peak_ = 0;
};

}  // namespace

double MemoryForecast::state() const { return parameters + gradients + optimizer_state; }

double MemoryForecast::peak_at(int64_t micro_batch) const {
  return baseline + fixed + per_sample * static_cast<double>(micro_batch);
}

MemoryForecast forecast_memory(const RunSpec& run, const Registry& registry) {
  MemoryForecast forecast;
  const TrainOptions& train = run.train;
  const int64_t micro =
      train.micro_batch_size.samples > 0 ? train.micro_batch_size.samples : train.batch_size;
  forecast.micro_batch = micro;
  std::string why;
  at::set_num_threads(intra_op_threads(run.runtime, why));
  torch::manual_seed(static_cast<uint64_t>(train.seed));

  DataContext data_context{.image_size = run.model.capabilities.image_size,
                           .max_positions = run.model.capabilities.max_positions,
                           .vocab_size = run.model.capabilities.vocab_size,
                           .log = [](const std::string&) {}};
  const DataSplits data = build_dataset(registry, run.dataset, data_context);
  // The two sizes measured: small, and the run's own when it is smaller still.
  const int64_t large = std::min<int64_t>({micro, 32, data.train->size()});
  const int64_t small = std::max<int64_t>(1, large / 2);
  if (small == large) {
    forecast.problem =
        "cannot measure activations: the training split or the micro-batch holds "
        "one sample";
    return forecast;
  }
  forecast.measured_at = {small, large};
  DataLoader loader(
      data.train, large, static_cast<uint64_t>(train.seed),
      {.shuffle = false, .drop_last = false, .workers = 0, .transform = data.train_transform});
  loader.start_epoch(0, 1);
  const Batch batch = loader.next();

  ModelPtr model =
      build_model(registry, run.model,
                  ModelContext{.num_classes = data.num_classes, .vocab_size = data.vocab_size});
  PrecisionPtr precision =
      build_precision(registry, run.runtime.precision, {.device = c10::DeviceType::CPU});
  place_model(*model, torch::kCPU, precision->param_dtype());
  model->train();
  OptimizerPtr optimizer = build_optimizer(registry, run.optimizer, model->parameters());
  const TrainingTask task(run.model.capabilities.task);
  auto step = [&](int64_t samples) {
    Batch part = batch.slice(0, samples);
    if (!precision->autocast() && part.inputs.is_floating_point())
      part.inputs = part.inputs.to(precision->param_dtype());
    torch::Tensor loss;
    {
      Precision::AutocastScope autocast(*precision, c10::DeviceType::CPU);
      loss = task.loss(model->forward(part), part.targets);
    }
    loss.backward();
  };
  // A first step allocates the gradients, the optimizer's state and the kernels' caches (at the
  // larger size: those sized by it are then there for both); the steps measured after it hold
  // what every later step holds.
  step(large);
  optimizer->libtorch().step();
  const double world = static_cast<double>(run.runtime.devices);
  forecast.parameters = tensor_bytes(model->parameters());
  forecast.gradients = forecast.parameters;  // a gradient per parameter, in its dtype
  forecast.optimizer_state = optimizer->state_bytes();
  forecast.whole_parameters = forecast.parameters;
  forecast.whole_gradients_and_state = forecast.gradients + forecast.optimizer_state;
  // What a rank keeps under its strategy, as its capabilities say: zero2 shards gradients and
  // optimizer state, fsdp the parameters too (each 1/N, padding aside).
  if (run.strategy.capabilities.shards_gradients) {
    forecast.gradients /= world;
    forecast.optimizer_state /= world;
  }
  if (run.strategy.capabilities.shards_parameters) forecast.parameters /= world;

  forecast.baseline = status_bytes("VmRSS");
  auto reporter = std::make_shared<PeakTensorBytes>();
  c10::DebugInfoGuard profiling(c10::DebugInfoKind::PROFILER_STATE, reporter);
  double peaks[2];
  // One thread: the profiler's state is the calling thread's, and every allocation is then its.
  at::set_num_threads(1);
  for (int i = 0; i < 2; ++i) {
    optimizer->libtorch().zero_grad(/*set_to_none=*/false);  // allocated: counted in the state
    const torch::Tensor probe = torch::empty({1});           // a report: what is allocated now
    reporter->restart();
    const double before = reporter->now();
    step(i == 0 ? small : large);
    peaks[i] = reporter->peak() - before;
  }
  if (reporter->peak() <= 0) {
    forecast.problem = "cannot measure: LibTorch's CPU allocator reported nothing";
    return forecast;
  }
  forecast.per_sample =
      large > small ? std::max(0.0, (peaks[1] - peaks[0]) / static_cast<double>(large - small)) : 0;
  forecast.fixed = std::max(0.0, peaks[0] - forecast.per_sample * static_cast<double>(small));
  return forecast;
}

}  // namespace trainyard
