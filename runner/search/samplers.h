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
};

// Trial `index` of a random search: each parameter drawn from its prior.
TrialValues propose_random(const std::vector<SearchParameter>& space, uint64_t seed, int64_t index);

// Trial `index` of a grid: the index-th combination of the choices, the last parameter varying
// fastest (as sweep.grid expands).
TrialValues propose_grid(const std::vector<SearchParameter>& space, int64_t index);

// The Tree-structured Parzen Estimator (Bergstra et al., NeurIPS 2011), after Optuna's
// TPESampler and its defaults: the first kStartupTrials random; then the finite figures (failed
// trials left out) split into the best gamma(n) = min(ceil(n/10), 25) and the rest, each
// parameter's density over each part a Parzen mixture of truncated Gaussians (plus a prior one
// over the whole range; bandwidths from the neighbours' distances, clipped as Optuna's "magic
// clip"), and of 24 candidates drawn from the good density the one with the highest ratio
// good/bad is proposed. Parameters are modelled independently (Optuna's default, univariate).
// Where it differs from Optuna (docs/search.md): every observation weighs the same (Optuna
// lowers the oldest past 25), a choice's density is its count plus 1/k (Optuna spreads its prior
// over each observation's kernel), and a whole number is scored by the density at it (Optuna: the
// mass of its step). `observations` are the earlier trials', in trial order.
inline constexpr int64_t kStartupTrials = 10;
inline constexpr int kTpeCandidates = 24;
TrialValues propose_tpe(const std::vector<SearchParameter>& space, uint64_t seed, int64_t index,
                        const std::vector<Observation>& observations, bool minimize);

// Whether `a` is a better figure than `b` (a failure, NaN or infinite, is worse than any figure).
bool better_figure(double a, double b, bool minimize);

}  // namespace trainyard
