// Sweep expansion: an experiment's `sweep` section — named `variants`, each a set of overrides,
// times every combination of the `grid`'s lists — into the variants to run, each with its name
// ("bf16", "fsdp/batch_size=32") and its overrides; and the section's own options (repeats, order),
// which `trainyard list sweep` shows with sweep.search's.
#pragma once

#include <string>
#include <vector>

#include "trainyard/config_tree.h"
#include "trainyard/diagnostics.h"
#include "trainyard/options.h"

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

// sweep.order: the repeats in rounds of every variant (interleaved), or each variant's back to
// back (grouped).
enum class SweepOrder { interleaved, grouped };
template <>
struct OptionWords<SweepOrder> {
  static constexpr std::pair<const char*, SweepOrder> words[] = {
      {"interleaved", SweepOrder::interleaved}, {"grouped", SweepOrder::grouped}};
};

// sweep's own values; its lists and mappings (variants, grid, search) are read by expand_sweep
// and decode_search.
struct SweepOptions {
  int64_t repeats = 1;
  SweepOrder order = SweepOrder::interleaved;
};
const OptionSet<SweepOptions>& sweep_option_set();
SweepOptions decode_sweep_options(const ConfigTree& sweep, Diagnostics& diagnostics);

// What `trainyard list sweep` shows: every key of the section, sweep.search's and its schedule's
// included, with its type, default and rule.
std::vector<OptionInfo> describe_sweep_options();

}  // namespace trainyard
