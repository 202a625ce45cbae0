#include "runner/config/variant_runs.h"

#include <algorithm>
#include <filesystem>
#include <functional>
#include <map>

#include <fmt/format.h>

#include "common/fingerprint.h"
#include "common/text.h"
#include "runner/config/lightning_names.h"
#include "runner/config/resolve.h"

namespace trainyard {

namespace fs = std::filesystem;

void VariantProblems::add(const Diagnostics& found, const Variant& variant) {
  for (const auto& item : found.items()) {
    auto same = [&](const Problem& p) {
      return p.message == item.message && to_string(p.origin) == to_string(item.origin);
    };
    auto it = std::find_if(problems_.begin(), problems_.end(), same);
    if (it == problems_.end()) it = problems_.insert(problems_.end(), {item.origin, item.message});
    it->in_own_set = it->in_own_set || written_in(variant.overrides, item.origin);
    if (std::find(it->variants.begin(), it->variants.end(), variant.name) == it->variants.end())
      it->variants.push_back(variant.name);
  }
}

void VariantProblems::report(size_t variant_count, Diagnostics& diagnostics) const {
  for (const auto& p : problems_) {
    if (p.in_own_set || p.variants.size() == variant_count) {
      diagnostics.error(p.origin, p.message);
      continue;
    }
    const size_t shown = std::min<size_t>(p.variants.size(), 3);
    std::vector<std::string> names;
    for (size_t i = 0; i < shown; ++i) names.push_back("'" + p.variants[i] + "'");
    std::string which = join(names);
    if (p.variants.size() > shown) which += fmt::format(" and {} more", p.variants.size() - shown);
    diagnostics.error(p.origin, fmt::format("variant{} {}: {}", p.variants.size() == 1 ? "" : "s",
                                            which, p.message));
  }
}

bool VariantProblems::written_in(const ConfigTree& overrides, const Origin& at) {
  auto same_line = [&](const Origin& o) { return o.file == at.file && o.line == at.line; };
  for (const auto& [key, value] : overrides.entries())
    if (same_line(value.origin) || same_line(value.key_origin)) return true;
  return false;
}

namespace {

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

}  // namespace

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
  // Every edge of the space: each parameter through its ends (a choice: each value, its branch's
  // parameters at their lower ends), the others at their lower end (a branch's parameter: with
  // its branch chosen); and a range's inside, whose values are not whole numbers (a uniform range
  // over a setting that takes whole numbers is refused here, not in the middle of the night).
  const TrialValues lowest = lowest_values(search.space);
  std::vector<TrialValues> edges = {lowest};
  std::map<size_t, const SearchParameter*> inside_of;  // the edges that probe a range's inside
  for (size_t i = 0; i < search.space.size(); ++i) {
    const SearchParameter& parameter = search.space[i];
    TrialValues base = lowest;  // where this parameter is set
    if (parameter.conditional())
      choose_branch(search.space, base, static_cast<size_t>(parameter.parent), parameter.branch);
    const size_t count =
        parameter.distribution == Distribution::choice ? parameter.choices.size() : 2;
    for (size_t k = 1; k < count; ++k) {
      TrialValues edge = base;
      if (parameter.distribution == Distribution::choice)
        choose_branch(search.space, edge, i, k);
      else
        edge[i] = parameter.high;
      edges.push_back(edge);
    }
    if (parameter.distribution == Distribution::uniform ||
        parameter.distribution == Distribution::log_uniform) {
      TrialValues inside = base;
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
    if (search.parallel > 1 && run.runtime.devices > 1)
      found.error(file_origin(file),
                  fmt::format("'sweep.search.parallel' {} with runtime.devices {} (variant '{}'): "
                              "trials side by side of several ranks each are not built yet; "
                              "parallel 1, or one device a trial",
                              search.parallel, run.runtime.devices, variant.name));
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

}  // namespace trainyard
