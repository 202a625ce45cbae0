// The train, runtime and model-weights options of a run, each declared once.
#include "runner/config/run_spec.h"

#include <charconv>

#include <fmt/format.h>

#include "common/text.h"

namespace trainyard {

const OptionSet<WeightsOptions>& weights_option_set() {
  static const OptionSet<WeightsOptions> set = [] {
    OptionSet<WeightsOptions> s;
    s.add("weights", &WeightsOptions::weights,
          "safetensors file to initialise the model from; empty = random initialisation",
          names_data())
        .add("strict", &WeightsOptions::strict,
             "fail when checkpoint and model do not match (besides the classification head)");
    return s;
  }();
  return set;
}

const OptionSet<TrainOptions>& train_option_set() {
  static const OptionSet<TrainOptions> set = [] {
    OptionSet<TrainOptions> s;
    s.add("epochs", &TrainOptions::epochs,
          "passes over the training split; 0: only test the given weights (model.weights or "
          "train.resume_from), as Lightning's trainer.test(ckpt_path=...)",
          at_least(0))
        .add("batch_size", &TrainOptions::batch_size, "samples per device per micro-batch",
             at_least(1))
        .add("eval_batch_size", &TrainOptions::eval_batch_size,
             "batch size for validation and test; 0 = batch_size", at_least(0))
        .add("seed", &TrainOptions::seed, "seed for initialisation, shuffling and dropout",
             at_least(0))
        .add("grad_accum", &TrainOptions::grad_accum,
             "micro-batches accumulated per optimizer step", at_least(1))
        .add("clip_grad_norm", &TrainOptions::clip_grad_norm,
             "clip the global gradient norm to this value; 0 = off", at_least(0))
        .add("checkpoint", &TrainOptions::checkpoint,
             "weights used for the test: the best validation epoch's, or the last epoch's")
        .add("monitor", &TrainOptions::monitor,
             "train.checkpoint: best keeps the epoch with the lowest val_loss, or the highest "
             "val_acc or val_f1 (macro-F1); on a tie, the later epoch")
        .add("log_every", &TrainOptions::log_every, "optimizer steps between progress lines",
             at_least(1))
        .add("micro_batch_size", &TrainOptions::micro_batch_size,
             "split each batch into micro-batches of this many samples, the optimizer step the "
             "same (batch_size x grad_accum samples per device); auto: start whole and, when a "
             "forward or backward runs out of memory, halve it and run the same step again; "
             "empty = the whole batch")
        .add("val_every_steps", &TrainOptions::val_every_steps,
             "also validate inside epochs every N optimizer steps, for time-to-target "
             "(report.target) at a finer grain than epochs; its time counts as training time and "
             "is shown; 0 = at each epoch's end only",
             at_least(0))
        .add("limit_train_batches", &TrainOptions::limit_train_batches,
             "train on at most this many batches per epoch; 0 = all", at_least(0))
        .add("limit_eval_batches", &TrainOptions::limit_eval_batches,
             "evaluate at most this many batches of validation and test; 0 = all", at_least(0))
        .add("save_weights", &TrainOptions::save_weights,
             "write the tested weights (safetensors, loadable by model.weights) beside the run's "
             "log")
        .add("save_state", &TrainOptions::save_state,
             "keep the run's last training state (weights, optimizer, counters; a folder beside "
             "the run's log, resumable under any strategy and world size) after it completes; "
             "without it the checkpoint goes when the run completes")
        .add("checkpoint_every_steps", &TrainOptions::checkpoint_every_steps,
             "also checkpoint inside epochs every N optimizer steps (a kill costs at most N "
             "steps); 0 = off; a checkpoint is written at every epoch's end regardless",
             at_least(0))
        .add("checkpoint_every_minutes", &TrainOptions::checkpoint_every_minutes,
             "also checkpoint inside epochs every M minutes; 0 = off. 10 bounds what a kill costs "
             "overnight at well under 1% of the time",
             at_least(0))
        .add("early_stop.metric", &TrainOptions::early_stop_metric,
             "train.early_stop: the validation figure watched")
        .add("early_stop.patience", &TrainOptions::early_stop_patience,
             "train.early_stop: stop after this many epochs without improvement; 0 = off",
             at_least(0))
        .add("early_stop.min_delta", &TrainOptions::early_stop_min_delta,
             "train.early_stop: the least change that counts as an improvement", at_least(0))
        .add("resume_from", &TrainOptions::resume_from,
             "a training-state folder (train.save_state) to continue from; its epochs count toward "
             "train.epochs")
        .check([](const TrainOptions& o) -> std::optional<std::string> {
          if (!o.micro_batch_size.valid())
            return fmt::format(
                "micro_batch_size '{}' is neither a number of samples ≥ 1 nor auto; write e.g. "
                "micro_batch_size: 8, or auto, or leave it out for whole batches",
                o.micro_batch_size.written);
          return std::nullopt;
        });
    return s;
  }();
  return set;
}

const OptionSet<RuntimeOptions>& runtime_option_set() {
  static const OptionSet<RuntimeOptions> set = [] {
    OptionSet<RuntimeOptions> s;
    s.add("accelerator", &RuntimeOptions::accelerator,
          "where to train: cpu, cuda (Lightning's gpu), or auto (cuda when a GPU is present)")
        .add("devices", &RuntimeOptions::devices,
             "devices (processes) per node; auto or -1: every device of the accelerator here",
             at_least(1))
        .add("precision", &RuntimeOptions::precision,
             "numeric precision, Lightning's names (16, bf16 and 32 as Lightning reads them)",
             Rule{})
        .add("threads", &RuntimeOptions::threads,
             "intra-op CPU threads per rank; 0 = one per CPU this process may use, shared among "
             "the run's ranks on the node (the same figures run after run); idle = one per such "
             "CPU idle when the run starts (faster on a busy machine; figures may then differ)")
        .add("matmul_precision", &RuntimeOptions::matmul_precision,
             "float32 matrix products: highest (full fp32), high (TF32 on GPUs that have it), "
             "medium",
             one_of({"highest", "high", "medium"}))
        .add("data_workers", &RuntimeOptions::data_workers,
             "threads building batches in the background; 0 = in the training loop", at_least(0))
        .add("prefetch", &RuntimeOptions::prefetch, "batches built ahead of the training loop",
             at_least(1))
        .add("timeout_s", &RuntimeOptions::timeout_s,
             "seconds a rendezvous or collective between ranks may take before the run fails",
             at_least(1))
        .add("compile", &RuntimeOptions::compile,
             "none, or cuda-graphs: the whole training step captured once into a CUDA graph and "
             "replayed")
        .add("sync_debug", &RuntimeOptions::sync_debug,
             "CUDA: warn about, or fail the run on, any host synchronisation inside a training "
             "step (as "
             "torch.cuda.set_sync_debug_mode); logging reads at train.log_every are allowed")
        .add("loggers", &RuntimeOptions::loggers,
             "where the figures also go while the run trains: tensorboard (event files under "
             "tensorboard/ beside the database), mlflow (the tracking server at "
             "MLFLOW_TRACKING_URI); the database has them either way",
             one_of({"tensorboard", "mlflow"}))
        .check([](const RuntimeOptions& o) -> std::optional<std::string> {
          if (!o.threads.valid())
            return fmt::format(
                "threads {} is not a number of threads: write a count ≥ 1, 0 (every "
                "usable CPU, the default) or idle",
                o.threads.count);
          return std::nullopt;
        });
    return s;
  }();
  return set;
}

bool decode_value(const YAML::Node& node, MicroBatchSize& out, std::string& expected) {
  if (!decode_value(node, out.written, expected)) {
    expected = "a number of samples, auto, or nothing";
    return false;
  }
  out.automatic = out.written == "auto";
  out.samples = 0;
  if (out.written.empty() || out.automatic) return true;
  int64_t samples = 0;
  const char* end = out.written.data() + out.written.size();
  const auto [at, error] = std::from_chars(out.written.data(), end, samples);
  out.samples = error == std::errc() && at == end && samples >= 1 ? samples : -1;  // -1: invalid
  return true;
}

YAML::Node encode_value(const MicroBatchSize& value) { return encode_value(value.written); }

bool decode_value(const YAML::Node& node, ThreadCount& out, std::string& expected) {
  out = ThreadCount{};
  if (node.IsScalar() && node.Scalar() == "idle") {
    out.idle = true;
    return true;
  }
  if (!decode_value(node, out.count, expected)) {
    expected = "a number of threads, 0 (every usable CPU), or idle";
    return false;
  }
  return true;
}

// 0 stays 0: the default's text, and so the identity of the runs recorded before `idle` existed.
YAML::Node encode_value(const ThreadCount& value) {
  return value.idle ? encode_value(std::string("idle")) : encode_value(value.count);
}

namespace {

// `resolved` without the keys that change how a run is looked after but not what it computes.
ConfigTree without_care_keys(const ConfigTree& resolved) {
  ConfigTree identity = resolved;
  for (const char* key :
       {"train.checkpoint_every_steps", "train.checkpoint_every_minutes", "runtime.loggers"})
    identity.erase(key);
  // Whole batches are what a config without the option did (older runs).
  const ConfigValue* micro = resolved.find("train.micro_batch_size");
  if (micro && micro->node.as<std::string>("") == "") identity.erase("train.micro_batch_size");
  // Validation at epochs' ends only is what a config without the option did (older runs).
  const ConfigValue* val_every = resolved.find("train.val_every_steps");
  if (val_every && val_every->node.as<int64_t>() == 0) identity.erase("train.val_every_steps");
  // Early stopping off computes what a config without the option did (older databases' runs).
  const ConfigValue* patience = resolved.find("train.early_stop.patience");
  if (!patience || patience->node.as<int64_t>() == 0) identity.erase("train.early_stop");
  // With train.checkpoint: last nothing is monitored. (Runs recorded before train.monitor kept
  // the best val_acc epoch and the earlier one on a tie, which no setting does now: they are no
  // configuration's.)
  const ConfigValue* checkpoint = resolved.find("train.checkpoint");
  if (checkpoint && checkpoint->node.as<std::string>("") == "last") identity.erase("train.monitor");
  // The tokenizer a `tokens` dataset names only decodes samples: the same training without it.
  const ConfigValue* dataset = resolved.find("dataset.name");
  if (dataset && dataset->node.as<std::string>("") == "tokens") identity.erase("dataset.tokenizer");
  return identity;
}

}  // namespace

std::string run_identity_hash(const ConfigTree& resolved) {
  ConfigTree identity = without_care_keys(resolved);
  if (const ConfigValue* fingerprints = resolved.find("fingerprints"))
    for (const auto& item : fingerprints->node) identity.erase(item["key"].as<std::string>(""));
  if (const ConfigValue* plugins = resolved.find("plugins")) {
    YAML::Node hashes(YAML::NodeType::Sequence);
    for (const auto& item : plugins->node) hashes.push_back(item["sha256"].as<std::string>(""));
    identity.set("plugins", {hashes, plugins->origin, plugins->origin});
  }
  return stable_hash(identity.to_yaml_text());
}

std::string legacy_identity_hash(const ConfigTree& resolved) {
  ConfigTree identity = without_care_keys(resolved);
  identity.erase("fingerprints");
  return stable_hash(identity.to_yaml_text());
}

}  // namespace trainyard
