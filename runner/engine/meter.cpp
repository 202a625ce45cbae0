#include "runner/engine/meter.h"

#include <malloc.h>

#include <fstream>
#include <string>

#include <c10/cuda/CUDACachingAllocator.h>

#include "common/metrics.h"

namespace trainyard {

namespace {

// The kernel's peak resident set size of this process (VmHWM), in bytes.
double peak_rss_bytes() {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("VmHWM:", 0) == 0) return 1024.0 * std::stod(line.substr(6));
  return 0;
}

}  // namespace

TrainingMeter::TrainingMeter() {
  // Runs may share the process: hand the previous run's freed heap back to the kernel first, then
  // reset the kernel's peak-RSS mark (VmHWM) by writing 5 to clear_refs.
  malloc_trim(0);
  std::ofstream("/proc/self/clear_refs") << "5";
}

void TrainingMeter::start_device(const torch::Device& device) {
  device_ = device;
  // A run after another in the same process (a warm engine) starts from an empty cache, as a run
  // of its own would: the previous run's cached blocks would count in this one's reserved peak.
  if (!device_.is_cuda()) return;
  c10::cuda::CUDACachingAllocator::emptyCache();
  c10::cuda::CUDACachingAllocator::resetPeakStats(device_.index());
}

void TrainingMeter::start_steps(int64_t step) {
  interval_start_ = Clock::now();
  interval_step_ = step;
}

double TrainingMeter::ms_per_step_since_last(int64_t step) {
  const auto now = Clock::now();
  const double ms = std::chrono::duration<double, std::milli>(now - interval_start_).count();
  const int64_t steps = step - interval_step_;
  interval_start_ = now;
  interval_step_ = step;
  return steps > 0 ? ms / static_cast<double>(steps) : 0;
}

void TrainingMeter::record_throughput(MetricValues& metrics, int world_size,
                                      double peak_tflops) const {
  if (loop_seconds_ <= 0) return;
  metrics[metric::kSamplesPerSecond] = static_cast<double>(samples_) * world_size / loop_seconds_;
  metrics[metric::kDataWait] = data_wait_seconds_ / loop_seconds_;
  if (world_size > 1 && comm_steps_ > 0)
    metrics[metric::kCommBytesPerStep] = comm_bytes_ / static_cast<double>(comm_steps_);
  const double tflops = flops_ / loop_seconds_ / 1e12;  // this rank's
  if (tflops <= 0) return;
  metrics[metric::kTflops] = tflops * world_size;
  // Above 100% means the peak table is wrong for this device, not a fast run: say nothing.
  if (peak_tflops > 0 && tflops <= peak_tflops) metrics[metric::kMfu] = tflops / peak_tflops;
}

void TrainingMeter::record_memory(MetricValues& metrics) const {
  const double rss = peak_rss_bytes();
  metrics[metric::kPeakRss] = rss;
  metrics[metric::kPeakMemory] = rss;
  if (!device_.is_cuda()) return;
  auto stats = c10::cuda::CUDACachingAllocator::getDeviceStats(device_.index());
  constexpr auto all = static_cast<size_t>(c10::CachingAllocator::StatType::AGGREGATE);
  metrics[metric::kCudaPeakReserved] = static_cast<double>(stats.reserved_bytes[all].peak);
  metrics[metric::kCudaPeakAllocated] = static_cast<double>(stats.allocated_bytes[all].peak);
  metrics[metric::kPeakMemory] = metrics[metric::kCudaPeakReserved];  // as the studies report
}

std::map<std::string, double> TrainingMeter::counts() const {
  return {{"data_wait_seconds", data_wait_seconds_},
          {"samples", static_cast<double>(samples_)},
          {"flops", flops_},
          {"loop_seconds", loop_seconds_},
          {"comm_bytes", comm_bytes_},
          {"comm_steps", static_cast<double>(comm_steps_)}};
}

void TrainingMeter::restore_counts(const std::map<std::string, double>& counts) {
  auto get = [&](const char* name) {
    auto it = counts.find(name);
    return it == counts.end() ? 0.0 : it->second;
  };
  data_wait_seconds_ = get("data_wait_seconds");
  samples_ = static_cast<int64_t>(get("samples"));
  flops_ = get("flops");
  loop_seconds_ = get("loop_seconds");
  comm_bytes_ = get("comm_bytes");
  comm_steps_ = static_cast<int64_t>(get("comm_steps"));
}

}  // namespace trainyard
