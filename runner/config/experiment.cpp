// load_experiment(): the experiment file's layers merged (layering.h), its sweep expanded
// (sweep.h), each variant resolved into its runs or its study (variant_runs.h, over resolve.h),
// and the experiment-wide settings checked.
#include "runner/config/experiment.h"

#include <algorithm>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>

#include <fmt/format.h>

#include "common/fingerprint.h"
#include "common/metrics.h"
#include "common/text.h"
#include "runner/config/layering.h"
#include "runner/config/lightning_names.h"
#include "runner/config/resolve.h"
#include "runner/config/search_space.h"
#include "runner/config/sweep.h"
#include "runner/config/variant_runs.h"

namespace trainyard {

namespace fs = std::filesystem;

namespace {

// Keys allowed at the top of an experiment file.
const std::vector<std::string> kTopLevelKeys = {"extends", "plugins", "name",  "description",
                                                "model",   "dataset", "train", "runtime",
                                                "sweep",   "report"};

std::string stem_of(const std::string& file) { return fs::path(file).stem().string(); }

// What a search asks of the rest of the file: time to the target needs the target (report.target),
// as the verdicts' does; the command line may not fix a setting the search varies.
void check_search(const SearchSettings& search, const ConfigTree& tree,
                  const ConfigTree& command_line, const ReportOptions& report,
                  Diagnostics& diagnostics) {
  if (search.cost == SearchCost::time_to_target && !report.has_target())
    diagnostics.error(tree.find("sweep.search.metric")->origin,
                      "'sweep.search.metric' [..., time_to_target] needs report.target: the "
                      "figure a trial's time is measured to (e.g. report: {target: {metric: "
                      "val_acc, value: 0.8}})");
  for (const auto& parameter : search.space)
    if (const ConfigValue* fixed = searched_key_set_by(command_line, parameter))
      diagnostics.error(fixed->origin,
                        fmt::format("--set {} fixes a setting the search varies "
                                    "(sweep.search.space); leave it to the search, or take it "
                                    "out of the space",
                                    parameter.key));
}

}  // namespace

namespace {

// load_experiment, against `registry`; `loader`, when given, is where plugins load (and
// `registry` is its registry).
Experiment read_experiment(const std::string& file, const std::vector<std::string>& overrides,
                           const Registry& registry, PluginLoader* loader, int64_t max_runs) {
  Diagnostics diagnostics;
  LayeredConfig layered = read_experiment_file(file, diagnostics);
  diagnostics.throw_if_any();  // unreadable files and syntax errors: nothing more to check

  ConfigTree command_line;
  for (const auto& text : overrides) apply_override(text, command_line, diagnostics);
  merge_layer(layered, command_line);
  const ConfigTree& tree = layered.tree;
  // Plugins first: the components they register are what the rest is validated against, so a
  // plugin that did not load would make every name it provides an "unknown" problem too — its
  // problems end the validation there (with the command line's, already found).
  const size_t problems_before_plugins = diagnostics.items().size();
  const std::vector<PluginRef> plugins = load_named_plugins(tree, loader, diagnostics);
  if (diagnostics.items().size() > problems_before_plugins) diagnostics.throw_if_any();
  report_unknown_keys(tree, kTopLevelKeys, "", "an experiment", diagnostics);

  Experiment experiment;
  experiment.file = file;
  experiment.name = stem_of(file);
  for (const char* key : {"name", "description"}) {
    report_mapping_for_value(tree, key, key, "a non-empty string", diagnostics);
    if (const ConfigValue* value = tree.find(key)) {
      std::string expected, text;
      if (!decode_value(value->node, text, expected) || text.empty())
        diagnostics.error(value->origin, fmt::format("'{}' must be a non-empty string", key));
      else
        (std::string(key) == "name" ? experiment.name : experiment.description) = text;
    }
  }
  experiment.report = decode_report_options(tree.subtree("report"), file_origin(file), diagnostics);

  LayeredConfig base = layered;  // the run's sections, with where each of their keys is written
  for (const char* key : {"sweep", "report", "name", "description", "plugins"})
    base.tree.erase(key);

  const SweepOptions sweep = decode_sweep_options(tree.subtree("sweep"), diagnostics);
  const int64_t repeats = sweep.repeats;
  experiment.interleaved = sweep.order == SweepOrder::interleaved;
  std::vector<Variant> variants =
      expand_sweep(tree.subtree("sweep"), diagnostics, max_runs, repeats);
  const std::optional<SearchSettings> search =
      decode_search(tree.subtree("sweep"), variants.size(), max_runs, diagnostics);
  if (search) check_search(*search, tree, command_line, experiment.report, diagnostics);
  VariantProblems variant_problems;
  for (const auto& variant : variants) {
    LayeredConfig run_config = base;
    merge_layer(run_config, variant.overrides);
    merge_layer(run_config, command_line);  // the command line wins over every variant
    if (search) {  // each variant's runs are its study's (experiment.studies)
      experiment.studies.push_back(make_study(variant, run_config, *search, registry, plugins, file,
                                              experiment, variant_problems));
      continue;
    }
    int64_t seed = 0;
    for (int64_t r = 0; r < repeats; ++r) {
      Diagnostics found;
      RunSpec run = resolve_variant_run(run_config, variant.name, r,
                                        r > 0 ? std::optional<int64_t>(seed + r) : std::nullopt,
                                        registry, plugins, file, found, experiment.notes);
      if (r == 0) seed = run.train.seed;  // the variant's own seed, then the next ones
      experiment.runs.push_back(std::move(run));
      if (!found.empty()) {  // the other repeats say the same
        variant_problems.add(found, variant);
        break;
      }
    }
  }
  variant_problems.report(variants.size(), diagnostics);

  // A task without accuracy (nor classes to take an F1 of) has none to reach.
  const std::string& target = experiment.report.target_metric;
  if (experiment.report.has_target() && experiment.report.target() != WatchedMetric::val_loss)
    for (const auto& run : experiment.runs)
      if (const TaskTraits& task = traits(run.model.capabilities.task); !task.has_accuracy) {
        const ConfigValue* value = tree.find("report.target.metric");
        diagnostics.error(
            value ? value->origin : file_origin(file),
            fmt::format("'report.target.metric' {}: variant '{}' trains {} (model {}), which "
                        "has no {}; use val_loss (a perplexity of P is a val_loss of ln P)",
                        target, run.variant, task.a_one, run.model.name,
                        experiment.report.target() == WatchedMetric::val_acc
                            ? "accuracy"
                            : "classes to take an F1 of"));
        break;
      }

  const std::string& baseline = experiment.report.baseline;
  if (!baseline.empty()) {
    bool found = false;
    std::vector<std::string> names;
    for (const auto& run : experiment.runs) {
      found = found || run.variant == baseline;
      names.push_back(run.variant);
    }
    for (const auto& study : experiment.studies) {
      found = found || study.variant == baseline;
      names.push_back(study.variant);
    }
    if (!found) {
      const ConfigValue* value = tree.find("report.baseline");
      std::string guess = closest_match(baseline, names);
      diagnostics.error(
          value ? value->origin : file_origin(file),
          fmt::format("'report.baseline' names no variant: '{}'{}; variants: {}", baseline,
                      guess.empty() ? "" : " (did you mean '" + guess + "'?)", join(names)));
    }
  }
  diagnostics.throw_if_any();
  return experiment;
}

RunSpec read_resolved_run(const std::string& config_yaml, const std::string& variant,
                          const Registry& registry, PluginLoader* loader) {
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
  run.plugins = load_recorded_plugins(tree, loader);
  tree.erase("plugins");
  // The fingerprints it was configured with (not the data's now: a worker does not walk the data).
  const ConfigValue* recorded = tree.find("fingerprints");
  const std::optional<ConfigValue> fingerprints =
      recorded ? std::optional<ConfigValue>(*recorded) : std::nullopt;
  tree.erase("fingerprints");
  ConfigTree resolved =
      with_plugins(run.plugins, resolve_run(tree, registry, "<resolved config>", run, diagnostics),
                   file_origin("<resolved config>"));
  diagnostics.throw_if_any();
  if (fingerprints) resolved.set("fingerprints", *fingerprints);
  run.config_yaml = resolved.to_yaml_text();
  run.config_hash = run_identity_hash(resolved);
  run.legacy_config_hash = legacy_identity_hash(resolved);
  return run;
}

}  // namespace

std::vector<size_t> Experiment::run_order() const {
  std::vector<size_t> order;
  if (!interleaved) {
    for (size_t i = 0; i < runs.size(); ++i) order.push_back(i);
    return order;
  }
  // The variants in the file's order, each with its runs by repeat.
  std::vector<std::vector<size_t>> variants;
  for (size_t i = 0; i < runs.size(); ++i) {
    if (i == 0 || runs[i].variant != runs[i - 1].variant) variants.emplace_back();
    variants.back().push_back(i);
  }
  size_t rounds = 0;
  for (const auto& variant : variants) rounds = std::max(rounds, variant.size());
  for (size_t round = 0; round < rounds; ++round)
    for (size_t k = 0; k < variants.size(); ++k) {
      const auto& variant = variants[(k + round) % variants.size()];
      if (round < variant.size()) order.push_back(variant[round]);
    }
  return order;
}

Experiment load_experiment(const std::string& file, const std::vector<std::string>& overrides,
                           PluginLoader& plugins, int64_t max_runs) {
  return read_experiment(file, overrides, plugins.registry(), &plugins, max_runs);
}

Experiment load_experiment(const std::string& file, const std::vector<std::string>& overrides,
                           const Registry& registry, int64_t max_runs) {
  return read_experiment(file, overrides, registry, nullptr, max_runs);
}

RunSpec parse_resolved_run(const std::string& config_yaml, const std::string& variant,
                           PluginLoader& plugins) {
  return read_resolved_run(config_yaml, variant, plugins.registry(), &plugins);
}

RunSpec parse_resolved_run(const std::string& config_yaml, const std::string& variant,
                           const Registry& registry) {
  return read_resolved_run(config_yaml, variant, registry, nullptr);
}

namespace {

// Problems of several files in one message, each line already saying where and "error:".
class BatchError : public UserError {
 public:
  using UserError::UserError;
  bool labelled() const override { return true; }
};

}  // namespace

namespace {

// load_batch, each file read by `load` (load_experiment with or without plugins).
std::vector<Experiment> read_batch(const std::vector<std::string>& files, int64_t max_runs,
                                   const std::function<Experiment(const std::string&)>& load) {
  std::vector<Experiment> experiments;
  std::vector<std::string> problems;
  std::map<std::string, std::string> file_of_name, seen_files;
  for (const std::string& file : files) {
    const std::string canonical = fs::weakly_canonical(file).string();
    if (auto it = seen_files.find(canonical); it != seen_files.end()) {
      problems.push_back(
          fmt::format("error: {}: named twice in the batch (also as {}); name each "
                      "experiment file once",
                      file, it->second));
      continue;
    }
    seen_files[canonical] = file;
    try {
      Experiment experiment = load(file);
      auto [it, fresh] = file_of_name.emplace(experiment.name, file);
      if (!fresh)
        problems.push_back(fmt::format(
            "error: {}: experiment name '{}' is also {}'s; their runs would mix in one report: "
            "give one of them another `name:`",
            file, experiment.name, it->second));
      experiments.push_back(std::move(experiment));
    } catch (const UserError& e) {
      std::string message = e.what();
      while (!message.empty() && message.back() == '\n') message.pop_back();
      problems.push_back(e.labelled() ? message : "error: " + message);
    }
  }
  size_t total = 0;
  for (const Experiment& experiment : experiments) total += experiment.runs.size();
  if (problems.empty() && total > static_cast<size_t>(max_runs))
    problems.push_back(fmt::format(
        "error: the batch's {} files have {} runs together, more than the limit of {}; run fewer "
        "files at once, or raise the limit with --max-runs N",
        files.size(), total, max_runs));
  if (problems.empty()) return experiments;
  std::string text;
  for (const auto& problem : problems) text += problem + "\n";
  if (files.size() > 1)
    text += fmt::format("nothing was run: every file of a batch must be valid ({} given)\n",
                        files.size());
  throw BatchError(text);
}

}  // namespace

std::vector<Experiment> load_batch(const std::vector<std::string>& files,
                                   const std::vector<std::string>& overrides, PluginLoader& plugins,
                                   int64_t max_runs) {
  return read_batch(files, max_runs, [&](const std::string& file) {
    return load_experiment(file, overrides, plugins, max_runs);
  });
}

std::vector<Experiment> load_batch(const std::vector<std::string>& files,
                                   const std::vector<std::string>& overrides,
                                   const Registry& registry, int64_t max_runs) {
  return read_batch(files, max_runs, [&](const std::string& file) {
    return load_experiment(file, overrides, registry, max_runs);
  });
}

}  // namespace trainyard
