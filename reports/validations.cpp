// A run's validations over its training time (reports/report.h): what time-to-target, the curves
// against time and a study's second objective read. A file of its own, so the variants' rows
// (rows.cpp) and the studies (study.cpp) share it without depending on each other.
#include <optional>
#include <string>
#include <vector>

#include "common/metrics.h"
#include "reports/report.h"

namespace trainyard {

std::optional<double> time_to_target(const RepeatRun& run, const ReportOptions& options) {
  if (!options.has_target()) return std::nullopt;
  for (const Validation& validation : validations(run)) {
    auto value = validation.values.find(options.target_metric);
    if (value != validation.values.end() && options.reaches_target(value->second))
      return validation.elapsed;
  }
  return std::nullopt;
}

RepeatRun repeat_run(Store& store, const RunRecord& run) {
  RepeatRun out{.run_id = run.id, .repeat = run.repeat, .status = run.status};
  out.log_path = run.environment.log_path;
  if (const std::string stem = run_files_stem(run); !stem.empty()) out.config_path = stem + ".yaml";
  out.steps = store.step_metrics(run.id);
  out.epochs = store.epoch_metrics(run.id);
  return out;
}

std::optional<double> run_time_to_target(Store& store, const RunRecord& run,
                                         const ReportOptions& options) {
  if (run.status != RunStatus::completed) return std::nullopt;
  return time_to_target(repeat_run(store, run), options);
}

std::vector<Validation> validations(const RepeatRun& run) {
  std::vector<Validation> out;
  for (const StepRow& step : run.steps) {
    auto elapsed = step.values.find(metric::kElapsedSeconds);
    if (elapsed != step.values.end() && step.values.count(metric::kValSeconds))
      out.push_back({elapsed->second, step.values});
  }
  if (!out.empty()) return out;
  double elapsed = 0;
  for (const EpochRow& epoch : run.epochs) {
    auto seconds = epoch.values.find(metric::kEpochSeconds);
    if (seconds == epoch.values.end()) return {};  // no time to place the rest at
    elapsed += seconds->second;
    out.push_back({elapsed, epoch.values});
  }
  return out;
}

}  // namespace trainyard
