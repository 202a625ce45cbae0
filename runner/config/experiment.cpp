#include "runner/config/experiment.h"

#include <filesystem>
#include <fstream>
#include <map>
#include <set>

#include <fmt/format.h>

#include "common/metrics.h"
#include "common/text.h"

namespace trainyard {

namespace fs = std::filesystem;

const OptionSet<WeightsOptions>& weights_option_set() {
  static const OptionSet<WeightsOptions> set = [] {
    OptionSet<WeightsOptions> s;
    s.add("weights", &WeightsOptions::weights,
          "safetensors file to initialise the model from; empty = random initialisation")
        .add("strict", &WeightsOptions::strict,
             "fail when checkpoint and model do not match (besides the classification head)");
    return s;
  }();
  return set;
}

const OptionSet<TrainOptions>& train_option_set() {
  static const OptionSet<TrainOptions> set = [] {
    OptionSet<TrainOptions> s;
    s.add("epochs", &TrainOptions::epochs, "passes over the training split", at_least(1))
        .add("batch_size", &TrainOptions::batch_size, "samples per device per micro-batch", at_least(1))
        .add("eval_batch_size", &TrainOptions::eval_batch_size,
             "batch size for validation and test; 0 = batch_size", at_least(0))
        .add("seed", &TrainOptions::seed, "seed for initialisation, shuffling and dropout", at_least(0))
        .add("grad_accum", &TrainOptions::grad_accum, "micro-batches accumulated per optimizer step",
             at_least(1))
        .add("clip_grad_norm", &TrainOptions::clip_grad_norm,
             "clip the global gradient norm to this value; 0 = off", at_least(0))
        .add("checkpoint", &TrainOptions::checkpoint,
             "weights used for the test: the best validation epoch's, or the last epoch's",
             one_of({"best", "last"}))
        .add("log_every", &TrainOptions::log_every, "optimizer steps between progress lines",
             at_least(1))
        .add("limit_train_batches", &TrainOptions::limit_train_batches,
             "train on at most this many batches per epoch; 0 = all", at_least(0))
        .add("limit_eval_batches", &TrainOptions::limit_eval_batches,
             "evaluate at most this many batches of validation and test; 0 = all", at_least(0))
        .add("save_weights", &TrainOptions::save_weights,
             "write the tested weights (safetensors, loadable by model.weights) beside the run's log")
        .add("save_state", &TrainOptions::save_state,
             "after every epoch, write the whole training state (weights, optimizer, counters) to a folder "
             "beside the run's log, resumable under any strategy and world size")
        .add("resume_from", &TrainOptions::resume_from,
             "a training-state folder (train.save_state) to continue from; its epochs count toward train.epochs");
    return s;
  }();
  return set;
}

const OptionSet<RuntimeOptions>& runtime_option_set() {
  static const OptionSet<RuntimeOptions> set = [] {
    OptionSet<RuntimeOptions> s;
    s.add("accelerator", &RuntimeOptions::accelerator,
          "where to train: cpu, cuda, or auto (cuda when a GPU is present)",
          one_of({"cpu", "cuda", "auto"}))
        .add("devices", &RuntimeOptions::devices, "devices (processes) per node", at_least(1))
        .add("precision", &RuntimeOptions::precision, "numeric precision, Lightning's names",
             Rule{})
        .add("threads", &RuntimeOptions::threads, "intra-op CPU threads; 0 = LibTorch's default",
             at_least(0))
        .add("matmul_precision", &RuntimeOptions::matmul_precision,
             "float32 matrix products: highest (full fp32), high (TF32 on GPUs that have it), medium",
             one_of({"highest", "high", "medium"}))
        .add("data_workers", &RuntimeOptions::data_workers,
             "threads building batches in the background; 0 = in the training loop", at_least(0))
        .add("prefetch", &RuntimeOptions::prefetch, "batches built ahead of the training loop", at_least(1))
        .add("timeout_s", &RuntimeOptions::timeout_s,
             "seconds a rendezvous or collective between ranks may take before the run fails", at_least(1))
        .add("compile", &RuntimeOptions::compile,
             "none, or cuda-graphs: the whole training step captured once into a CUDA graph and replayed",
             one_of({"none", "cuda-graphs"}))
        .add("sync_debug", &RuntimeOptions::sync_debug,
             "CUDA: warn about, or fail the run on, any host synchronisation inside a training step (as "
             "torch.cuda.set_sync_debug_mode); logging reads at train.log_every are allowed",
             one_of({"off", "warn", "error"}));
    return s;
  }();
  return set;
}

const OptionSet<ReportOptions>& report_option_set() {
  static const OptionSet<ReportOptions> set = [] {
    OptionSet<ReportOptions> s;
    std::vector<std::string> metrics = metric_keys(MetricScope::final);
    for (const auto& key : metric_keys(MetricScope::derived)) metrics.push_back(key);
    s.add("title", &ReportOptions::title, "heading of the experiment's section in reports")
        .add("baseline", &ReportOptions::baseline,
             "variant that speedups are relative to; empty = the first variant")
        .add("metrics", &ReportOptions::metrics, "columns of the results table", one_of(metrics));
    return s;
  }();
  return set;
}

namespace {

// Keys allowed at the top of an experiment file.
const std::vector<std::string> kTopLevelKeys = {"extends", "name",    "description", "model",
                                                "dataset", "train",   "runtime",     "sweep",
                                                "report"};
// What a sweep may vary: a run's settings. (A variant setting sweep or report gets its own message.)
const std::vector<std::string> kRunSections = {"model", "dataset", "train", "runtime"};
const std::vector<std::string> kVariantKeys = {"model", "dataset", "train", "runtime", "sweep", "report"};

// Component sections: the path of the section and its kind, and the name used when absent.
struct ComponentSection {
  const char* path;
  ComponentKind kind;
  const char* default_name;          // nullptr: required
  std::vector<std::string> reserved;  // keys of the section that are not the component's own
};
const ComponentSection kComponentSections[] = {
    {"model", ComponentKind::model, nullptr, {"weights", "strict"}},
    {"dataset", ComponentKind::dataset, nullptr, {}},
    {"train.optimizer", ComponentKind::optimizer, "adam", {}},
    {"train.scheduler", ComponentKind::scheduler, "none", {}},
    {"runtime.strategy", ComponentKind::strategy, "single", {}},
};

// `model: vit` is shorthand for `model: {name: vit}`.
void expand_component_shorthand(ConfigTree& tree) {
  for (const auto& section : kComponentSections) {
    const ConfigValue* value = tree.find(section.path);
    if (value && value->node.IsScalar()) {
      ConfigValue copy = *value;
      tree.set(std::string(section.path) + ".name", copy);
    }
  }
}

Origin file_origin(const std::string& file) { return {file, 0, 0}; }

// Sets every entry of `over` on `base`. A layer that names a different component for a section
// replaces that section whole, as a Hydra config group does: the old component's options would
// be unknown keys for the new one.
void merge_layer(ConfigTree& base, const ConfigTree& over) {
  for (const auto& section : kComponentSections) {
    std::string name_key = std::string(section.path) + ".name";
    const ConfigValue* new_name = over.find(name_key);
    const ConfigValue* old_name = base.find(name_key);
    if (new_name && old_name && new_name->node.IsScalar() && old_name->node.IsScalar() &&
        new_name->node.Scalar() != old_name->node.Scalar())
      base.erase(section.path);
  }
  base.merge(over);
}

// Reads one file and, recursively, the files it extends. `chain` holds the files being read, to
// catch cycles. Problems go to `diagnostics`; the returned tree holds what could be read.
ConfigTree read_config_file(const std::string& file, const Origin& referenced_at,
                            std::vector<std::string>& chain, Diagnostics& diagnostics) {
  ConfigTree tree;
  std::error_code ec;
  fs::path path(file);
  if (!fs::exists(path, ec)) {
    diagnostics.error(referenced_at, fmt::format("cannot read '{}': no such file", file));
    return tree;
  }
  std::ifstream in(file);
  if (!in || fs::is_directory(path, ec)) {
    diagnostics.error(referenced_at, fmt::format("cannot read '{}': not a readable file", file));
    return tree;
  }
  std::string canonical = fs::weakly_canonical(path, ec).string();
  for (const auto& seen : chain) {
    if (seen == canonical) {
      diagnostics.error(referenced_at,
                        fmt::format("'extends' forms a cycle: {} -> {}", join(chain, " -> "), file));
      return tree;
    }
  }
  YAML::Node root;
  try {
    root = YAML::Load(in);
  } catch (const YAML::ParserException& e) {
    diagnostics.error({file, e.mark.line + 1, e.mark.column + 1},
                      "YAML syntax error: " + e.msg);
    return tree;
  }
  if (root.IsNull()) return tree;  // an empty file is an empty config
  if (!root.IsMap()) {
    diagnostics.error(origin_of(root, file),
                      "an experiment file must be a mapping of sections (model, dataset, ...)");
    return tree;
  }
  chain.push_back(canonical);
  if (const YAML::Node extends = root["extends"]) {
    std::vector<YAML::Node> parents;
    if (extends.IsScalar()) parents.push_back(extends);
    else if (extends.IsSequence()) for (const auto& item : extends) parents.push_back(item);
    else diagnostics.error(origin_of(extends, file), "'extends' must be a file name or a list of them");
    for (const auto& parent : parents) {
      if (!parent.IsScalar()) {
        diagnostics.error(origin_of(parent, file), "'extends' entries must be file names");
        continue;
      }
      fs::path parent_path = fs::path(parent.Scalar());
      if (parent_path.is_relative()) parent_path = path.parent_path() / parent_path;
      merge_layer(tree, read_config_file(parent_path.lexically_normal().string(),
                                         origin_of(parent, file), chain, diagnostics));
    }
  }
  chain.pop_back();
  ConfigTree own;
  flatten_into(own, root, file);
  own.erase("extends");
  expand_component_shorthand(own);
  tree.erase("name");  // a name belongs to one file; a child without one takes its own file's
  merge_layer(tree, own);
  return tree;
}

// "train.epochs=1" -> a one-entry tree whose origin is the override itself.
void apply_override(const std::string& text, ConfigTree& tree, Diagnostics& diagnostics) {
  Origin origin{"--set " + text, 0, 0};
  size_t equals = text.find('=');
  if (equals == std::string::npos || equals == 0) {
    diagnostics.error(origin, "an override must look like key=value, e.g. --set train.epochs=1");
    return;
  }
  std::string key = text.substr(0, equals);
  if (key_is_under(key, "sweep") || key == "extends") {
    diagnostics.error(origin, fmt::format("'{}' cannot be overridden from the command line; edit the file", key));
    return;
  }
  YAML::Node value;
  try {
    value = YAML::Load(text.substr(equals + 1));
  } catch (const YAML::ParserException& e) {
    diagnostics.error(origin, "value is not valid YAML: " + e.msg);
    return;
  }
  ConfigTree one;
  if (value.IsMap()) {
    flatten_into(one, value, origin.file, key);
    for (const auto& [k, v] : one.entries()) tree.set(k, {v.node, origin, origin});
  } else {
    one.set(key, {value, origin, origin});
    expand_component_shorthand(one);
    tree.merge(one);
  }
}

struct Variant {
  std::string name;
  ConfigTree overrides;
};

std::string grid_label(const std::string& key) { return split(key, '.').back(); }

// The sweep section: `variants` (named overrides) times every combination of `grid`.
std::vector<Variant> expand_sweep(const ConfigTree& sweep, Diagnostics& diagnostics) {
  report_unknown_keys(sweep, {"variants", "grid"}, "sweep", "section 'sweep'", diagnostics);
  std::vector<Variant> variants;
  std::set<std::string> names;
  if (const ConfigValue* list = sweep.find("variants")) {
    if (!list->node.IsSequence() || list->node.size() == 0) {
      diagnostics.error(list->origin, "'sweep.variants' must be a non-empty list of {name, set}");
    } else {
      for (const auto& item : list->node) {
        Origin origin = origin_of(item, list->origin.file);
        if (!item.IsMap()) {
          diagnostics.error(origin, "each sweep variant must be a mapping with 'name' and 'set'");
          continue;
        }
        Variant variant;
        for (auto it = item.begin(); it != item.end(); ++it) {
          std::string key = it->first.Scalar();
          if (key == "name") {
            variant.name = it->second.IsScalar() ? it->second.Scalar() : "";
          } else if (key == "set") {
            if (it->second.IsMap()) flatten_into(variant.overrides, it->second, list->origin.file);
            else if (!it->second.IsNull())
              diagnostics.error(origin_of(it->second, list->origin.file),
                                "'set' must be a mapping of dotted keys to values");
          } else if (key != "description") {
            std::string guess = closest_match(key, {"name", "set", "description"});
            diagnostics.error(origin_of(it->first, list->origin.file),
                              fmt::format("unknown key '{}' in a sweep variant{}", key,
                                          guess.empty() ? "; expected name, set, description"
                                                        : " (did you mean '" + guess + "'?)"));
          }
        }
        if (variant.name.empty()) {
          diagnostics.error(origin, "sweep variant without a 'name'");
          continue;
        }
        if (!names.insert(variant.name).second)
          diagnostics.error(origin, fmt::format("duplicate sweep variant name '{}'", variant.name));
        expand_component_shorthand(variant.overrides);
        report_unknown_keys(variant.overrides, kVariantKeys, "", "a sweep variant's 'set'", diagnostics);
        for (const auto& [key, value] : variant.overrides.entries())
          if (key_is_under(key, "sweep") || key_is_under(key, "report"))
            diagnostics.error(value.key_origin, fmt::format("a variant cannot set '{}'", key));
        variants.push_back(std::move(variant));
      }
    }
  }
  if (variants.empty()) variants.push_back({"", {}});

  ConfigTree grid = sweep.subtree("grid");
  if (const ConfigValue* value = sweep.find("grid"))
    diagnostics.error(value->origin, "'sweep.grid' must map dotted keys to lists of values");
  report_unknown_keys(grid, kRunSections, "", "'sweep.grid' (its keys are a run's settings, e.g. train.batch_size)",
                      diagnostics);
  for (const auto& [key, value] : grid.entries()) {
    if (!value.node.IsSequence() || value.node.size() == 0) {
      diagnostics.error(value.origin,
                        fmt::format("'sweep.grid.{}' must be a non-empty list of values", key));
      continue;
    }
    std::vector<Variant> expanded;
    for (const auto& variant : variants) {
      for (const auto& item : value.node) {
        Variant v = variant;
        std::string label = grid_label(key) + "=" + (item.IsScalar() ? item.Scalar() : yaml_flow_text(item));
        v.name = v.name.empty() ? label : v.name + "/" + label;
        ConfigTree one;
        one.set(key, {item, origin_of(item, value.origin.file), value.key_origin});
        expand_component_shorthand(one);
        v.overrides.merge(one);
        expanded.push_back(std::move(v));
      }
    }
    variants = std::move(expanded);
  }
  for (auto& variant : variants)
    if (variant.name.empty()) variant.name = "default";
  return variants;
}

// Resolves one component section of `tree` into `choice`, adding its options to `resolved`.
void resolve_component(const ConfigTree& tree, const ComponentSection& section,
                       const Registry& registry, const Origin& fallback, ComponentChoice& choice,
                       ConfigTree& resolved, Diagnostics& diagnostics, std::string* planned = nullptr) {
  std::string path = section.path;
  ConfigTree options = tree.subtree(path);
  const ConfigValue* name = tree.find(path + ".name");
  Origin origin = name ? name->origin : fallback;
  if (name == nullptr || !name->node.IsScalar() || name->node.Scalar().empty()) {
    if (section.default_name == nullptr) {
      diagnostics.error(origin, fmt::format("missing required key '{}.name' (known {}s: {})", path,
                                            to_string(section.kind),
                                            join(registry.names(section.kind))));
      return;
    }
    choice.name = section.default_name;
  } else {
    choice.name = name->node.Scalar();
  }
  const ComponentEntry* entry =
      lookup_component(registry, section.kind, choice.name, path + ".name", origin, diagnostics, planned);
  if (entry == nullptr) return;
  choice.options = entry->resolve(options, path, origin, section.reserved, diagnostics);
  resolved.set(path + ".name", {YAML::Node(choice.name), origin, origin});
  for (const auto& [key, value] : choice.options.entries()) resolved.set(path + "." + key, value);
}

// runtime.compile: cuda-graphs captures forward, backward and the optimizer step as one graph: every
// part must run on the device without the host. What cannot is refused here, with the fix.
void check_cuda_graphs(const RunSpec& run, const ConfigTree& tree, const Origin& origin, Diagnostics& diagnostics) {
  auto refuse = [&](const char* key, const std::string& why) {
    const ConfigValue* value = tree.find(key);
    diagnostics.error(value ? value->origin : origin, "runtime.compile: cuda-graphs " + why);
  };
  if (run.runtime.accelerator == "cpu") refuse("runtime.accelerator", "needs runtime.accelerator: cuda (or auto)");
  if (run.strategy.name != "single")
    refuse("runtime.strategy.name", fmt::format("captures one process's step; strategy {} is not captured: use "
                                           "runtime.compile: none with it", run.strategy.name));
  if (run.train.grad_accum != 1) refuse("train.grad_accum", "captures whole optimizer steps: set train.grad_accum: 1");
  const ConfigValue* fused = run.optimizer.options.find("fused");
  if ((run.optimizer.name != "adam" && run.optimizer.name != "adamw") || (fused && !fused->node.as<bool>()))
    refuse("train.optimizer.name", "needs the fused adam or adamw (their steps and learning rate stay on the device)");
}

// Validates one run's tree and fills `run`. Returns the resolved config.
ConfigTree resolve_run(const ConfigTree& tree, const Registry& registry, const std::string& file,
                       RunSpec& run, Diagnostics& diagnostics) {
  ConfigTree resolved;
  Origin fallback = file_origin(file);
  resolve_component(tree, kComponentSections[0], registry, fallback, run.model, resolved, diagnostics);
  ConfigTree model_section = tree.subtree("model");
  ConfigTree weights_section;
  for (const auto& key : kComponentSections[0].reserved)
    if (const ConfigValue* value = model_section.find(key)) weights_section.set(key, *value);
  run.weights = weights_option_set().decode(weights_section, "model", "model", fallback, diagnostics);
  resolved.merge(weights_option_set().encode(run.weights, "model", fallback));
  resolve_component(tree, kComponentSections[1], registry, fallback, run.dataset, resolved, diagnostics);

  ConfigTree train = tree.subtree("train");
  run.train = train_option_set().decode(train, "train", "section 'train'", fallback, diagnostics,
                                        {"optimizer", "scheduler"});
  resolved.merge(train_option_set().encode(run.train, "train", fallback));
  if (!run.train.resume_from.empty() && !run.weights.weights.empty()) {
    const ConfigValue* resume = train.find("resume_from");
    diagnostics.error(resume ? resume->origin : fallback,
                      "train.resume_from and model.weights both say where the weights come from; the training "
                      "state folder holds them: remove model.weights");
  }
  resolve_component(tree, kComponentSections[2], registry, fallback, run.optimizer, resolved, diagnostics);
  resolve_component(tree, kComponentSections[3], registry, fallback, run.scheduler, resolved, diagnostics);

  ConfigTree runtime = tree.subtree("runtime");
  size_t before = diagnostics.size();
  run.runtime = runtime_option_set().decode(runtime, "runtime", "section 'runtime'", fallback, diagnostics,
                                            {"strategy"});
  resolved.merge(runtime_option_set().encode(run.runtime, "runtime", fallback));
  // A precision or strategy that is planned but not built yet is no error: the run is kept and
  // recorded as skipped with the reason, so the reference experiment files validate everywhere.
  std::string precision_later, strategy_later;
  resolve_component(tree, kComponentSections[4], registry, fallback, run.strategy, resolved, diagnostics,
                    &strategy_later);
  if (diagnostics.size() == before) {
    auto origin_for = [&](const char* key) {
      const ConfigValue* v = runtime.find(key);
      return v ? v->origin : fallback;
    };
    lookup_component(registry, ComponentKind::precision, run.runtime.precision, "runtime.precision",
                     origin_for("precision"), diagnostics, &precision_later);
    run.unavailable_reason = !precision_later.empty() ? precision_later : strategy_later;
    // A combination that cannot work: in float16 parameters Adam's default eps (1e-8) rounds to 0,
    // and the first step divides zero by zero.
    const ConfigValue* eps = run.optimizer.options.find("eps");
    double eps_value = 0;
    std::string expected;
    if (run.runtime.precision == "16-true" && eps && decode_value(eps->node, eps_value, expected) && eps_value < 6e-8) {
      const ConfigValue* written = tree.find("train.optimizer.eps");
      diagnostics.error(written ? written->origin : origin_for("precision"),
                        fmt::format("precision 16-true keeps optimizer state in float16, where "
                                    "train.optimizer.eps {} rounds to 0 and {} divides by zero; set "
                                    "train.optimizer.eps: 1.0e-4 or use 16-mixed",
                                    eps_value, run.optimizer.name));
    }
    if (run.runtime.compile == "cuda-graphs") check_cuda_graphs(run, tree, origin_for("compile"), diagnostics);
    if (run.runtime.sync_debug != "off" && run.runtime.accelerator == "cpu")
      diagnostics.error(origin_for("sync_debug"),
                        "runtime.sync_debug checks CUDA's host synchronisations, and runtime.accelerator is cpu; "
                        "set runtime.sync_debug: off or runtime.accelerator: cuda");
    if (run.strategy.name == "single" && run.runtime.devices > 1)
      diagnostics.error(origin_for("devices"),
                        fmt::format("'runtime.devices' is {}, but strategy 'single' trains on one "
                                    "device; set runtime.devices: 1 or a multi-device strategy",
                                    run.runtime.devices));
  }
  return resolved;
}

std::string stem_of(const std::string& file) { return fs::path(file).stem().string(); }

}  // namespace

Experiment load_experiment(const std::string& file, const std::vector<std::string>& overrides,
                           const Registry& registry) {
  Diagnostics diagnostics;
  std::vector<std::string> chain;
  ConfigTree tree = read_config_file(file, file_origin(file), chain, diagnostics);
  diagnostics.throw_if_any();  // unreadable files and syntax errors: nothing more to check

  ConfigTree command_line;
  for (const auto& text : overrides) apply_override(text, command_line, diagnostics);
  merge_layer(tree, command_line);
  report_unknown_keys(tree, kTopLevelKeys, "", "an experiment", diagnostics);

  Experiment experiment;
  experiment.file = file;
  experiment.name = stem_of(file);
  for (const char* key : {"name", "description"}) {
    if (const ConfigValue* value = tree.find(key)) {
      std::string expected, text;
      if (!decode_value(value->node, text, expected) || text.empty())
        diagnostics.error(value->origin, fmt::format("'{}' must be a non-empty string", key));
      else (std::string(key) == "name" ? experiment.name : experiment.description) = text;
    }
  }
  experiment.report = report_option_set().decode(tree.subtree("report"), "report",
                                                 "section 'report'", file_origin(file), diagnostics);

  ConfigTree base;
  for (const auto& [key, value] : tree.entries())
    if (!key_is_under(key, "sweep") && !key_is_under(key, "report") && key != "name" &&
        key != "description")
      base.set(key, value);

  std::vector<Variant> variants = expand_sweep(tree.subtree("sweep"), diagnostics);
  for (const auto& variant : variants) {
    ConfigTree run_tree = base;
    merge_layer(run_tree, variant.overrides);
    merge_layer(run_tree, command_line);  // the command line wins over every variant
    RunSpec run;
    run.variant = variant.name;
    ConfigTree resolved = resolve_run(run_tree, registry, file, run, diagnostics);
    run.config_yaml = resolved.to_yaml_text();
    run.config_hash = stable_hash(run.config_yaml);
    experiment.runs.push_back(std::move(run));
  }

  const std::string& baseline = experiment.report.baseline;
  if (!baseline.empty()) {
    bool found = false;
    std::vector<std::string> names;
    for (const auto& run : experiment.runs) {
      found = found || run.variant == baseline;
      names.push_back(run.variant);
    }
    if (!found) {
      const ConfigValue* value = tree.find("report.baseline");
      std::string guess = closest_match(baseline, names);
      diagnostics.error(value ? value->origin : file_origin(file),
                        fmt::format("'report.baseline' names no variant: '{}'{}; variants: {}",
                                    baseline, guess.empty() ? "" : " (did you mean '" + guess + "'?)",
                                    join(names)));
    }
  }
  diagnostics.throw_if_any();
  return experiment;
}

RunSpec parse_resolved_run(const std::string& config_yaml, const std::string& variant,
                           const Registry& registry) {
  Diagnostics diagnostics;
  ConfigTree tree;
  try {
    YAML::Node root = YAML::Load(config_yaml);
    if (root.IsMap()) flatten_into(tree, root, "<resolved config>");
  } catch (const YAML::ParserException& e) {
    diagnostics.error({"<resolved config>", e.mark.line + 1, e.mark.column + 1}, e.msg);
  }
  diagnostics.throw_if_any();
  RunSpec run;
  run.variant = variant;
  ConfigTree resolved = resolve_run(tree, registry, "<resolved config>", run, diagnostics);
  diagnostics.throw_if_any();
  run.config_yaml = resolved.to_yaml_text();
  run.config_hash = stable_hash(run.config_yaml);
  return run;
}

}  // namespace trainyard
