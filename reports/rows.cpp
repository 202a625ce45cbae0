// From the store to a report's rows (reports/report.h): each variant of the experiment file as it
// resolves now, over the runs of its configuration — the medians of its repeats' figures with their
// range, its per-epoch figures, what it derives from its records (time-to-target, device-hours,
// cost) — and every other configuration's newest run apart. The statistics are
// reports/comparison.cpp's; the renderers are html.cpp and text.cpp.
#include "reports/report.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <optional>
#include <set>

#include <fmt/format.h>

#include "common/clock.h"
#include "common/metrics.h"
#include "common/text.h"
#include "reports/comparison.h"
#include "reports/statistics.h"
#include "trainyard/config_tree.h"
#include "trainyard/options.h"

namespace trainyard {

namespace {

ReportOptions stored_report_options(const ExperimentRecord& experiment) {
  ConfigTree tree;
  try {
    YAML::Node root = YAML::Load(experiment.report_yaml);
    if (root.IsMap()) flatten_into(tree, root, "<stored report settings>");
  } catch (const YAML::Exception&) {
    // Unreadable settings fall back to the defaults; the numbers are still right.
  }
  Diagnostics ignored;
  return decode_report_options(tree, {}, ignored);
}

// A completed run's figures: its final metrics and what the report derives from its records
// (`repeat`, `attributes`) — time-to-target (when it reached report.target), device-hours, and
// with prices its cost.
std::map<std::string, double> run_figures(Store& store, const RunRecord& run,
                                          const RepeatRun& repeat,
                                          const std::map<std::string, std::string>& attributes,
                                          const ReportOptions& options) {
  std::map<std::string, double> figures = store.final_metrics(run.id);
  if (run.status != RunStatus::completed) return figures;
  if (const auto seconds = time_to_target(repeat, options))
    figures[metric::kTimeToTarget] = *seconds;
  auto attribute = [&](const char* key) {
    auto it = attributes.find(key);
    return it == attributes.end() ? std::string() : it->second;
  };
  // Every rank's device, on every node (runs recorded before `ranks`: one node's devices).
  const std::string ranks_text = attribute("ranks");
  int64_t ranks_recorded = 0;
  const auto [end, error] =
      std::from_chars(ranks_text.data(), ranks_text.data() + ranks_text.size(), ranks_recorded);
  const double ranks =
      error == std::errc() && end == ranks_text.data() + ranks_text.size() && ranks_recorded > 0
          ? static_cast<double>(ranks_recorded)
          : static_cast<double>(run.devices);
  auto seconds = figures.find(metric::kTrainSeconds);
  if (seconds == figures.end()) return figures;
  figures[metric::kDeviceHours] = seconds->second * ranks / 3600;
  const auto price = options.price_for(run.environment.device_name, attribute("device_type"));
  if (!price) return figures;
  figures[metric::kCost] = figures[metric::kDeviceHours] * *price;
  if (auto ttt = figures.find(metric::kTimeToTarget); ttt != figures.end())
    figures[metric::kCostToTarget] = ttt->second * ranks / 3600 * *price;
  return figures;
}

VariantRow make_row(Store& store, const RunRecord& run, const ReportOptions& options) {
  VariantRow row;
  row.variant = run.variant;
  row.run_id = run.id;
  row.status = run.status;
  row.precision = run.precision;
  row.strategy = run.strategy;
  row.devices = run.devices;
  row.device_name = run.environment.device_name;
  row.torch_version = run.environment.torch_version;
  row.ended_at = run.ended_at;
  row.error = run.error;
  row.failure = run.failure;
  RepeatRun repeat = repeat_run(store, run);
  row.attributes = store.attributes(run.id);
  row.metrics = run_figures(store, run, repeat, row.attributes, options);
  row.epochs = repeat.epochs;
  row.repeats = {std::move(repeat)};
  row.target_reached = row.metrics.count(metric::kTimeToTarget) ? 1 : 0;
  row.run_ids = {run.id};
  row.config_yaml = run.config_yaml;
  row.resumes = run.resumes;
  row.completed = run.status == RunStatus::completed ? 1 : 0;
  if (row.completed == 1)
    for (const auto& [key, value] : row.metrics) row.samples[key] = {value};
  row.log_path = run.environment.log_path;
  if (const std::string stem = run_files_stem(run); !stem.empty()) row.config_path = stem + ".yaml";
  row.git_revision = run.environment.git_revision;
  row.host = run.host;
  return row;
}

// One row over a variant's repeats (`runs`: the run of each repeat that ran, by repeat): the
// first completed one is shown; the figures are the medians over the completed ones, with their
// min and max, and so is each epoch's.
VariantRow aggregate_row(Store& store, const std::string& variant,
                         const std::vector<const RunRecord*>& runs, int64_t planned,
                         const ReportOptions& options) {
  std::vector<const RunRecord*> completed;
  for (const RunRecord* run : runs)
    if (run->status == RunStatus::completed) completed.push_back(run);
  if (runs.empty()) {
    VariantRow row;  // the file describes it; nothing ran it yet
    row.variant = variant;
    row.planned = planned;
    row.error = "not run yet with this configuration";
    return row;
  }
  VariantRow row = make_row(store, completed.empty() ? *runs.back() : *completed.front(), options);
  row.planned = planned;
  row.run_ids.clear();
  row.repeats.clear();
  row.did_not_learn.clear();
  row.resumes = 0;
  std::map<std::string, std::vector<double>> values;  // the completed runs' figures, by key
  std::vector<const RepeatRun*> completed_repeats;
  for (const RunRecord* run : runs) {
    row.run_ids.push_back(run->id);
    row.repeats.push_back(repeat_run(store, *run));
    row.resumes += run->resumes;
  }
  for (size_t i = 0; i < runs.size(); ++i) {
    if (runs[i]->status != RunStatus::completed) continue;
    completed_repeats.push_back(&row.repeats[i]);
    const auto attributes = store.attributes(runs[i]->id);
    const auto round = attributes.find("round");
    if (const auto learning = attributes.find("learning");
        learning != attributes.end() && row.did_not_learn.empty())
      row.did_not_learn = learning->second;
    if (const auto recorded = attributes.find("test_confusion"); recorded != attributes.end())
      if (const auto matrix = ConfusionMatrix::from_json(recorded->second);
          matrix && (row.confusion.empty() || matrix->classes() == row.confusion.classes())) {
        row.confusion += *matrix;
        ++row.confusion_runs;
      }
    for (const auto& [key, value] :
         run_figures(store, *runs[i], row.repeats[i], attributes, options)) {
      values[key].push_back(value);
      if (round != attributes.end()) row.by_round[key][round->second] = value;
    }
  }
  row.completed = static_cast<int64_t>(completed.size());
  row.samples = values;
  row.target_reached = static_cast<int64_t>(values[metric::kTimeToTarget].size());
  if (row.target_reached == 0) values.erase(metric::kTimeToTarget);
  if (completed.size() > 1) {
    std::map<std::pair<int64_t, std::string>, std::vector<double>> epoch_values;
    for (const RepeatRun* repeat : completed_repeats)
      for (const EpochRow& epoch : repeat->epochs)
        for (const auto& [key, value] : epoch.values)
          epoch_values[{epoch.epoch, key}].push_back(value);
    row.metrics.clear();
    for (const auto& [key, list] : values) {
      row.metrics[key] = median(list);
      row.spread[key] = {*std::min_element(list.begin(), list.end()),
                         *std::max_element(list.begin(), list.end())};
    }
    row.epochs.clear();
    for (const auto& [where, list] : epoch_values) {
      if (row.epochs.empty() || row.epochs.back().epoch != where.first)
        row.epochs.push_back({where.first, {}});
      row.epochs.back().values[where.second] = median(list);
    }
  }
  // What happened to the repeats that did not complete (or never ran).
  std::vector<std::string> missing;
  for (const RunRecord* run : runs)
    if (run->status != RunStatus::completed && !completed.empty())
      missing.push_back(fmt::format(
          "repeat {} (run {}) {}{}", run->repeat + 1, run->id, to_string(run->status),
          run->failure == FailureClass::none ? "" : fmt::format(" ({})", to_string(run->failure))));
  if (static_cast<int64_t>(runs.size()) < planned)
    missing.push_back(plural(planned - static_cast<int64_t>(runs.size()), "repeat") +
                      " not run yet");
  if (!missing.empty() && !completed.empty())
    row.error =
        fmt::format("{} of {} completed; {}", completed.size(), planned, join(missing, "; "));
  return row;
}

// The run to show for a configuration: its newest completed run, else its newest run.
bool better_choice(const RunRecord& candidate, const RunRecord& chosen) {
  return candidate.status == RunStatus::completed || chosen.status != RunStatus::completed;
}

// A config value as the differences show it: an empty string is "" (not nothing after the colon).
std::string shown(const std::string& value) { return value.empty() ? "\"\"" : value; }

// "train.epochs: 1 (the file: 3)" for each key in which `run_yaml` differs from `file_yaml`.
std::vector<std::string> differences(const std::string& run_yaml, const std::string& file_yaml) {
  const auto run = flat_config(run_yaml), file = flat_config(file_yaml);
  std::vector<std::string> out;
  for (const auto& [key, value] : run) {
    auto it = file.find(key);
    if (it == file.end())
      out.push_back(fmt::format("{}: {} (not in the file)", key, shown(value)));
    else if (it->second != value)
      out.push_back(fmt::format("{}: {} (the file: {})", key, shown(value), shown(it->second)));
  }
  for (const auto& [key, value] : file)
    if (!run.count(key))
      out.push_back(fmt::format("{}: not set (the file: {})", key, shown(value)));
  return out;
}

// Rows: each variant of the file as it is now, with the run of exactly that configuration; every
// other configuration's newest run goes to `other_runs`.
void choose_current_runs(Store& store, const std::vector<RunRecord>& runs,
                         const CurrentExperiment& current, ExperimentReport& section) {
  using Key = std::pair<std::string, std::string>;          // variant and config hash
  std::map<std::string, const CurrentVariant*> by_variant;  // its first repeat
  std::vector<std::string> variant_order;
  std::set<Key> wanted;
  std::map<Key, Key> current_of_legacy;  // a run recorded before fingerprints is its config's
  for (const auto& variant : current.variants) {
    if (!variant.legacy_config_hash.empty() && variant.legacy_config_hash != variant.config_hash)
      current_of_legacy[{variant.variant, variant.legacy_config_hash}] = {variant.variant,
                                                                          variant.config_hash};
    if (!by_variant.count(variant.variant)) {
      by_variant[variant.variant] = &variant;
      variant_order.push_back(variant.variant);
    }
    wanted.insert({variant.variant, variant.config_hash});
  }
  std::map<Key, const RunRecord*> chosen, other;
  std::vector<Key> other_order;
  for (const auto& run : runs) {
    Key key{run.variant, run.config_hash};
    if (auto it = current_of_legacy.find(key); it != current_of_legacy.end()) key = it->second;
    if (wanted.count(key)) {
      if (!chosen.count(key) || better_choice(run, *chosen[key])) chosen[key] = &run;
      continue;
    }
    if (!other.count(key)) other_order.push_back(key);
    if (!other.count(key) || better_choice(run, *other[key])) other[key] = &run;
  }
  for (const auto& name : variant_order) {
    std::vector<const RunRecord*> repeats;
    int64_t planned = 0;
    for (const auto& variant : current.variants) {
      if (variant.variant != name) continue;
      ++planned;
      auto it = chosen.find({name, variant.config_hash});
      if (it != chosen.end()) repeats.push_back(it->second);
    }
    VariantRow row = aggregate_row(store, name, repeats, planned, section.options);
    row.config_yaml = by_variant[name]->config_yaml;
    section.rows.push_back(std::move(row));
  }
  for (const auto& key : other_order) {
    const RunRecord& run = *other[key];
    OtherRun entry{
        .variant = run.variant, .run_id = run.id, .status = run.status, .ended_at = run.ended_at};
    entry.metrics = store.final_metrics(run.id);
    entry.error = run.error;
    entry.failure = run.failure;
    auto it = by_variant.find(run.variant);
    if (it == by_variant.end())
      entry.differences = {"the file has no variant of this name any more"};
    else
      entry.differences = differences(run.config_yaml, it->second->config_yaml);
    section.other_runs.push_back(std::move(entry));
  }
}

// Each run of another configuration against the baseline of its own configuration: the baseline
// variant's run that differs from the file in the same keys and values (the same smoke test's
// --set), when there is one.
void compare_other_runs(ExperimentReport& section) {
  for (auto& entry : section.other_runs) {
    if (entry.variant == section.baseline || entry.status != RunStatus::completed) continue;
    for (const auto& base : section.other_runs) {
      if (base.variant != section.baseline || base.status != RunStatus::completed ||
          base.differences != entry.differences)
        continue;
      const auto mine = entry.metrics.find(metric::kTrainSeconds);
      const auto theirs = base.metrics.find(metric::kTrainSeconds);
      if (mine != entry.metrics.end() && theirs != base.metrics.end() && mine->second > 0)
        entry.speedup = theirs->second / mine->second;
    }
  }
}

// Without the file: each variant's newest completed run (or newest run), whatever its
// configuration.
void choose_newest_runs(Store& store, const std::vector<RunRecord>& runs,
                        ExperimentReport& section) {
  std::map<std::string, RunRecord> chosen;
  std::map<std::string, int64_t> position;
  for (const auto& run : runs) {
    auto it = chosen.find(run.variant);
    if (it == chosen.end() || better_choice(run, it->second)) chosen[run.variant] = run;
    position[run.variant] = run.position;
  }
  std::vector<std::string> order;
  for (const auto& [variant, run] : chosen) order.push_back(variant);
  std::stable_sort(order.begin(), order.end(),
                   [&](const auto& a, const auto& b) { return position[a] < position[b]; });
  for (const auto& variant : order)
    section.rows.push_back(make_row(store, chosen[variant], section.options));
}

// What each row's configuration sets differently from the baseline's, after defaults, as the dry
// run lists it (config/differences.h): "key: value (baseline: other)".
void differences_from_baseline(ExperimentReport& section, const OptionDefault& option_default) {
  const VariantRow* baseline = nullptr;
  for (const auto& row : section.rows)
    if (row.variant == section.baseline) baseline = &row;
  if (!baseline) return;
  for (auto& row : section.rows) {
    if (&row == baseline || baseline->config_yaml.empty() || row.config_yaml.empty()) continue;
    for (const auto& d : config_differences(flat_config(row.config_yaml),
                                            flat_config(baseline->config_yaml), option_default))
      row.differs.push_back(describe_difference(d));
  }
}

// A target and prices are asked for to be shown: their columns join the table when the file's
// `report.metrics` does not name them — time-to-target and its speedup after the speedup, the
// costs at the end.
void with_answer_columns(ReportOptions& options) {
  auto& columns = options.metrics;
  auto add = [&](const char* key, const char* after) {
    if (std::find(columns.begin(), columns.end(), key) != columns.end()) return;
    auto at = std::find(columns.begin(), columns.end(), after);
    columns.insert(at == columns.end() ? columns.end() : at + 1, key);
  };
  if (options.has_target()) {
    add(metric::kTimeToTarget, metric::kSpeedup);
    add(metric::kTargetSpeedup, metric::kTimeToTarget);
  }
  if (!options.prices.empty()) {
    add(metric::kCost, "");
    if (options.has_target()) add(metric::kCostToTarget, metric::kCost);
  }
}

// The section's task: the one its runs recorded, or what their figures show. In a language model's
// section the default columns' classification figures show its counterparts: its quality (test
// perplexity) for test_acc, tokens_per_s for samples_per_s.
void with_task_columns(ExperimentReport& section) {
  auto any_row_has = [&](const char* key) {
    for (const auto& row : section.rows)
      if (row.metrics.count(key)) return true;
    return false;
  };
  std::optional<Task> recorded;
  for (const auto& row : section.rows)
    if (auto task = row.attributes.find("task"); task != row.attributes.end())
      recorded = recorded ? recorded : parse_task(task->second);
  const TaskTraits& language_model = traits(Task::causal_lm);
  section.task = recorded ? *recorded
                 : any_row_has(language_model.test_quality) && !any_row_has(metric::kTestAcc)
                     ? Task::causal_lm
                     : Task::classification;
  if (traits(section.task).has_accuracy) return;
  for (auto& column : section.options.metrics) {
    if (column == metric::kTestAcc) column = traits(section.task).test_quality;
    if (column == metric::kSamplesPerSecond) column = metric::kTokensPerSecond;
  }
}

}  // namespace

Report build_report(Store& store, const std::string& experiment_name,
                    const CurrentExperiments& current) {
  Report report;
  report.generated_at = utc_now();
  std::vector<ExperimentRecord> experiments = store.experiments();
  if (!experiment_name.empty()) experiments = {store.experiment_named(experiment_name)};
  for (const auto& experiment : experiments) {
    ExperimentReport section;
    section.experiment = experiment;
    const std::vector<RunRecord> runs = store.runs(experiment.name);
    const CurrentExperiment now = current ? current(experiment) : CurrentExperiment{};
    section.options = now.report ? *now.report : stored_report_options(experiment);
    with_answer_columns(section.options);
    if (current && now.problem.empty()) {
      choose_current_runs(store, runs, now, section);
      read_studies(store, runs, now.studies, section);
    } else {
      if (current)
        section.note = fmt::format(
            "{}: {}; the rows are each variant's newest runs, whatever their configuration",
            experiment.file, now.problem);
      choose_newest_runs(store, runs, section);
    }

    section.baseline = section.options.baseline;
    if (section.baseline.empty() && !section.rows.empty())
      section.baseline = section.rows.front().variant;
    with_task_columns(section);
    differences_from_baseline(section, now.option_default);
    compare_with_baseline(section);
    compare_other_runs(section);
    report.experiments.push_back(std::move(section));
  }
  return report;
}

std::string other_run_status(const OtherRun& run) {
  const bool named = run.failure != FailureClass::none &&
                     run.failure != FailureClass::interrupted && run.status != RunStatus::completed;
  return to_string(run.status) + (named ? fmt::format(" ({})", to_string(run.failure)) : "");
}

std::string other_run_quality(const OtherRun& run, bool name) {
  if (run.metrics.count(metric::kTestPerplexity))
    return (name ? "test perplexity " : "ppl ") + other_run_figure(run, metric::kTestPerplexity);
  return (name ? "test accuracy " : "") + other_run_figure(run, metric::kTestAcc);
}

std::string other_run_figure(const OtherRun& run, const std::string& key) {
  const auto it = run.metrics.find(key);
  const MetricInfo* info = find_metric(key);
  return it == run.metrics.end() || info == nullptr ? "—" : format_metric(*info, it->second);
}

}  // namespace trainyard
