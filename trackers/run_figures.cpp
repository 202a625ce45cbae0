#include "trackers/run_figures.h"

#include <cmath>

#include "common/clock.h"
#include "common/metrics.h"

namespace trainyard {

int64_t epoch_step(const EpochRow& row, int64_t last_epoch, std::optional<double> total_steps) {
  if (const auto recorded = row.values.find(metric::kEpochStep); recorded != row.values.end())
    return static_cast<int64_t>(recorded->second);
  if (total_steps && last_epoch > 0)
    return static_cast<int64_t>(std::llround(*total_steps * static_cast<double>(row.epoch) /
                                             static_cast<double>(last_epoch)));
  return row.epoch;
}

RunFigures run_figures(Store& store, const RunRecord& run) {
  RunFigures figures;
  figures.start = unix_time_of(run.started_at.empty() ? run.queued_at : run.started_at);
  for (const StepRow& row : store.step_metrics(run.id)) {
    const auto elapsed = row.values.find(metric::kElapsedSeconds);
    figures.groups.push_back(
        {.scope = "step",
         .step = row.step,
         .wall_time = figures.start + (elapsed == row.values.end() ? 0 : elapsed->second),
         .values = row.values});
    figures.last_step = std::max(figures.last_step, row.step);
  }
  const std::vector<EpochRow> epochs = store.epoch_metrics(run.id);
  const std::map<std::string, double> finals = store.final_metrics(run.id);
  std::optional<double> total_steps;
  if (const auto steps = finals.find(metric::kSteps); steps != finals.end())
    total_steps = steps->second;
  double wall = figures.start;
  for (const EpochRow& row : epochs) {
    const int64_t step = epoch_step(row, epochs.back().epoch, total_steps);
    std::map<std::string, double> values = row.values;
    values.erase(metric::kEpochStep);
    if (const auto seconds = values.find(metric::kEpochSeconds); seconds != values.end())
      wall += seconds->second;
    figures.groups.push_back(
        {.scope = "epoch", .step = step, .wall_time = wall, .values = std::move(values)});
    figures.last_epoch_step = std::max(figures.last_epoch_step, step);
  }
  figures.end = run.ended_at.empty() ? wall : unix_time_of(run.ended_at);
  if (run.status == RunStatus::completed)
    figures.groups.push_back(
        {.scope = "final",
         .step = std::max<int64_t>({figures.last_step, figures.last_epoch_step, 0}),
         .wall_time = figures.end,
         .values = finals});
  return figures;
}

}  // namespace trainyard
