#include "runner/search/halving.h"

#include <algorithm>
#include <numeric>

#include "runner/search/samplers.h"

namespace trainyard {

std::vector<int64_t> rung_epochs(const HalvingSchedule& schedule, int64_t epochs) {
  std::vector<int64_t> rungs;
  if (schedule.on)
    for (int64_t e = schedule.grace_epochs; e < epochs; e *= schedule.reduction) rungs.push_back(e);
  rungs.push_back(epochs);
  return rungs;
}

std::vector<int64_t> promote(const std::vector<int64_t>& trials, const std::vector<double>& figures,
                             int64_t reduction, bool minimize) {
  std::vector<size_t> ranked(trials.size());
  std::iota(ranked.begin(), ranked.end(), 0);
  std::stable_sort(ranked.begin(), ranked.end(), [&](size_t a, size_t b) {
    return better_figure(figures[a], figures[b], minimize);
  });
  const size_t keep = std::max<size_t>(1, trials.size() / static_cast<size_t>(reduction));
  std::vector<int64_t> promoted;
  for (size_t k = 0; k < keep && k < ranked.size(); ++k) promoted.push_back(trials[ranked[k]]);
  std::sort(promoted.begin(), promoted.end());
  return promoted;
}

}  // namespace trainyard
