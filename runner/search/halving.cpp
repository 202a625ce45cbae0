#include "runner/search/halving.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "reports/statistics.h"
#include "runner/search/samplers.h"

namespace trainyard {

std::vector<int64_t> rung_epochs(const StudySchedule& schedule, int64_t epochs) {
  std::vector<int64_t> rungs;
  if (schedule.kind == ScheduleKind::median)
    for (int64_t e = schedule.grace_epochs; e < epochs; e += schedule.interval_epochs)
      rungs.push_back(e);
  else if (schedule.on())
    for (int64_t e = schedule.grace_epochs; e < epochs; e *= schedule.reduction) rungs.push_back(e);
  rungs.push_back(epochs);
  return rungs;
}

namespace {

// Positions of `figures`, best first, ties to the earlier.
std::vector<size_t> ranked(const std::vector<double>& figures, bool minimize) {
  std::vector<size_t> order(figures.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return better_figure(figures[a], figures[b], minimize);
  });
  return order;
}

}  // namespace

std::vector<int64_t> promote(const std::vector<int64_t>& trials, const std::vector<double>& figures,
                             int64_t reduction, bool minimize) {
  const std::vector<size_t> order = ranked(figures, minimize);
  const size_t keep = std::max<size_t>(1, trials.size() / static_cast<size_t>(reduction));
  std::vector<int64_t> promoted;
  for (size_t k = 0; k < keep && k < order.size(); ++k) promoted.push_back(trials[order[k]]);
  std::sort(promoted.begin(), promoted.end());
  return promoted;
}

std::optional<Promotion> asha_promotion(const std::vector<AshaRung>& rungs, int64_t reduction,
                                        bool minimize, bool draining) {
  for (size_t r = rungs.size() - 1; r-- > 0;) {
    const AshaRung& rung = rungs[r];
    size_t quota = rung.trials.size() / static_cast<size_t>(reduction);
    if (draining && !rung.trials.empty()) quota = std::max<size_t>(quota, 1);
    const std::vector<size_t> order = ranked(rung.figures, minimize);
    for (size_t k = 0; k < quota && k < order.size(); ++k) {
      const size_t at = order[k];
      if (!std::isfinite(rung.figures[at])) break;  // the rest are failed too
      if (!rung.promoted.count(rung.trials[at])) return Promotion{r, rung.trials[at]};
    }
  }
  return std::nullopt;
}

double median_figure(std::vector<double> figures) {
  std::erase_if(figures, [](double f) { return !std::isfinite(f); });
  return figures.empty() ? NAN : median(std::move(figures));
}

bool beats_median(double best, double median, bool minimize) {
  if (std::isnan(median)) return true;
  if (!std::isfinite(best)) return false;
  return minimize ? best <= median : best >= median;
}

}  // namespace trainyard
