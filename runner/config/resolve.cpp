#include "runner/config/resolve.h"

#include <algorithm>
#include <filesystem>
#include <optional>

#include <fmt/format.h>

#include "common/text.h"
#include "components/weights/safetensors.h"
#include "runner/config/layering.h"
#include "runner/config/lightning_names.h"

namespace trainyard {

namespace fs = std::filesystem;

namespace {

// The options of `infos` that name data (names_data), with the non-empty paths `resolved` gives
// them under `prefix`, for the run's identity.
void collect_data_paths(const std::vector<OptionInfo>& infos, const std::string& prefix,
                        const ConfigTree& resolved, RunSpec& run) {
  for (const auto& info : infos) {
    if (!info.names_data) continue;
    const std::string key = prefix + "." + info.key;
    const ConfigValue* value = resolved.find(key);
    if (value && value->node.IsScalar() && !value->node.Scalar().empty())
      run.data_paths.emplace_back(key, value->node.Scalar());
  }
}

// For a relative path that is not there: where it was looked for — the folder trainyard runs in,
// not the experiment file's — and, when the file's folder has it, how to reach it from here.
std::string relative_path_hint(const ConfigValue& written) {
  if (!written.node.IsScalar()) return "";
  const fs::path path(written.node.Scalar());
  std::error_code ec;
  if (path.empty() || path.is_absolute() || fs::exists(path, ec)) return "";
  std::string hint =
      fmt::format(" (a relative path is found from the folder trainyard runs in, {})",
                  fs::current_path(ec).string());
  if (written.origin.line > 0)  // written in a file: is it beside that file?
    if (const fs::path beside = fs::path(written.origin.file).parent_path() / path;
        fs::exists(beside, ec))
      hint += fmt::format("; the experiment file's folder has it: write '{}'",
                          fs::absolute(beside, ec).lexically_normal().string());
  return hint;
}

// The problems with the files a component's options name (a model's or a dataset's), as errors
// where the option is written; a path's (an option that names data) says where it was looked for.
void report_file_problems(const FileChecks& files, const ComponentEntry& entry,
                          const ConfigTree& tree, const std::string& path, const Origin& origin,
                          Diagnostics& diagnostics) {
  for (const auto& [key, problem] : files.problems) {
    const ConfigValue* written = tree.find(path + "." + key);
    const std::string& option = key;  // clang 14 (the fuzzing build) captures no binding
    const bool names_data =
        std::any_of(entry.options.begin(), entry.options.end(),
                    [&](const OptionInfo& info) { return info.key == option && info.names_data; });
    diagnostics.error(written ? written->origin : origin,
                      written && names_data ? problem + relative_path_hint(*written) : problem);
  }
}

// Resolves one component section of `tree` into `choice`, adding its options to `resolved`.
// Options carried over from another component (merge_layer): those `entry` declares are kept and
// those it does not are dropped from `options`, each with a note that names it, its value and
// where it was written.
void drop_carried_options(const ComponentEntry& entry, const std::string& path,
                          const std::vector<std::string>& reserved, const std::string& variant,
                          const CarriedOptions* carried, ConfigTree& options,
                          std::vector<std::string>* notes) {
  if (carried == nullptr) return;
  // The section's own keys (model.weights) belonged to the component they were written with: a
  // checkpoint of one model fits no other.
  auto reserved_key = [&](const std::string& key) {
    return std::any_of(reserved.begin(), reserved.end(), [&](const std::string& name) {
      return key == name || key.starts_with(name + ".");
    });
  };
  auto declared = [&](const std::string& key) {
    for (const auto& info : entry.options)
      if (key == info.key || key.starts_with(info.key + ".")) return true;
    return false;
  };
  std::vector<std::string> dropped;
  for (const auto& [key, value] : options.entries()) {
    const auto from = carried->find(path + "." + key);
    if (from == carried->end()) continue;
    if (declared(key) && !reserved_key(key)) {
      if (notes)
        notes->push_back(
            fmt::format("variant '{}': {}.{}: {} (written for {} at {}) is kept: {} "
                        "'{}' declares it",
                        variant, path, key, YAML::Dump(value.node), from->second,
                        to_string(value.origin), to_string(entry.kind), entry.name));
      continue;
    }
    dropped.push_back(key);
    if (notes)
      notes->push_back(fmt::format(
          "variant '{}': {}.{}: {} (written for {} at {}) is dropped: {}", variant, path, key,
          YAML::Dump(value.node), from->second, to_string(value.origin),
          reserved_key(key)
              ? fmt::format("it belonged to {}, not {}", from->second, entry.name)
              : fmt::format("{} '{}' has no option '{}'", to_string(entry.kind), entry.name, key)));
  }
  for (const auto& key : dropped) options.erase(key);
}

template <class Caps>
void resolve_component(const ConfigTree& tree, const ComponentSection& section,
                       const Registry& registry, const Origin& fallback, Chosen<Caps>& choice,
                       ConfigTree& resolved, RunSpec& run, Diagnostics& diagnostics,
                       std::vector<std::string>* notes, const CarriedOptions* carried) {
  std::string path = section.path;
  ConfigTree options = tree.subtree(path);
  const ConfigValue* name = tree.find(path + ".name");
  Origin origin = name ? name->origin : fallback;
  if (name == nullptr || !name->node.IsScalar() || name->node.Scalar().empty()) {
    if (section.default_name == nullptr) {
      diagnostics.error(origin,
                        fmt::format("missing required key '{}.name' (known {}s: {})", path,
                                    to_string(section.kind), join(registry.names(section.kind))));
      return;
    }
    choice.name = section.default_name;
  } else {
    choice.name = name->node.Scalar();
  }
  if (!registry.find(section.kind, choice.name)) {  // another tool's name: say which is ours
    const std::string hint = lightning_component_hint(section.kind, choice.name);
    if (!hint.empty()) {
      diagnostics.error(origin, fmt::format("'{}.name': unknown {} '{}' (did you mean {}); "
                                            "known: {}",
                                            path, to_string(section.kind), choice.name, hint,
                                            join(registry.names(section.kind))));
      return;
    }
  }
  const ComponentEntry* entry =
      lookup_component(registry, section.kind, choice.name, path + ".name", origin, diagnostics);
  if (entry == nullptr) return;
  drop_carried_options(*entry, path, section.reserved, run.variant, carried, options, notes);
  const size_t before = diagnostics.size();
  choice.options = entry->resolve(options, path, origin, section.reserved, diagnostics);
  if (diagnostics.size() == before) {
    choice.capabilities = std::get<Caps>(entry->capabilities(choice.options));
    // Files the options name that are missing or incomplete: known now, not one failed run later.
    if constexpr (requires { choice.capabilities.files; })
      report_file_problems(choice.capabilities.files, *entry, tree, path, origin, diagnostics);
  }
  resolved.set(path + ".name", {YAML::Node(choice.name), origin, origin});
  for (const auto& [key, value] : choice.options.entries()) resolved.set(path + "." + key, value);
  collect_data_paths(entry->options, path, resolved, run);
}

// Where `key` was written, or `fallback` when nobody wrote it.
Origin origin_of_key(const ConfigTree& tree, const char* key, const Origin& fallback) {
  const ConfigValue* value = tree.find(key);
  return value ? value->origin : fallback;
}

// runtime.compile: cuda-graphs captures forward, backward and the optimizer step as one graph:
// every part must run on the device without the host. What cannot is refused here, with the fix.
void check_cuda_graphs(const RunSpec& run, const ConfigTree& tree, const Origin& fallback,
                       bool optimizer_ok, Diagnostics& diagnostics) {
  auto refuse = [&](const char* key, const std::string& why) {
    diagnostics.error(origin_of_key(tree, key, fallback), "runtime.compile: cuda-graphs " + why);
  };
  if (run.runtime.accelerator == Accelerator::cpu)
    refuse("runtime.accelerator", "needs runtime.accelerator: cuda (or auto)");
  if (run.strategy.capabilities.multi_process)
    refuse("runtime.strategy.name",
           fmt::format("captures one process's step; strategy {} is not captured: use "
                       "runtime.compile: none with it",
                       run.strategy.name));
  if (run.train.grad_accum != 1)
    refuse("train.grad_accum", "captures whole optimizer steps: set train.grad_accum: 1");
  if (optimizer_ok && !run.optimizer.capabilities.steps_on_device)
    refuse("train.optimizer.name",
           "needs the fused adam or adamw (their steps and learning rate stay on the device)");
  // Captured at one batch's shape after warm-up steps at others, the graph would replay few
  // steps, and its memory would be planned for one length.
  if (!run.model.capabilities.cuda_graphs_refusal.empty())
    refuse("model.name", run.model.capabilities.cuda_graphs_refusal);
  if (run.dataset.capabilities.varying_shapes)
    refuse("dataset.padding",
           fmt::format("captures one batch shape; dataset {} pads each batch to its longest "
                       "sequence (padding: dynamic): set dataset.padding: max_length",
                       run.dataset.name));
}

// What is wrong with `key` naming `monitor` (val_acc, val_f1) in `run`, when its model's task has
// no accuracy (nor classes to take an F1 of).
std::optional<std::string> without_accuracy(const RunSpec& run, const char* key,
                                            WatchedMetric monitor) {
  const TaskTraits& task = traits(run.model.capabilities.task);
  if (monitor == WatchedMetric::val_loss || task.has_accuracy) return std::nullopt;
  return fmt::format("'{}' {}: model {} is {}, which has no {}; use val_loss", key,
                     option_word(monitor), run.model.name, task.a_one,
                     monitor == WatchedMetric::val_f1 ? "classes to take an F1 of" : "accuracy");
}

// The model against its dataset and weights, as far as they are known without building them.
void check_model_against_data(const RunSpec& run, const ConfigTree& tree, const Origin& fallback,
                              Diagnostics& diagnostics) {
  const ModelCapabilities& model = run.model.capabilities;
  const DatasetCapabilities& data = run.dataset.capabilities;
  if (model.num_classes > 0 && data.num_classes > 0 && model.num_classes != data.num_classes) {
    // A head the options do not set is the model's file's (a TorchScript module's): only
    // exporting the model again changes it.
    const ConfigValue* set = run.model.options.find("num_classes");
    const bool file_head = !set || set->node.Scalar() == "0";
    diagnostics.error(
        origin_of_key(tree, file_head ? "model.name" : "model.num_classes", fallback),
        file_head
            ? fmt::format("model {} returns {} logits per sample (the head of its file) but "
                          "dataset {} has {} classes; re-export the model with a head of {} "
                          "outputs",
                          run.model.name, model.num_classes, run.dataset.name, data.num_classes,
                          data.num_classes)
            : fmt::format("model.num_classes is {} but dataset {} has {} classes; set "
                          "model.num_classes: {}",
                          model.num_classes, run.dataset.name, data.num_classes, data.num_classes));
  }
  if (model.vocab_size > 0 && data.vocab_size > model.vocab_size)
    diagnostics.error(
        origin_of_key(tree, "model.vocab_size", fallback),
        run.model.options.find("vocab_size")
            ? fmt::format("model.vocab_size is {} but the dataset's vocabulary has {} tokens; "
                          "set model.vocab_size: {}",
                          model.vocab_size, data.vocab_size, data.vocab_size)
            // A model that reads its vocabulary off its weights (a TorchScript module's
            // embedding) has no option to set.
            : fmt::format("model {}'s token embedding has {} rows but the dataset's vocabulary "
                          "has {} tokens; use the model's own vocabulary file, or give it an "
                          "embedding of {} rows",
                          run.model.name, model.vocab_size, data.vocab_size, data.vocab_size));
  // A token dataset's length is its seq_len; a text dataset's, max_length.
  const char* length_key =
      run.dataset.options.find("seq_len") ? "dataset.seq_len" : "dataset.max_length";
  if (const std::string problem =
          sequence_beyond_model(length_key, data.max_length, model.max_positions);
      !problem.empty())
    diagnostics.error(origin_of_key(tree, length_key, fallback), problem);
  // What the model is trained for and what the dataset's batches are for must agree.
  if (model.task != data.task)
    diagnostics.error(
        origin_of_key(tree, "dataset.name", fallback),
        model.task == Task::causal_lm
            ? fmt::format("model {} is a causal language model, but dataset {} yields labelled "
                          "samples for classification; use a token dataset (tokens, or "
                          "synthetic-tokens for a quick run)",
                          run.model.name, run.dataset.name)
            : fmt::format("dataset {} yields token windows for a causal language model, but "
                          "model {} classifies; use model gpt2, or a classification dataset",
                          run.dataset.name, run.model.name));
  // What a run watches must be a figure its task has.
  if (run.train.checkpoint != TestedWeights::last)
    if (auto problem = without_accuracy(run, "train.monitor", run.train.monitor))
      diagnostics.error(origin_of_key(tree, "train.monitor", fallback), *problem);
  if (run.train.early_stop_patience > 0)
    if (auto problem =
            without_accuracy(run, "train.early_stop.metric", run.train.early_stop_metric))
      diagnostics.error(origin_of_key(tree, "train.early_stop.metric", fallback), *problem);
  std::error_code ec;
  const std::string& weights = run.weights.weights;
  if (weights.empty()) return;
  if (!std::filesystem::is_regular_file(weights, ec)) {
    diagnostics.error(
        origin_of_key(tree, "model.weights", fallback),
        fmt::format("model.weights: no such file '{}'; name a safetensors file (docs/data.md), "
                    "or remove the key for random initialisation",
                    weights));
    return;
  }
  // Its header, read now (memory-mapped: the tensors are not read): a truncated file, another
  // format or a PyTorch .bin is refused here with the loader's own message, not by a worker.
  try {
    SafetensorsFile file(weights);
  } catch (const UserError& e) {
    diagnostics.error(origin_of_key(tree, "model.weights", fallback),
                      fmt::format("model.weights: {}", e.what()));
  }
}

// The rules that span sections: combinations that cannot work, refused with the fix. `runtime_ok`:
// the runtime section (precision, strategy, ...) resolved without a problem, so its rules can be
// checked; `optimizer_ok`: the optimizer's did, so its capabilities are known.
void check_combinations(const RunSpec& run, const ConfigTree& tree, const Origin& fallback,
                        bool runtime_ok, bool optimizer_ok, Diagnostics& diagnostics) {
  if (run.train.epochs == 0 && run.train.resume_from.empty() && run.weights.weights.empty())
    diagnostics.error(origin_of_key(tree, "train.epochs", fallback),
                      "train.epochs: 0 tests given weights without training; set model.weights (or "
                      "train.resume_from) to the weights to test, or train.epochs: 1 or more");
  if (!run.train.resume_from.empty() && !run.weights.weights.empty())
    diagnostics.error(
        origin_of_key(tree, "train.resume_from", fallback),
        "train.resume_from and model.weights both say where the weights come from; the training "
        "state folder holds them: remove model.weights");
  check_model_against_data(run, tree, fallback, diagnostics);
  // Found here, a wrong folder fails no run: the engine reads what is in it when the run starts.
  std::error_code ec;
  if (!run.train.resume_from.empty() && !std::filesystem::is_directory(run.train.resume_from, ec))
    diagnostics.error(origin_of_key(tree, "train.resume_from", fallback),
                      fmt::format("train.resume_from: no such folder '{}'; name a training-state "
                                  "folder that train.save_state wrote (<run>.state beside the "
                                  "run's log), or remove the key",
                                  run.train.resume_from));
  if (!runtime_ok) return;
  // In float16 parameters Adam's default eps (1e-8) rounds to 0, and the first step divides zero by
  // zero.
  const ConfigValue* eps = run.optimizer.options.find("eps");
  double eps_value = 0;
  std::string expected;
  if (run.precision.float16_state && eps && decode_value(eps->node, eps_value, expected) &&
      eps_value < 6e-8) {
    const ConfigValue* written = tree.find("train.optimizer.eps");
    diagnostics.error(
        written ? written->origin : origin_of_key(tree, "runtime.precision", fallback),
        fmt::format("precision {} keeps optimizer state in float16, where "
                    "train.optimizer.eps {} rounds to 0 and {} divides by zero; set "
                    "train.optimizer.eps: 1.0e-4 or use 16-mixed",
                    run.runtime.precision, eps_value, run.optimizer.name));
  }
  if (run.runtime.compile == Compile::cuda_graphs)
    check_cuda_graphs(run, tree, origin_of_key(tree, "runtime.compile", fallback), optimizer_ok,
                      diagnostics);
  if (run.runtime.sync_debug != SyncDebug::off && run.runtime.accelerator == Accelerator::cpu)
    diagnostics.error(
        origin_of_key(tree, "runtime.sync_debug", fallback),
        "runtime.sync_debug checks CUDA's host synchronisations, and runtime.accelerator is cpu; "
        "set runtime.sync_debug: off or runtime.accelerator: cuda");
  // Without a fused optimizer the loss scaler's overflow flag is read on the host to skip a step
  // (as torch.amp.GradScaler does): one synchronisation per step, which `error` would fail at.
  if (run.runtime.sync_debug == SyncDebug::error && run.precision.loss_scaling && optimizer_ok &&
      !run.optimizer.capabilities.steps_on_device)
    diagnostics.error(
        origin_of_key(tree, "runtime.sync_debug", fallback),
        fmt::format("runtime.sync_debug: error fails at a training step's first host "
                    "synchronisation, and with precision {} optimizer {} reads the loss "
                    "scaler's overflow flag on the host every step (only the fused adam and adamw "
                    "skip an overflowed step on the device); use adam or adamw with fused: true, "
                    "or runtime.sync_debug: warn to see each synchronisation",
                    run.runtime.precision, run.optimizer.name));
  if (run.train.micro_batch_auto() && run.strategy.capabilities.multi_process &&
      !run.strategy.capabilities.agrees_on_micro_batch)
    diagnostics.error(
        origin_of_key(tree, "train.micro_batch_size", fallback),
        fmt::format("'train.micro_batch_size' auto halves the micro-batch when a rank runs out of "
                    "memory, and every rank must agree on it first; under strategy {} a rank "
                    "that runs out mid-forward would leave the others waiting in its parameter "
                    "gathers: use ddp or zero2 with auto, or set a number (micro_batch_size: 8 — "
                    "the step stays the same)",
                    run.strategy.name));
  const int64_t micro = run.train.micro_batch_size.samples;
  if (micro > run.train.batch_size)
    diagnostics.error(origin_of_key(tree, "train.micro_batch_size", fallback),
                      fmt::format("'train.micro_batch_size' {} is more than train.batch_size {}: "
                                  "a micro-batch is part of a batch; lower it or leave it out",
                                  micro, run.train.batch_size));
  if (!run.strategy.capabilities.multi_process && run.runtime.devices > 1)
    diagnostics.error(origin_of_key(tree, "runtime.devices", fallback),
                      fmt::format("'runtime.devices' is {}, but strategy '{}' trains on one "
                                  "device; set runtime.devices: 1 or a multi-device strategy",
                                  run.runtime.devices, run.strategy.name));
}

}  // namespace

ConfigTree resolve_run(const ConfigTree& tree, const Registry& registry, const std::string& file,
                       RunSpec& run, Diagnostics& diagnostics, std::vector<std::string>* notes,
                       const CarriedOptions* carried) {
  const auto& [model, dataset, optimizer, scheduler, strategy] = kComponentSections;
  ConfigTree resolved;
  const Origin fallback = file_origin(file);
  resolve_component(tree, model, registry, fallback, run.model, resolved, run, diagnostics, notes,
                    carried);
  ConfigTree model_section = tree.subtree("model");
  ConfigTree weights_section;
  for (const auto& key : model.reserved)
    if (const ConfigValue* value = model_section.find(key);
        value && !(carried && carried->count("model." + key)))  // another model's: dropped
      weights_section.set(key, *value);
  run.weights =
      weights_option_set().decode(weights_section, "model", "model", fallback, diagnostics);
  run.weights_origin = origin_of_key(tree, "model.weights", fallback);
  resolved.merge(weights_option_set().encode(run.weights, "model", fallback));
  collect_data_paths(weights_option_set().describe(), "model", resolved, run);
  resolve_component(tree, dataset, registry, fallback, run.dataset, resolved, run, diagnostics,
                    notes, carried);
  run.dataset_origin = origin_of_key(tree, "dataset.name", fallback);

  run.train = train_option_set().decode(tree.subtree("train"), "train", "section 'train'", fallback,
                                        diagnostics, {"optimizer", "scheduler"});
  resolved.merge(train_option_set().encode(run.train, "train", fallback));
  const size_t before_optimizer = diagnostics.size();
  resolve_component(tree, optimizer, registry, fallback, run.optimizer, resolved, run, diagnostics,
                    notes, carried);
  // The optimizer's capabilities are known only when its section resolved.
  const bool optimizer_ok = diagnostics.size() == before_optimizer;
  resolve_component(tree, scheduler, registry, fallback, run.scheduler, resolved, run, diagnostics,
                    notes, carried);

  const size_t before_runtime = diagnostics.size();
  run.runtime = runtime_option_set().decode(tree.subtree("runtime"), "runtime", "section 'runtime'",
                                            fallback, diagnostics, {"strategy"});
  resolved.merge(runtime_option_set().encode(run.runtime, "runtime", fallback));
  resolve_component(tree, strategy, registry, fallback, run.strategy, resolved, run, diagnostics,
                    notes, carried);
  const bool runtime_ok = diagnostics.size() == before_runtime;
  if (runtime_ok) {
    const ComponentEntry* precision = lookup_component(
        registry, ComponentKind::precision, run.runtime.precision, "runtime.precision",
        origin_of_key(tree, "runtime.precision", fallback), diagnostics);
    if (precision)
      run.precision = std::get<PrecisionCapabilities>(precision->capabilities(ConfigTree()));
  }
  check_combinations(run, tree, fallback, runtime_ok, optimizer_ok, diagnostics);
  return resolved;
}

}  // namespace trainyard
