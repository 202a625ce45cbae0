// Successive halving (Jamieson and Talwalkar, AISTATS 2016; synchronous, as in Li et al.'s
// Hyperband): every trial trains to the first rung; at each rung the best 1/reduction of those
// that reached it go on to the next, the rest are paused with their checkpoint kept. A decision is
// taken when its rung's cohort is complete, from the figures at the rung's epoch, ties to the
// earlier trial — so it is the same whatever order the trials finished in.
#pragma once

#include <cstdint>
#include <vector>

#include "runner/config/search_space.h"

namespace trainyard {

// The epochs each rung trains to: grace, grace x reduction, ... while below `epochs`, then
// `epochs` (1, 3, 9 for grace 1, reduction 3, 9 epochs; 1, 3, 4 for 4 epochs). Off: {epochs}.
std::vector<int64_t> rung_epochs(const HalvingSchedule& schedule, int64_t epochs);

// Of the trials that reached a rung (their indices and figures there, in trial order), those that
// go on: the best max(1, floor(n / reduction)), in trial order.
std::vector<int64_t> promote(const std::vector<int64_t>& trials, const std::vector<double>& figures,
                             int64_t reduction, bool minimize);

}  // namespace trainyard
