#include "reports/report.h"

#include <algorithm>

#include <fmt/format.h>

#include "common/metrics.h"
#include "common/text.h"
#include "config/config_tree.h"
#include "config/options.h"

namespace trainyard {

namespace {

ReportOptions decode_report_options(const ExperimentRecord& experiment) {
  ConfigTree tree;
  try {
    YAML::Node root = YAML::Load(experiment.report_yaml);
    if (root.IsMap()) flatten_into(tree, root, "<stored report settings>");
  } catch (const YAML::Exception&) {
    // Unreadable settings fall back to the defaults; the numbers are still right.
  }
  Diagnostics ignored;
  return report_option_set().decode(tree, "report", "section 'report'", {}, ignored);
}

VariantRow make_row(Store& store, const RunRecord& run) {
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
  row.metrics = store.final_metrics(run.id);
  row.epochs = store.epoch_metrics(run.id);
  row.attributes = store.attributes(run.id);
  return row;
}

// The run to show for a configuration: its newest completed run, else its newest run.
bool better_choice(const RunRecord& candidate, const RunRecord& chosen) {
  return candidate.status == RunStatus::completed || chosen.status != RunStatus::completed;
}

// "train.epochs: 1 (the file: 3)" for each key in which `run_yaml` differs from `file_yaml`.
std::vector<std::string> differences(const std::string& run_yaml, const std::string& file_yaml) {
  const auto run = flat_config(run_yaml), file = flat_config(file_yaml);
  std::vector<std::string> out;
  for (const auto& [key, value] : run) {
    auto it = file.find(key);
    if (it == file.end())
      out.push_back(fmt::format("{}: {} (not in the file)", key, value));
    else if (it->second != value)
      out.push_back(fmt::format("{}: {} (the file: {})", key, value, it->second));
  }
  for (const auto& [key, value] : file)
    if (!run.count(key)) out.push_back(fmt::format("{}: not set (the file: {})", key, value));
  return out;
}

// Rows: each variant of the file as it is now, with the run of exactly that configuration; every
// other configuration's newest run goes to `other_runs`.
void choose_current_runs(Store& store, const std::vector<RunRecord>& runs,
                         const CurrentExperiment& current, ExperimentReport& section) {
  std::map<std::string, const CurrentVariant*> by_variant;
  for (const auto& variant : current.variants) by_variant[variant.variant] = &variant;
  std::map<std::string, const RunRecord*> chosen;                         // by variant
  std::map<std::pair<std::string, std::string>, const RunRecord*> other;  // by variant and hash
  std::vector<std::pair<std::string, std::string>> other_order;
  for (const auto& run : runs) {
    auto it = by_variant.find(run.variant);
    if (it != by_variant.end() && it->second->config_hash == run.config_hash) {
      if (!chosen.count(run.variant) || better_choice(run, *chosen[run.variant]))
        chosen[run.variant] = &run;
      continue;
    }
    const auto key = std::make_pair(run.variant, run.config_hash);
    if (!other.count(key)) other_order.push_back(key);
    if (!other.count(key) || better_choice(run, *other[key])) other[key] = &run;
  }
  for (const auto& variant : current.variants) {
    if (chosen.count(variant.variant)) {
      section.rows.push_back(make_row(store, *chosen[variant.variant]));
      continue;
    }
    VariantRow row;  // the file describes it; nothing ran it yet
    row.variant = variant.variant;
    row.error = "not run yet with this configuration";
    section.rows.push_back(std::move(row));
  }
  for (const auto& key : other_order) {
    const RunRecord& run = *other[key];
    OtherRun entry{
        .variant = run.variant, .run_id = run.id, .status = run.status, .ended_at = run.ended_at};
    auto it = by_variant.find(run.variant);
    if (it == by_variant.end())
      entry.differences = {"the file has no variant of this name any more"};
    else
      entry.differences = differences(run.config_yaml, it->second->config_yaml);
    section.other_runs.push_back(std::move(entry));
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
  for (const auto& variant : order) section.rows.push_back(make_row(store, chosen[variant]));
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
    section.options = decode_report_options(experiment);

    const std::vector<RunRecord> runs = store.runs(experiment.name);
    const CurrentExperiment now = current ? current(experiment) : CurrentExperiment{};
    if (current && now.problem.empty()) {
      choose_current_runs(store, runs, now, section);
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
    const VariantRow* baseline = nullptr;
    for (const auto& row : section.rows)
      if (row.variant == section.baseline && row.status == RunStatus::completed) baseline = &row;
    if (baseline && baseline->metrics.count(metric::kTrainSeconds)) {
      const double base_seconds = baseline->metrics.at(metric::kTrainSeconds);
      for (auto& row : section.rows) {
        auto it = row.metrics.find(metric::kTrainSeconds);
        if (row.status == RunStatus::completed && it != row.metrics.end() && it->second > 0)
          row.metrics[metric::kSpeedup] = base_seconds / it->second;
      }
    }
    report.experiments.push_back(std::move(section));
  }
  return report;
}

std::string html_escape(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

namespace {

std::string cell(const VariantRow& row, const std::string& key) {
  auto it = row.metrics.find(key);
  const MetricInfo* info = find_metric(key);
  if (it == row.metrics.end() || info == nullptr) return "—";
  return format_metric(*info, it->second);
}

std::string csv_field(const std::string& text) {
  if (text.find_first_of(",\"\n") == std::string::npos) return text;
  std::string out = "\"";
  for (char c : text) out += c == '"' ? std::string("\"\"") : std::string(1, c);
  return out + "\"";
}

}  // namespace

std::string render_markdown(const Report& report) {
  std::string out = "# Trainyard report\n\n";
  for (const auto& section : report.experiments) {
    const auto& e = section.experiment;
    out += fmt::format("## {}\n\n", section.options.title.empty() ? e.name : section.options.title);
    if (!e.description.empty()) out += e.description + "\n\n";
    out += "| variant | status | precision | devices | strategy |";
    std::string rule = "|---|---|---|---:|---|";
    for (const auto& key : section.options.metrics) {
      out += " " + find_metric(key)->label + " |";
      rule += "---:|";
    }
    if (!section.note.empty()) out += "> " + section.note + "\n\n";
    out += "\n" + rule + "\n";
    for (const auto& row : section.rows) {
      out += fmt::format("| {}{} | {} | {} | {} | {} |", row.variant,
                         row.variant == section.baseline ? " (baseline)" : "",
                         row.run_id == 0 ? "not run" : to_string(row.status), row.precision,
                         row.devices, row.strategy);
      for (const auto& key : section.options.metrics) out += " " + cell(row, key) + " |";
      out += "\n";
    }
    out += "\n";
    if (!section.other_runs.empty()) {
      out += "Runs of other configurations (not in the table):\n\n";
      for (const auto& run : section.other_runs)
        out += fmt::format(
            "- {} (run {}, {}): {}\n", run.variant, run.run_id, to_string(run.status),
            run.differences.empty() ? "the same settings" : join(run.differences, "; "));
      out += "\n";
    }
  }
  return out;
}

std::string render_csv(const Report& report) {
  std::vector<std::string> keys;
  for (const auto& m : metric_vocabulary())
    if (m.scope != MetricScope::epoch) keys.push_back(m.key);
  std::string out =
      "experiment,variant,run_id,status,precision,devices,strategy,device,torch_version";
  for (const auto& key : keys) out += "," + key;
  out += "\n";
  for (const auto& section : report.experiments) {
    for (const auto& row : section.rows) {
      out += fmt::format("{},{},{},{},{},{},{},{},{}", csv_field(section.experiment.name),
                         csv_field(row.variant), row.run_id, to_string(row.status),
                         csv_field(row.precision), row.devices, csv_field(row.strategy),
                         csv_field(row.device_name), csv_field(row.torch_version));
      for (const auto& key : keys) {
        auto it = row.metrics.find(key);
        out += it == row.metrics.end() ? "," : fmt::format(",{}", it->second);
      }
      out += "\n";
    }
  }
  return out;
}

}  // namespace trainyard
