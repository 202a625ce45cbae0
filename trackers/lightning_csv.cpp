#include "trackers/lightning_csv.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <optional>
#include <set>
#include <vector>

#include <fmt/format.h>

#include "common/files.h"
#include "common/metrics.h"
#include "trackers/run_figures.h"

namespace trainyard {

namespace fs = std::filesystem;

namespace {

// One row of metrics.csv.
struct Row {
  int64_t step = 0;
  std::optional<int64_t> epoch{};  // 0-based
  std::map<std::string, double> values{};
};

// Python's repr of a float, which Lightning's csv.DictWriter writes: the shortest text that reads
// back as the same double ({} in fmt is that shortest form too).
std::string number(double value) {
  if (std::isnan(value)) return "nan";
  return fmt::format("{}", value);
}

std::string metrics_csv(Store& store, const RunRecord& run) {
  const std::vector<StepRow> steps = store.step_metrics(run.id);
  const std::vector<EpochRow> epochs = store.epoch_metrics(run.id);
  std::set<std::string> step_keys, epoch_keys;
  for (const StepRow& row : steps)
    for (const auto& [key, value] : row.values) step_keys.insert(key);
  for (const EpochRow& row : epochs)
    for (const auto& [key, value] : row.values)
      if (key != metric::kEpochStep) epoch_keys.insert(key);
  auto named = [&](const std::string& key, bool at_step) {
    const bool both = step_keys.count(key) && epoch_keys.count(key);
    return both ? key + (at_step ? "_step" : "_epoch") : key;
  };

  std::vector<Row> rows;
  std::vector<std::pair<int64_t, int64_t>> epoch_ends;  // (step, 0-based epoch)
  const std::map<std::string, double> finals = store.final_metrics(run.id);
  std::optional<double> total_steps;
  if (const auto found = finals.find(metric::kSteps); found != finals.end())
    total_steps = found->second;
  for (const EpochRow& row : epochs) {
    // At the step TensorBoard and MLflow show it (a run recorded before epochs had their step is
    // placed by its share of the steps).
    Row out{.step = epoch_step(row, epochs.back().epoch, total_steps), .epoch = row.epoch - 1};
    for (const auto& [key, value] : row.values)
      if (key != metric::kEpochStep) out.values[named(key, false)] = value;
    epoch_ends.push_back({out.step, row.epoch - 1});
    rows.push_back(std::move(out));
  }
  for (const StepRow& row : steps) {
    Row out{.step = row.step};
    // The epoch a step belongs to: the first whose end is at or after it.
    for (const auto& [end, epoch] : epoch_ends)
      if (row.step <= end) {
        out.epoch = epoch;
        break;
      }
    for (const auto& [key, value] : row.values) out.values[named(key, true)] = value;
    rows.push_back(std::move(out));
  }
  std::stable_sort(rows.begin(), rows.end(),
                   [](const Row& a, const Row& b) { return a.step < b.step; });
  if (run.status == RunStatus::completed) {
    Row final_row{.step = rows.empty() ? 0 : rows.back().step};
    if (!epoch_ends.empty()) final_row.epoch = epoch_ends.back().second;
    final_row.values = finals;
    rows.push_back(std::move(final_row));
  }

  std::set<std::string> header = {"epoch", "step"};
  for (const Row& row : rows)
    for (const auto& [key, value] : row.values) header.insert(key);
  std::string csv;
  for (const std::string& key : header) csv += (csv.empty() ? "" : ",") + key;
  csv += "\n";
  for (const Row& row : rows) {
    std::string line;
    bool first = true;
    for (const std::string& key : header) {
      if (!first) line += ",";
      first = false;
      if (key == "step")
        line += std::to_string(row.step);
      else if (key == "epoch")
        line += row.epoch ? std::to_string(*row.epoch) : "";
      else if (const auto found = row.values.find(key); found != row.values.end())
        line += number(found->second);
    }
    csv += line + "\n";
  }
  return csv;
}

}  // namespace

int export_lightning_csv(Store& store, const std::string& dir, const std::string& experiment) {
  int written = 0;
  for (const RunRecord& run : store.runs(experiment)) {
    if (run.status == RunStatus::queued || run.status == RunStatus::skipped)
      continue;  // never trained
    const fs::path folder = fs::path(dir) / run.experiment / fmt::format("version_{}", run.id);
    fs::create_directories(folder);
    write_file_atomically((folder / "metrics.csv").string(), metrics_csv(store, run));
    write_file_atomically((folder / "hparams.yaml").string(), run.config_yaml);
    ++written;
  }
  return written;
}

}  // namespace trainyard
