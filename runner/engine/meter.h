// What a run measures about itself besides loss and accuracy: throughput, model FLOP/s and MFU,
// time waiting for data, communication per step, peak memory. The trainer reports events as they
// happen (a batch trained, a wait for data, an epoch's loop over); the meter keeps the counts and
// reads them out in the metrics vocabulary (common/metrics.h) — the figures the store and the
// reports show — and as the console's per-interval rates.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <string>

#include <torch/types.h>

#include "runner/engine/engine.h"

namespace trainyard {

class TrainingMeter {
 public:
  using Clock = std::chrono::steady_clock;

  // Starts the peak-memory marks of the process (the previous run's in this process are dropped).
  TrainingMeter();
  // Peak CUDA memory counts from here (it includes what is allocated now, e.g. the model).
  void start_device(const torch::Device& device);

  // --- events of the training loop ---
  void add_data_wait(double seconds) { data_wait_seconds_ += seconds; }
  // A micro-batch of `samples` trained on this rank, costing `flops` model FLOPs.
  void add_batch(int64_t samples, double flops) {
    samples_ += samples;
    flops_ += flops;
  }
  // An epoch's training loop took `seconds`, in which the strategy communicated `comm_bytes` over
  // `steps` optimizer steps.
  void add_epoch(double seconds, double comm_bytes, int64_t steps) {
    loop_seconds_ += seconds;
    comm_bytes_ += comm_bytes;
    comm_steps_ += steps;
  }

  // --- a run continuing from a checkpoint ---
  // The counts so far by name, and setting them back: a continued run's throughput covers all of
  // its training, not only the part after the last interruption.
  std::map<std::string, double> counts() const;
  void restore_counts(const std::map<std::string, double>& counts);

  // --- the console's rates ---
  // Starts the first interval of progress lines at optimizer step `step` (0, or where a resumed
  // run continues).
  void start_steps(int64_t step);
  // Milliseconds per optimizer step since the previous call (or start_steps), given the step count
  // now: the interval of a progress line.
  double ms_per_step_since_last(int64_t step);

  // --- the record ---
  // samples_per_s (over `world_size` ranks), data_wait, comm_bytes_per_step (several ranks),
  // tflops and mfu (against `peak_tflops`, this rank's device and dtype; 0: unknown, no MFU). No
  // figure when nothing was trained (a resumed run with no epoch left).
  void record_throughput(MetricValues& metrics, int world_size, double peak_tflops) const;
  // peak_rss_bytes, peak_memory_bytes and, on CUDA, the caching allocator's peaks: this rank's.
  void record_memory(MetricValues& metrics) const;

 private:
  torch::Device device_{torch::kCPU};
  double data_wait_seconds_ = 0;
  int64_t samples_ = 0;      // trained on this rank
  double flops_ = 0;         // model FLOPs of the training steps, this rank
  double loop_seconds_ = 0;  // inside the training loops (validation excluded)
  double comm_bytes_ = 0;    // gradient and parameter collectives of the training loops
  int64_t comm_steps_ = 0;
  Clock::time_point interval_start_ = Clock::now();
  int64_t interval_step_ = 0;
};

}  // namespace trainyard
