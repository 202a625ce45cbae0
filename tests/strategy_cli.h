// The end-to-end checks every multi-process strategy passes (ddp_test, zero2_test, fsdp_test): on 2
// and 4 Gloo ranks it trains as one process does with the same global batch, holds the share of the
// training state it promises, and composes with the mixed precisions, gradient accumulation,
// clipping and saving the whole model.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "tests/cli_support.h"

namespace trainyard::testing {

// Which parts of the training state a strategy splits over its ranks (the rest every rank holds
// whole).
struct Sharding {
  bool parameters = false;
  bool gradients_and_optimizer_state = false;
};

// Trains `strategy` on 2 and 4 ranks, plus `extra_variants` (YAML list items under sweep.variants),
// against one process with the global batch of 16: every run takes the same steps, and its test
// loss and last training loss agree within 1e-4 (float summation order); per-rank state bytes are
// whole, or 1/N within 2% where `sharding` says.
void expect_ranks_match_one_process(const TempDir& dir, const std::string& db,
                                    const std::string& strategy, Sharding sharding,
                                    const std::vector<std::string>& extra_variants = {});

// Trains `strategy` on 2 ranks in bf16-mixed, 16-mixed and bf16-true with gradient accumulation,
// clipping and train.save_weights, plus `extra_variants`: every run completes, saves its weights,
// and ends within 0.1 of one process's test loss (0.1: lower precisions are close, not equal).
// Returns the test losses by variant ("single-8" is the one process) for the caller's own checks.
std::map<std::string, double> expect_composes_with_precisions(
    const TempDir& dir, const std::string& db, const std::string& strategy,
    const std::vector<std::string>& extra_variants = {});

}  // namespace trainyard::testing
