// One run, fully resolved: every component chosen with all its options, the train and runtime
// settings, and the resolved config text that the store keeps and every rank reads back. This is
// what the engine and the controller see of an experiment file; how files, `extends`, `--set` and
// sweeps produce it is runner/config/experiment.h's business.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "common/metrics.h"
#include "components/plugin_loader.h"
#include "trainyard/options.h"
#include "trainyard/registry.h"

namespace trainyard {

// The options every model section has besides its own: where its weights come from.
struct WeightsOptions {
  std::string weights;  // a safetensors file; empty: random initialisation
  bool strict = true;   // false: load what fits, list what did not, go on
};

// runtime.accelerator: where to train (Lightning's gpu is cuda); auto: cuda when a GPU is present.
enum class Accelerator { automatic, cpu, cuda };
template <>
struct OptionWords<Accelerator> {
  static constexpr std::pair<const char*, Accelerator> words[] = {
      {"cpu", Accelerator::cpu}, {"cuda", Accelerator::cuda}, {"auto", Accelerator::automatic}};
};

// train.checkpoint: the weights the test uses — the best validation epoch's, or the last epoch's.
enum class TestedWeights { best, last };
template <>
struct OptionWords<TestedWeights> {
  static constexpr std::pair<const char*, TestedWeights> words[] = {{"best", TestedWeights::best},
                                                                    {"last", TestedWeights::last}};
};

// train.monitor, train.early_stop.metric and sweep.search.metric: the validation figure watched
// (common/metrics.h). val_f1: a classifier's macro-F1.
template <>
struct OptionWords<WatchedMetric> {
  static constexpr std::pair<const char*, WatchedMetric> words[] = {
      {metric::kValLoss, WatchedMetric::val_loss},
      {metric::kValAcc, WatchedMetric::val_acc},
      {metric::kValF1, WatchedMetric::val_f1}};
};

// runtime.compile: none, or the whole training step captured into a CUDA graph once and replayed.
enum class Compile { none, cuda_graphs };
template <>
struct OptionWords<Compile> {
  static constexpr std::pair<const char*, Compile> words[] = {
      {"none", Compile::none}, {"cuda-graphs", Compile::cuda_graphs}};
};

// runtime.sync_debug: host synchronisations inside training steps (CUDA) pass, warn, or fail.
enum class SyncDebug { off, warn, error };
template <>
struct OptionWords<SyncDebug> {
  static constexpr std::pair<const char*, SyncDebug> words[] = {
      {"off", SyncDebug::off}, {"warn", SyncDebug::warn}, {"error", SyncDebug::error}};
};

// train.micro_batch_size: each loader batch split into micro-batches (the optimizer step the same)
// — of a number of samples, or auto: whole at first and halved at each out-of-memory, the step run
// again. Written as a number, "auto", or left out (whole batches).
struct MicroBatchSize {
  bool automatic = false;
  int64_t samples = 0;  // a fixed size; 0: none (whole batches, or auto)
  std::string written;  // as the config writes it: "", "auto", "8"
  bool whole() const { return !automatic && samples == 0; }
  bool valid() const { return written.empty() || automatic || samples >= 1; }
};
bool decode_value(const YAML::Node& node, MicroBatchSize& out, std::string& expected);
YAML::Node encode_value(const MicroBatchSize& value);
inline std::optional<std::string> check_rule(const Rule&, const MicroBatchSize&) {
  return std::nullopt;  // train_option_set's check says what is wrong with it
}
template <>
inline const char* type_name<MicroBatchSize>() {
  return "string";
}

// runtime.threads: intra-op CPU threads per rank. A count; 0, the default, every CPU this process
// may use (affinity mask, cgroup quota) shared among the node's ranks — the machine's, whatever
// runs beside it, so one file on one machine computes the same figures; or idle, the CPUs idle
// when the run starts, shared alike — faster on a shared machine, but two runs may then differ.
struct ThreadCount {
  int64_t count = 0;  // ≥ 1: exactly; 0: chosen (by the machine, or by its idle CPUs); < 0: invalid
  bool idle = false;
  bool valid() const { return count >= 0; }
};
bool decode_value(const YAML::Node& node, ThreadCount& out, std::string& expected);
YAML::Node encode_value(const ThreadCount& value);
inline std::optional<std::string> check_rule(const Rule&, const ThreadCount&) {
  return std::nullopt;  // runtime_option_set's check says what is wrong with it
}
template <>
inline const char* type_name<ThreadCount>() {
  return "integer";
}

struct TrainOptions {
  int64_t epochs = 3;
  int64_t batch_size = 16;      // per device
  int64_t eval_batch_size = 0;  // 0: same as batch_size
  int64_t seed = 123;
  int64_t grad_accum = 1;  // loader batches per optimizer step
  MicroBatchSize micro_batch_size;
  bool micro_batch_auto() const { return micro_batch_size.automatic; }
  double clip_grad_norm = 0.0;                     // 0: no clipping
  TestedWeights checkpoint = TestedWeights::best;  // which weights the test uses
  // What "best" means: the lowest val_loss, or the highest val_acc; a tie keeps the later epoch.
  WatchedMetric monitor = WatchedMetric::val_loss;
  int64_t log_every = 50;           // steps between progress lines
  int64_t val_every_steps = 0;      // also validate inside epochs every N optimizer steps; 0: off
  int64_t limit_train_batches = 0;  // 0: all; else train on this many batches per epoch
  int64_t limit_eval_batches = 0;   // 0: all; else evaluate this many batches per split
  bool save_weights = false;        // write the tested weights beside the run's log
  bool save_state = false;          // keep the training state (checkpoint) after the run
  std::string resume_from;          // a training-state folder to continue from
  // Checkpoints inside epochs (one is written at every epoch's end regardless): every N optimizer
  // steps (0: off) and every M minutes (0: off). Ten minutes bounds what a kill costs overnight
  // while writing even ViT-B/16's 1 GB state takes seconds: under 1% of the run.
  int64_t checkpoint_every_steps = 0;
  double checkpoint_every_minutes = 10;
  // train.early_stop: stop when `metric` has not improved by min_delta for `patience` epochs;
  // patience 0: off.
  WatchedMetric early_stop_metric = WatchedMetric::val_loss;
  int64_t early_stop_patience = 0;
  double early_stop_min_delta = 0;
};

struct RuntimeOptions {
  Accelerator accelerator = Accelerator::automatic;
  int64_t devices = 1;
  std::string precision = "32-true";
  ThreadCount threads{};                     // intra-op CPU threads per rank
  std::string matmul_precision = "highest";  // float32 matmuls: highest, high (TF32), medium
  int64_t data_workers = 2;  // threads building batches in the background; 0: in the training loop
  int64_t prefetch = 4;      // batches built ahead of the training loop
  int64_t timeout_s = 600;   // a rendezvous or collective that takes longer fails the run
  Compile compile = Compile::none;
  SyncDebug sync_debug = SyncDebug::off;
  // Where the run's figures also go while it trains: "tensorboard" (docs/trackers.md). Not part of
  // the run's identity: logging changes no figure.
  std::vector<std::string> loggers{};
};

const OptionSet<WeightsOptions>& weights_option_set();
const OptionSet<TrainOptions>& train_option_set();
const OptionSet<RuntimeOptions>& runtime_option_set();

// One run: a fully resolved configuration.
struct RunSpec {
  std::string variant;  // "default" when the experiment has no sweep
  int64_t repeat = 0;   // sweep.repeats: the variant's r-th run, trained with seed train.seed + r
  Chosen<ModelCapabilities> model;
  WeightsOptions weights;   // of the model
  Origin weights_origin{};  // where model.weights is written, for what validation finds in it
  Chosen<DatasetCapabilities> dataset;
  Origin dataset_origin{};  // where the dataset is named, for a model that cannot read its samples
  Chosen<OptimizerCapabilities> optimizer;
  Chosen<SchedulerCapabilities> scheduler;
  Chosen<StrategyCapabilities> strategy;  // runtime.strategy
  PrecisionCapabilities precision{};      // runtime.precision's
  TrainOptions train;
  RuntimeOptions runtime;
  std::vector<PluginRef> plugins;  // the libraries its components may come from (`plugins:`)
  // The options that name data (names_data in trainyard/options.h) and the paths they name, as
  // resolved: the run is identified by their contents' fingerprints.
  std::vector<std::pair<std::string, std::string>> data_paths{};
  std::string config_yaml;  // the resolved config, stored with the run
  std::string config_hash;  // the run's identity (run_identity_hash): "already completed?" asks it
  // The identity as runs recorded before fingerprints computed it (legacy_identity_hash); equal
  // to config_hash for a run that names no data file and no plugin.
  std::string legacy_config_hash{};
};

// The stable hash that identifies a run's configuration: of its resolved config without the keys
// that change how a run is looked after but not what it computes (checkpoint cadence, early
// stopping when off), so changing those neither reruns completed runs nor orphans an interrupted
// one, and runs recorded before the keys existed keep their identity.
// Data is identified by content: the keys that name data files or folders (those the resolved
// config's `fingerprints` list names) count by their fingerprints, not their paths, and each plugin
// by its SHA-256, not its path — the same files elsewhere are the same configuration.
std::string run_identity_hash(const ConfigTree& resolved);

// The identity of runs recorded before fingerprints: the same, with data and plugins counted by
// their paths. A store's run whose hash is a config's legacy hash is that config's run (old
// databases keep their runs, at the paths they were recorded with).
std::string legacy_identity_hash(const ConfigTree& resolved);

}  // namespace trainyard
