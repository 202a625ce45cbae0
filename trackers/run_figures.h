// A run's figures as the trackers show them (TensorBoard's event files, MLflow's metrics): each at
// an optimizer step, with the wall-clock time it was reached. One place decides where a figure
// goes, so the trackers cannot disagree with each other or with the store:
//   - "step": as recorded at steps (the loss at a progress line, validations inside an epoch), at
//     the run's start plus the training time recorded with it;
//   - "epoch": each epoch's figures at the step the epoch ended (Lightning's rule);
//   - "final": a completed run's final figures (test figures, throughput, memory) at its last step.
#pragma once

#include <algorithm>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "db/store.h"

namespace trainyard {

// Figures of one scope reached at one optimizer step.
struct FigureGroup {
  std::string scope;  // "step", "epoch" or "final"
  int64_t step = 0;
  double wall_time = 0;  // seconds since 1970
  std::map<std::string, double> values{};
};

struct RunFigures {
  double start = 0;  // when it started (queued, when it never did); seconds since 1970
  double end = 0;    // when it ended; the last figure's time while it runs
  std::vector<FigureGroup> groups{};  // steps in order, then epochs, then the final figures
  int64_t last_step = -1;             // of "step" figures (-1: none)
  int64_t last_epoch_step = -1;       // of "epoch" figures
};

RunFigures run_figures(Store& store, const RunRecord& run);

// An epoch's figures as recorded, and the optimizer step it ended at (recorded with it as "step";
// a run recorded before that was is placed by its share of the run's `total_steps`, when known).
int64_t epoch_step(const EpochRow& row, int64_t last_epoch, std::optional<double> total_steps);

}  // namespace trainyard
