// load_experiment(): the experiment file's layers merged (layering.h), its sweep expanded
// (sweep.h), each variant resolved into a RunSpec (resolve.h), and the experiment-wide settings
// checked.
#include "runner/config/experiment.h"

#include <filesystem>

#include <fmt/format.h>

#include "common/text.h"
#include "runner/config/layering.h"
#include "runner/config/resolve.h"
#include "runner/config/sweep.h"

namespace trainyard {

namespace fs = std::filesystem;

namespace {

// Keys allowed at the top of an experiment file.
const std::vector<std::string> kTopLevelKeys = {
    "extends", "name", "description", "model", "dataset", "train", "runtime", "sweep", "report"};

std::string stem_of(const std::string& file) { return fs::path(file).stem().string(); }

}  // namespace

Experiment load_experiment(const std::string& file, const std::vector<std::string>& overrides,
                           const Registry& registry) {
  Diagnostics diagnostics;
  ConfigTree tree = read_experiment_file(file, diagnostics);
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
      else
        (std::string(key) == "name" ? experiment.name : experiment.description) = text;
    }
  }
  experiment.report = report_option_set().decode(
      tree.subtree("report"), "report", "section 'report'", file_origin(file), diagnostics);

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
      diagnostics.error(
          value ? value->origin : file_origin(file),
          fmt::format("'report.baseline' names no variant: '{}'{}; variants: {}", baseline,
                      guess.empty() ? "" : " (did you mean '" + guess + "'?)", join(names)));
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
