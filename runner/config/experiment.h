// An experiment file, read, validated and expanded into the runs it describes.
//
// Layering, lowest first: option defaults < files named by `extends:` (in order) < the file <
// the sweep variant's `set:` < `--set key=value` on the command line. Validation happens before
// anything runs and reports every problem at once (ConfigError); nothing is written on failure.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "components/registry.h"
#include "runner/config/config_tree.h"

namespace trainyard {

// A component chosen by name, with its resolved options (every option, defaults included).
struct ComponentChoice {
  std::string name;
  ConfigTree options;
};

// The options every model section has besides its own: where its weights come from.
struct WeightsOptions {
  std::string weights;  // a safetensors file; empty: random initialisation
  bool strict = true;   // false: load what fits, list what did not, go on
};

struct TrainOptions {
  int64_t epochs = 3;
  int64_t batch_size = 16;       // per device
  int64_t eval_batch_size = 0;   // 0: same as batch_size
  int64_t seed = 123;
  int64_t grad_accum = 1;        // micro-batches per optimizer step
  double clip_grad_norm = 0.0;   // 0: no clipping
  std::string checkpoint = "best";  // which weights the test uses: best validation, or last
  int64_t log_every = 50;        // steps between progress lines
  int64_t limit_train_batches = 0;  // 0: all; else train on this many batches per epoch
  int64_t limit_eval_batches = 0;   // 0: all; else evaluate this many batches per split
  bool save_weights = false;        // write the tested weights beside the run's log
  bool save_state = false;          // write the training state after every epoch
  std::string resume_from;          // a training-state folder to continue from
};

struct RuntimeOptions {
  std::string accelerator = "auto";  // cpu, cuda, or auto (cuda when a GPU is present)
  int64_t devices = 1;
  std::string precision = "32-true";
  int64_t threads = 0;  // intra-op CPU threads; 0: LibTorch's default
  std::string matmul_precision = "highest";  // float32 matmuls: highest, high (TF32), medium
  int64_t data_workers = 2;  // threads building batches in the background; 0: in the training loop
  int64_t prefetch = 4;      // batches built ahead of the training loop
  int64_t timeout_s = 600;   // a rendezvous or collective that takes longer fails the run
  std::string compile = "none";  // none, or cuda-graphs: the training step captured once, replayed
  std::string sync_debug = "off";  // off, warn, error: host synchronisations inside training steps (CUDA)
};

struct ReportOptions {
  std::string title;
  std::string baseline;  // variant the speedups are relative to; "" = the first variant
  std::vector<std::string> metrics = {"train_seconds", "speedup", "test_acc", "peak_memory_bytes",
                                      "samples_per_s"};
};

const OptionSet<WeightsOptions>& weights_option_set();
const OptionSet<TrainOptions>& train_option_set();
const OptionSet<RuntimeOptions>& runtime_option_set();
const OptionSet<ReportOptions>& report_option_set();

// One run: a fully resolved configuration.
struct RunSpec {
  std::string variant;  // "default" when the experiment has no sweep
  ComponentChoice model;
  WeightsOptions weights;  // of the model
  ComponentChoice dataset;
  ComponentChoice optimizer;
  ComponentChoice scheduler;
  ComponentChoice strategy;  // runtime.strategy
  TrainOptions train;
  RuntimeOptions runtime;
  // Why this run cannot execute with this build ("precision 16-mixed is not supported yet (...)");
  // empty when it can. Such runs are recorded as skipped rather than failing validation.
  std::string unavailable_reason;
  std::string config_yaml;  // the resolved config, stored with the run
  std::string config_hash;  // stable hash of config_yaml: "already completed?" is keyed by it
};

struct Experiment {
  std::string name;
  std::string description;
  std::string file;
  ReportOptions report;
  std::vector<RunSpec> runs;
};

// Reads `file` (following `extends:`), applies `overrides` ("train.epochs=1"), validates and
// expands the sweep. Throws ConfigError listing every problem.
Experiment load_experiment(const std::string& file, const std::vector<std::string>& overrides,
                           const Registry& registry);

// Re-reads the resolved config of one run (RunSpec::config_yaml), as a worker process would.
RunSpec parse_resolved_run(const std::string& config_yaml, const std::string& variant,
                           const Registry& registry);

}  // namespace trainyard
