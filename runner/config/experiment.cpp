// load_experiment(): the experiment file's layers merged (layering.h), its sweep expanded
// (sweep.h), each variant resolved into a RunSpec (resolve.h), and the experiment-wide settings
// checked.
#include "runner/config/experiment.h"

#include <filesystem>
#include <map>

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
                           const Registry& registry, int64_t max_runs) {
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

  ConfigTree base = tree;  // the run's sections, with where each of their keys is written
  for (const char* key : {"sweep", "report", "name", "description"}) base.erase(key);

  const int64_t repeats = sweep_repeats(tree.subtree("sweep"), diagnostics);
  std::vector<Variant> variants =
      expand_sweep(tree.subtree("sweep"), diagnostics, max_runs, repeats);
  for (const auto& variant : variants) {
    ConfigTree run_tree = base;
    merge_layer(run_tree, variant.overrides);
    merge_layer(run_tree, command_line);  // the command line wins over every variant
    int64_t seed = 0;
    for (int64_t r = 0; r < repeats; ++r) {
      RunSpec run;
      run.variant = variant.name;
      run.repeat = r;
      ConfigTree repeat_tree = run_tree;
      if (r > 0)  // the variant's own seed, then the next ones
        repeat_tree.set("train.seed", {YAML::Node(seed + r), file_origin(file), file_origin(file)});
      const size_t errors_before = diagnostics.size();
      ConfigTree resolved = resolve_run(repeat_tree, registry, file, run, diagnostics);
      if (r == 0) seed = run.train.seed;
      run.config_yaml = resolved.to_yaml_text();
      run.config_hash = run_identity_hash(resolved);
      experiment.runs.push_back(std::move(run));
      if (diagnostics.size() > errors_before) break;  // the other repeats say the same
    }
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
  run.config_hash = run_identity_hash(resolved);
  return run;
}

namespace {

// Problems of several files in one message, each line already saying where and "error:".
class BatchError : public UserError {
 public:
  using UserError::UserError;
  bool labelled() const override { return true; }
};

}  // namespace

std::vector<Experiment> load_batch(const std::vector<std::string>& files,
                                   const std::vector<std::string>& overrides,
                                   const Registry& registry, int64_t max_runs) {
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
      Experiment experiment = load_experiment(file, overrides, registry, max_runs);
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

}  // namespace trainyard
