// The engine's public face, free of LibTorch so the controller and the CLI compile without it.
// train_run() executes one resolved run in this process: it builds the components from the
// registry, fits (train + validate each epoch, keeping the best weights), tests, and returns the
// final metrics. Per-epoch metrics go to the observer as they happen.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "runner/config/run_spec.h"
#include "trainyard/registry.h"

namespace trainyard {

using MetricValues = std::map<std::string, double>;

// Where a training run is, at each progress line: for live views (the line itself goes to on_log).
struct TrainingProgress {
  int64_t epoch = 0;  // 1-based
  int64_t epochs = 0;
  int64_t step = 0;  // optimizer steps done
  int64_t total_steps = 0;
  double loss = 0;
  double samples_per_s = 0;
  int64_t tokens_per_sample = 0;  // a language model's context, for tokens/s; 0 for classifiers
  double eta_seconds = 0;
  int64_t micro_batch = 0;  // train.micro_batch_size: the micro-batch now (0: whole batches)
  int64_t oom_events = 0;   // the out-of-memory events that halved it
  std::string line{};       // the progress line, as the log shows it
};

// Receives what a run reports while it trains. The engine formats its own progress lines; where
// they go (console, the run's log file) is the observer's business.
class RunObserver {
 public:
  virtual ~RunObserver() = default;
  virtual void on_log(const std::string& line) = 0;
  // Facts about the run known once it is set up: the dtypes actually used, the device, ...
  virtual void on_setup(const std::map<std::string, std::string>& attributes) {}
  virtual void on_epoch(int64_t epoch, const MetricValues& values) = 0;
  // Figures at an optimizer step (db/store.h's StepRow): the loss at progress lines, each
  // validation's, with the training time so far.
  virtual void on_step(int64_t step, const MetricValues& values) {}
  // A progress line with its figures: a log line, unless the observer shows progress otherwise
  // (a status line redrawn in place).
  virtual void on_progress(const TrainingProgress& progress) { on_log(progress.line); }
  // Called often (about every 100 ms) by whoever waits for the run: a chance to say it is alive.
  virtual void on_tick() {}
};

// Where a run executes, resolved from `runtime.accelerator` before it starts.
struct DeviceInfo {
  std::string type;  // "cpu" or "cuda"
  std::string name;  // "Intel(R) Xeon(R) ... (2 threads)", "NVIDIA H200"
  // Empty when the run can execute here; otherwise why not ("needs a CUDA device, found none").
  std::string unavailable_reason;
  // A CUDA device's memory in bytes (the smallest one's, when there are several), as the driver
  // reports it; 0 on the CPU or when unknown.
  double memory_bytes = 0;
  int64_t cuda_devices = 0;  // the CUDA devices this process sees; 0 on the CPU
};

DeviceInfo resolve_device(const RuntimeOptions& runtime);

// Intra-op CPU threads for a rank: runtime.threads' count, or what the launcher chose for every
// rank of the run (TRAINYARD_THREADS: the machine's usable CPUs, machine_cpu_threads in
// common/process.h; with idle the CPUs idle when it started; or the count the run recorded in the
// checkpoint it continues from, so that it computes what it would have), or without a launcher
// the same choice made here. `why` says how, for the run's details.
inline constexpr const char* kThreadsVariable = "TRAINYARD_THREADS";
inline constexpr const char* kThreadsWhyVariable = "TRAINYARD_THREADS_WHY";
int intra_op_threads(const RuntimeOptions& runtime, std::string& why);

// Each run's model against its weights and its data, before anything trains (runner/engine/
// check_models.cpp). model.weights is read from the file's header alone (check_weights): tensors
// missing, unexpected or of another shape (the head excepted) are refused as they would be when the
// run starts. One sample of the data goes through the model's forward, in evaluation mode on the
// CPU — read from an image dataset, made from a sequence dataset's capabilities (token ids
// [1, max_length]), so no file is tokenised — and a forward that fails or returns logits of
// another shape than the data's classes (or vocabulary) is refused with the sample's shape and the
// options that set it. ConfigError naming model.weights or the dataset. Each distinct model and
// dataset is built once; a sweep over the learning rate builds one model and reads one sample.
// Returns notes ("file:line:col: note: ...") for data that could not be read here, which the run
// reports when it reads it.
std::vector<std::string> check_models_fit(const std::vector<RunSpec>& runs,
                                          const Registry& registry);

// What a run will hold in memory per rank, forecast before it trains (runner/engine/
// memory_forecast.cpp). The state is counted from its model and optimizer built on the CPU, shared
// out as its strategy shares it; the activations are measured by real forward and backward passes
// at two small micro-batch sizes on this machine's CPU (the peak of the tensor bytes LibTorch's
// allocator reports), so they are the CPU's: a GPU's differ by its kernels' workspaces.
struct MemoryForecast {
  double parameters = 0, gradients = 0, optimizer_state = 0;  // bytes one rank keeps
  // Unshared, as one process keeps them: the parameters, and the gradients with optimizer state.
  double whole_parameters = 0, whole_gradients_and_state = 0;
  double per_sample = 0;  // what each sample of a micro-batch adds to a step's peak
  double fixed = 0;       // what a step adds to the resident memory besides its samples
  double baseline = 0;    // resident memory before a step: LibTorch, the data, the model, its state
  int64_t micro_batch = 0;                  // the run's: train.micro_batch_size, or the batch
  std::pair<int64_t, int64_t> measured_at;  // the two micro-batch sizes measured
  std::string problem{};                    // why nothing was measured ("" when it was)
  double state() const;                     // parameters + gradients + optimizer state
  // A step's peak resident memory at `micro_batch` samples (the CPU's: baseline included).
  double peak_at(int64_t micro_batch) const;
};
MemoryForecast forecast_memory(const RunSpec& run, const Registry& registry);

// Dense peak TFLOP/s of `device_name` for `dtype` ("BFloat16", "Half", "TensorFloat32", "Float"),
// or 0 when not in the table (then no MFU is reported rather than a guess).
double peak_tflops(const std::string& device_name, const std::string& dtype);
std::string torch_version();

struct RunContext {
  const Registry& registry;
  RunObserver& observer;
  const std::atomic<bool>* stop_requested = nullptr;  // set by SIGINT/SIGTERM: throws Interrupted
  // Files the run writes: <prefix>.safetensors (train.save_weights), <prefix>.state/ (its
  // checkpoints). Empty: none (no checkpoints either).
  std::string output_prefix{};
  // A checkpoint of this same run (<output_prefix>.state) to continue from, set by the controller
  // when the run was interrupted: the run goes on where it stopped, with its own counts (training
  // time, throughput) carried over. Unlike train.resume_from, which starts a new run from a state.
  std::string continue_from{};
  // Stop after this many epochs, their checkpoint written, as when interrupted (Interrupted): a
  // study's successive halving pauses a trial at a rung, and promoted it continues from there bit
  // for bit. 0: train every epoch.
  int64_t pause_after_epochs = 0;
};

// The checkpoint folder of a run whose files start with `output_prefix`, and the folder a new
// checkpoint is staged in beside it before it is swapped in (checkpoint.h).
inline std::string checkpoint_dir(const std::string& output_prefix) {
  return output_prefix + ".state";
}
inline std::string checkpoint_staging_dir(const std::string& dir) { return dir + ".new"; }

// Throws UserError for bad data or options found while building, Interrupted when stopped,
// and anything else for a failure of the run itself.
MetricValues train_run(const RunSpec& run, const RunContext& context);

// What a warm worker (`trainyard worker --serve`, runner/launcher.h's WarmEngine) puts back before
// each run, so that the run computes what it would in a process of its own: LibTorch's global
// switches a run may leave changed when it ends by an exception — grad mode on, autocast off on
// every device with its default dtypes and an empty cache, deterministic algorithms off — and the
// float32 matmul precision at its default. The rest of what a run reads from the process is set by
// every run itself (ARCHITECTURE.md, "A warm engine", lists it all and says why that is complete).
void reset_process_state();

}  // namespace trainyard
