// Sweep expansion: an experiment's `sweep` section — named `variants`, each a set of overrides,
// times every combination of the `grid`'s lists — into the variants to run, each with its name
// ("bf16", "fsdp/batch_size=32") and its overrides. Internal to runner/config.
#pragma once

#include <string>
#include <vector>

#include "trainyard/config_tree.h"
#include "trainyard/diagnostics.h"

namespace trainyard {

struct Variant {
  std::string name;
  ConfigTree overrides;
};

// The variants of `sweep` (the section without its prefix); one unnamed ("default") when empty.
// A sweep whose runs (variants x grid combinations x `repeats`) would exceed `max_runs` is an error
// counted before anything is expanded, and its grid is left unexpanded.
std::vector<Variant> expand_sweep(const ConfigTree& sweep, Diagnostics& diagnostics,
                                  int64_t max_runs, int64_t repeats);

// sweep.repeats: how many times every variant runs, with seeds train.seed, train.seed + 1, ...
// (1 when not set).
int64_t sweep_repeats(const ConfigTree& sweep, Diagnostics& diagnostics);

// sweep.order: true for interleaved (the default), false for grouped (Experiment::interleaved).
bool sweep_interleaved(const ConfigTree& sweep, Diagnostics& diagnostics);

}  // namespace trainyard
