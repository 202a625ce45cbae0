// load_experiment(): the experiment file's layers merged (layering.h), its sweep expanded
// (sweep.h), each variant resolved into a RunSpec (resolve.h), and the experiment-wide settings
// checked.
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

namespace trainyard {

namespace fs = std::filesystem;

namespace {

// Keys allowed at the top of an experiment file.
const std::vector<std::string> kTopLevelKeys = {"extends", "plugins", "name",  "description",
                                                "model",   "dataset", "train", "runtime",
                                                "sweep",   "report"};

std::string stem_of(const std::string& file) { return fs::path(file).stem().string(); }

// The problems found resolving each variant, with the variants each was found in. One of every
// variant, or one written in a variant's own `set`, is said as it is, once: its place says where
// it is. One of only some variants at a shared place (the base sections, --set) says which, or
// "--set train.optimizer.beta9=1" would be reported twice without a word of why (once for the
// variants on adam, once for those on adamw).
class VariantProblems {
 public:
  void add(const Diagnostics& found, const Variant& variant) {
    for (const auto& item : found.items()) {
      auto same = [&](const Problem& p) {
        return p.message == item.message && to_string(p.origin) == to_string(item.origin);
      };
      auto it = std::find_if(problems_.begin(), problems_.end(), same);
      if (it == problems_.end())
        it = problems_.insert(problems_.end(), {item.origin, item.message});
      it->in_own_set = it->in_own_set || written_in(variant.overrides, item.origin);
      if (std::find(it->variants.begin(), it->variants.end(), variant.name) == it->variants.end())
        it->variants.push_back(variant.name);
    }
  }

  void report(size_t variant_count, Diagnostics& diagnostics) const {
    for (const auto& p : problems_) {
      if (p.in_own_set || p.variants.size() == variant_count) {
        diagnostics.error(p.origin, p.message);
        continue;
      }
      const size_t shown = std::min<size_t>(p.variants.size(), 3);
      std::vector<std::string> names;
      for (size_t i = 0; i < shown; ++i) names.push_back("'" + p.variants[i] + "'");
      std::string which = join(names);
      if (p.variants.size() > shown)
        which += fmt::format(" and {} more", p.variants.size() - shown);
      diagnostics.error(p.origin, fmt::format("variant{} {}: {}", p.variants.size() == 1 ? "" : "s",
                                              which, p.message));
    }
  }

 private:
  struct Problem {
    Origin origin;
    std::string message;
    std::vector<std::string> variants{};
    bool in_own_set = false;  // written in a variant's `set`: its place names the variant
  };

  static bool written_in(const ConfigTree& overrides, const Origin& at) {
    auto same_line = [&](const Origin& o) { return o.file == at.file && o.line == at.line; };
    for (const auto& [key, value] : overrides.entries())
      if (same_line(value.origin) || same_line(value.key_origin)) return true;
    return false;
  }

  std::vector<Problem> problems_;
};

// The plugins an experiment names: the command line's (--plugin), then its `plugins:` list, each
// loaded into `loader`. A path written in a file is relative to that file, as `extends:` is; one
// given with --set, to the current folder. Without a loader, naming one is an error.
std::vector<PluginRef> load_named_plugins(const ConfigTree& tree, PluginLoader* loader,
                                          Diagnostics& diagnostics) {
  std::vector<PluginRef> plugins;
  auto add = [&](const PluginRef& plugin) {
    for (const auto& p : plugins)
      if (p.path == plugin.path) return;
    plugins.push_back(plugin);
  };
  if (loader)
    for (const auto& path : loader->command_line_plugins()) add(loader->load(path).ref);
  const ConfigValue* value = tree.find("plugins");
  if (value == nullptr || value->node.IsNull()) return plugins;
  const bool from_file = value->origin.line > 0;
  std::vector<YAML::Node> items;
  if (value->node.IsScalar()) {
    items.push_back(value->node);
  } else if (value->node.IsSequence()) {
    for (const auto& item : value->node) items.push_back(item);
  } else {
    diagnostics.error(value->origin,
                      "'plugins' must be a list of plugin libraries: plugins: [build/libmynet.so]");
    return plugins;
  }
  for (const YAML::Node& item : items) {
    const Origin origin = from_file ? origin_of(item, value->origin.file) : value->origin;
    if (!item.IsScalar() || item.Scalar().empty()) {
      diagnostics.error(origin, "'plugins' entries must be paths to plugin libraries (.so files)");
      continue;
    }
    fs::path path(item.Scalar());
    if (path.is_relative() && from_file) path = fs::path(value->origin.file).parent_path() / path;
    if (loader == nullptr) {
      diagnostics.error(origin, "'plugins': this program loads no plugins (trainyard-engine does)");
      continue;
    }
    try {
      add(loader->load(path.string()).ref);
    } catch (const UserError& e) {
      diagnostics.error(origin, e.what());
    }
  }
  return plugins;
}

// `resolved` with its plugins first, as a run's resolved config records them: each library's
// absolute path and the SHA-256 of its bytes, so a rebuilt plugin is another configuration. A run
// without plugins records nothing (its identity is what it was before plugins existed).
ConfigTree with_plugins(const std::vector<PluginRef>& plugins, const ConfigTree& resolved,
                        const Origin& origin) {
  if (plugins.empty()) return resolved;
  YAML::Node list(YAML::NodeType::Sequence);
  for (const auto& plugin : plugins) {
    YAML::Node entry;
    entry["path"] = plugin.path;
    entry["sha256"] = plugin.sha256;
    list.push_back(entry);
  }
  ConfigTree out;
  out.set("plugins", {list, origin, origin});
  out.merge(resolved);
  return out;
}

// `resolved` with the fingerprints of the data its run names (RunSpec::data_paths), as a run's
// resolved config records them — `fingerprints: [{key: dataset.root, content: "3f2a… (6 files, 178
// MB)"}]` — so that its identity is the data's contents, not their paths. A path that is not there
// is left to the component's own check (it says what the folder must hold); one that cannot be
// read is a problem at the key.
ConfigTree with_fingerprints(const RunSpec& run, const ConfigTree& tree, const ConfigTree& resolved,
                             const std::string& file, Diagnostics& diagnostics) {
  if (run.data_paths.empty()) return resolved;
  YAML::Node list(YAML::NodeType::Sequence);
  for (const auto& [key, path] : run.data_paths) {
    std::error_code ec;
    if (!fs::exists(path, ec)) continue;
    try {
      YAML::Node entry;
      entry["key"] = key;
      entry["content"] = content_fingerprint(path).describe();
      list.push_back(entry);
    } catch (const std::exception& e) {
      const ConfigValue* written = tree.find(key);
      diagnostics.error(written ? written->origin : file_origin(file),
                        fmt::format("'{}': {}", key, e.what()));
    }
  }
  ConfigTree out = resolved;
  if (list.size() > 0) out.set("fingerprints", {list, file_origin(file), file_origin(file)});
  return out;
}

// The plugins a resolved config records, loaded into `loader`, each checked to be the bytes the
// run was configured with.
std::vector<PluginRef> load_recorded_plugins(const ConfigTree& tree, PluginLoader* loader) {
  std::vector<PluginRef> plugins;
  const ConfigValue* value = tree.find("plugins");
  if (value == nullptr) return plugins;
  if (loader == nullptr)
    throw UserError("the run's config names plugins, and this program loads none");
  for (const auto& item : value->node) {
    const PluginRef recorded{item["path"].as<std::string>(""), item["sha256"].as<std::string>("")};
    // The recorded hash is checked before any of the library's code runs.
    const PluginRef& loaded = loader->load(recorded.path, recorded.sha256).ref;
    if (loaded.sha256 != recorded.sha256)  // loaded earlier in this process, as other bytes
      throw UserError(changed_plugin_message(recorded.path, recorded.sha256, loaded.sha256));
    plugins.push_back(loaded);
  }
  return plugins;
}

// A plugin's component is a file's to use only when the file names that plugin: another file of
// the same batch may have loaded it into the one registry, and a run must record (and its workers
// load) every library its components come from.
void check_components_come_from_named_plugins(const RunSpec& run, const ConfigTree& tree,
                                              const Registry& registry,
                                              const std::vector<PluginRef>& plugins,
                                              const std::string& file, Diagnostics& found) {
  const struct {
    ComponentKind kind;
    const char* section;
    const ComponentChoice& choice;
  } used[] = {{ComponentKind::model, "model", run.model},
              {ComponentKind::dataset, "dataset", run.dataset},
              {ComponentKind::optimizer, "train.optimizer", run.optimizer},
              {ComponentKind::scheduler, "train.scheduler", run.scheduler}};
  for (const auto& u : used) {
    const ComponentEntry* entry = registry.find(u.kind, u.choice.name);
    if (entry == nullptr || entry->library.empty()) continue;
    const bool named = std::any_of(plugins.begin(), plugins.end(),
                                   [&](const PluginRef& p) { return p.path == entry->library; });
    if (named) continue;
    const ConfigValue* value = tree.find(std::string(u.section) + ".name");
    found.error(value ? value->origin : file_origin(file),
                fmt::format("{} '{}' comes from plugin '{}', which this experiment does not name; "
                            "add it to the file's plugins: list",
                            to_string(u.kind), u.choice.name, entry->library));
  }
}

}  // namespace

namespace {

// The entry of `layer` that sets the searched `parameter`'s key — or a key inside it when a choice
// is a mapping, which writes the section afresh (a variant's train.optimizer.lr would be lost);
// a choice of names alone keeps what the new component declares. nullptr when none does.
const ConfigValue* searched_key_set_by(const ConfigTree& layer, const SearchParameter& parameter) {
  if (const ConfigValue* value = layer.find(parameter.key)) return value;
  const bool writes_afresh =
      std::any_of(parameter.choices.begin(), parameter.choices.end(),
                  [](const YAML::Node& choice) { return choice.IsMap() && choice.size() > 0; });
  if (!writes_afresh) return nullptr;
  for (const auto& [written, value] : layer.entries())
    if (key_is_under(written, parameter.key)) return &value;
  return nullptr;
}

// One run of a variant: `run_config` (the file's layers, the variant's set, the command line)
// resolved against `registry`, trained with `seed` when given (a repeat's, a confirmation's). What
// is wrong goes to `found`; notes to `notes`, each once.
RunSpec resolve_variant_run(const LayeredConfig& run_config, const std::string& variant,
                            int64_t repeat, std::optional<int64_t> seed, const Registry& registry,
                            const std::vector<PluginRef>& plugins, const std::string& file,
                            Diagnostics& found, std::vector<std::string>& notes_out) {
  RunSpec run;
  run.variant = variant;
  run.repeat = repeat;
  ConfigTree tree = run_config.tree;
  if (seed) tree.set("train.seed", {YAML::Node(*seed), file_origin(file), file_origin(file)});
  std::vector<std::string> notes;
  translate_lightning_names(tree, notes, found);
  ConfigTree resolved = with_plugins(
      plugins, resolve_run(tree, registry, file, run, found, &notes, &run_config.carried),
      file_origin(file));
  for (const FileChecks* files : {&run.model.capabilities.files, &run.dataset.capabilities.files})
    notes.insert(notes.end(), files->notes.begin(), files->notes.end());
  for (const auto& note : notes)
    if (std::find(notes_out.begin(), notes_out.end(), note) == notes_out.end())
      notes_out.push_back(note);
  check_components_come_from_named_plugins(run, tree, registry, plugins, file, found);
  if (found.empty()) resolved = with_fingerprints(run, tree, resolved, file, found);
  run.plugins = plugins;
  run.config_yaml = resolved.to_yaml_text();
  run.config_hash = run_identity_hash(resolved);
  run.legacy_config_hash = legacy_identity_hash(resolved);
  return run;
}

// A variant's study: what resolves its trials and confirmations (the variant's layers with the
// trial's values on top, below the command line), checked now by resolving the variant at every
// edge of the space — each range's ends, every choice — so that a value the space can propose
// and the run's rules refuse is reported at the parameter, before anything runs.
Study make_study(const Variant& variant, const LayeredConfig& run_config,
                 const SearchSettings& search, const Registry& registry,
                 const std::vector<PluginRef>& plugins, const std::string& file,
                 Experiment& experiment, VariantProblems& problems) {
  Study study;
  study.variant = variant.name;
  study.search = search;
  // The trial's values go on top of every layer: the command line may not fix a setting the search
  // varies (read_experiment refuses that).
  study.resolve = [run_config, &registry, plugins, file, space = search.space](
                      const TrialValues& values, const std::string& name, int64_t repeat,
                      std::optional<int64_t> seed, Diagnostics& found,
                      std::vector<std::string>& notes) {
    LayeredConfig layers = run_config;
    merge_layer(layers, LayeredConfig{trial_overrides(space, values), {}});
    return resolve_variant_run(layers, name, repeat, seed, registry, plugins, file, found, notes);
  };
  // A variant that sets a searched key would have it overridden by every trial: said, as --set is.
  for (const auto& parameter : search.space)
    if (const ConfigValue* fixed = searched_key_set_by(variant.overrides, parameter)) {
      Diagnostics found;
      found.error(fixed->origin,
                  fmt::format("variant '{}' sets '{}', which the search varies "
                              "(sweep.search.space); take it out of the variant or the space",
                              variant.name, parameter.key));
      problems.add(found, variant);
    }
  // Every edge of the space: each parameter through its ends (a choice: each value), the others at
  // their lower end; and a range's inside, whose values are not whole numbers (a uniform range
  // over a setting that takes whole numbers is refused here, not in the middle of the night).
  TrialValues lowest;
  for (const auto& parameter : search.space)
    lowest.push_back(parameter.distribution == Distribution::choice ? 0 : parameter.low);
  std::vector<TrialValues> edges = {lowest};
  std::map<size_t, const SearchParameter*> inside_of;  // the edges that probe a range's inside
  for (size_t i = 0; i < search.space.size(); ++i) {
    const SearchParameter& parameter = search.space[i];
    const size_t count =
        parameter.distribution == Distribution::choice ? parameter.choices.size() : 2;
    for (size_t k = 1; k < count; ++k) {
      TrialValues edge = lowest;
      edge[i] =
          parameter.distribution == Distribution::choice ? static_cast<double>(k) : parameter.high;
      edges.push_back(edge);
    }
    if (parameter.distribution == Distribution::uniform ||
        parameter.distribution == Distribution::log_uniform) {
      TrialValues inside = lowest;
      inside[i] = parameter.low + 0.3719 * (parameter.high - parameter.low);
      edges.push_back(inside);
      inside_of[edges.size() - 1] = &parameter;
    }
  }
  for (size_t e = 0; e < edges.size(); ++e) {
    const TrialValues& edge = edges[e];
    Diagnostics found;
    const RunSpec run = study.resolve(edge, variant.name, 0, std::nullopt, found, experiment.notes);
    if (!found.empty() && inside_of.count(e))
      found.error(inside_of[e]->origin,
                  fmt::format("'{}' takes values inside its range that the run refuses; for a "
                              "setting of whole numbers, use {{int_uniform: [low, high]}}",
                              inside_of[e]->key));
    if (search.metric != WatchedMetric::val_loss &&
        !traits(run.model.capabilities.task).has_accuracy)
      found.error(
          file_origin(file),
          fmt::format(
              "'sweep.search.metric' {}: variant '{}' trains {} (model {}), "
              "which has no {}; search by val_loss",
              metric_key(search.metric), variant.name, traits(run.model.capabilities.task).a_one,
              run.model.name,
              search.metric == WatchedMetric::val_acc ? "accuracy" : "classes to take an F1 of"));
    for (const auto& parameter : search.space)
      for (const auto& [key, path] : run.data_paths)
        if (key == parameter.key || key_is_under(key, parameter.key))
          found.error(parameter.origin,
                      fmt::format("'{}' names data: a search varies how a run trains, not what "
                                  "it trains on (a variant per data set compares those)",
                                  parameter.key));
    if (!found.empty()) {
      problems.add(found, variant);
      break;
    }
  }
  return study;
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
  if (search)
    for (const auto& parameter : search->space)
      if (const ConfigValue* fixed = searched_key_set_by(command_line, parameter))
        diagnostics.error(fixed->origin,
                          fmt::format("--set {} fixes a setting the search varies "
                                      "(sweep.search.space); leave it to the search, or take it "
                                      "out of the space",
                                      parameter.key));
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
