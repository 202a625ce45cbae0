// What a study tries next. Each sampler is a pure function of the space, the study's seed, the
// trial's index and (TPE) the results of the trials before it in trial order — never of which
// trial finished first or of the clock — so a study run again, killed and continued, or spread
// over processes proposes the same trials. The random numbers are this file's own (SplitMix64,
// Box–Muller), not <random>'s distributions, whose output the C++ standard leaves to each library.
#pragma once

#include <cstdint>
#include <vector>

#include "runner/config/search_space.h"

namespace trainyard {

// A trial's result as a sampler sees it: its values and its figure (NaN or infinite: it failed,
// and counts as the worst).
struct Observation {
  TrialValues values;
  double value = 0;
  // The second objective of a study with two (sweep.search.metric: [val_acc, train_seconds]),
  // lower is better; infinite: never reached (time_to_target). Unread with one objective.
  double cost = 0;
};

// Trial `index` of a random search: each parameter drawn from its prior.
TrialValues propose_random(const std::vector<SearchParameter>& space, uint64_t seed, int64_t index);

// Trial `index` of a grid: the index-th combination of the choices, the last parameter varying
// fastest (as sweep.grid expands).
TrialValues propose_grid(const std::vector<SearchParameter>& space, int64_t index);

// The Tree-structured Parzen Estimator (Bergstra et al., NeurIPS 2011), as Optuna's TPESampler
// does it by default for one objective (multivariate, Falkner et al. 2018): the first
// kStartupTrials random; then the finite figures (failed trials left out) split into the best
// gamma(n) = min(ceil(n/10), 25) and the rest, the density of each part a Parzen mixture of one
// kernel per trial — a product over the parameters of truncated Gaussians (bandwidths from the
// neighbours' distances, clipped as Optuna's "magic clip"; whole numbers scored by the mass of
// their step) and of distributions over a choice's values — plus a prior kernel, weighted as
// Optuna's default_weights; of 24 candidates drawn from the good density the one with the highest
// ratio good/bad is proposed. `observations` are the earlier trials', in trial order. A
// conditional space goes in groups, as Optuna's group=True: the parameters every trial has first,
// from every trial; then the chosen branch's parameters from the trials that chose that branch.
inline constexpr int64_t kStartupTrials = 10;
inline constexpr int kTpeCandidates = 24;
// With `two_objectives` (the figure, by `minimize`, and the cost, lower is better) TPE is MOTPE
// (Ozaki et al., GECCO 2020; Optuna's TPESampler with several objectives): the good part is the
// best nondomination ranks, the rank that straddles gamma(n) cut by each point's hypervolume
// contribution.
TrialValues propose_tpe(const std::vector<SearchParameter>& space, uint64_t seed, int64_t index,
                        const std::vector<Observation>& observations, bool minimize,
                        bool two_objectives = false);

// Whether `a` is a better figure than `b` (a failure, NaN or infinite, is worse than any figure).
bool better_figure(double a, double b, bool minimize);

}  // namespace trainyard
