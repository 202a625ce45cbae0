// The schedules that pause trials (sweep.search.schedule, docs/search.md), as pure functions of
// the figures at each rung, so a study walked again after a kill takes the same decisions.
//
// Successive halving (Jamieson and Talwalkar, AISTATS 2016; synchronous, as in Li et al.'s
// Hyperband): every trial trains to the first rung; at each rung the best 1/reduction of those
// that reached it go on to the next, the rest are paused with their checkpoint kept. A decision is
// taken when its rung's cohort is complete, from the figures at the rung's epoch, ties to the
// earlier trial — so it is the same whatever order the trials finished in.
//
// ASHA (Li et al., MLSys 2020): the same rungs, but a trial goes on as soon as it is in the best
// 1/reduction of the trials that have reached its rung so far; a paused trial goes on later when
// the rung has grown enough to hold it there.
//
// Median (Optuna's MedianPruner): a trial is checked every interval_epochs from grace_epochs on,
// and paused when its best figure so far is worse than the median of the completed trials'
// figures at that epoch.
#pragma once

#include <cstdint>
#include <optional>
#include <set>
#include <vector>

#include "runner/config/search_space.h"

namespace trainyard {

// The epochs each rung (a median schedule: each check) trains to, the last being `epochs`:
// halving, grace, grace x reduction, ... while below `epochs` (1, 3, 9 for grace 1, reduction 3,
// 9 epochs; 1, 3, 4 for 4 epochs); median, grace, grace + interval, ... Off: {epochs}.
std::vector<int64_t> rung_epochs(const StudySchedule& schedule, int64_t epochs);

// Of the trials that reached a rung (their indices and figures there, in trial order), those that
// go on: the best max(1, floor(n / reduction)), in trial order.
std::vector<int64_t> promote(const std::vector<int64_t>& trials, const std::vector<double>& figures,
                             int64_t reduction, bool minimize);

// One ASHA rung: the trials that reached it, in the order they did, their figures there, and
// those already sent on from it.
struct AshaRung {
  std::vector<int64_t> trials;
  std::vector<double> figures;
  std::set<int64_t> promoted;
};

struct Promotion {
  size_t rung = 0;  // from this rung to the next
  int64_t trial = 0;
};

// ASHA's next job when one is free (the paper's get_job): from the highest rung below the top,
// the best trial of the rung's best floor(n / reduction) not yet sent on, ties to the one there
// first; a trial with no figure (failed) never goes on. nullopt: none, so a new trial starts.
// `draining` (no new trial will come: the trials are all proposed, or the time budget is spent):
// at least one of each rung's may go on, so the best climbs to the last rung as synchronous
// halving's would.
std::optional<Promotion> asha_promotion(const std::vector<AshaRung>& rungs, int64_t reduction,
                                        bool minimize, bool draining);

// The median of `figures` (those that are numbers; NaN when none), as numpy's nanmedian.
double median_figure(std::vector<double> figures);

// Whether a trial whose best figure so far is `best` goes on past a check where the completed
// trials' median is `median` (Optuna's MedianPruner: a trial with no figure is paused; no median,
// no judgement; a tie goes on).
bool beats_median(double best, double median, bool minimize);

}  // namespace trainyard
