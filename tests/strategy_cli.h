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

// Trains `strategy` on 2 ranks with gradient accumulation, clipping and train.save_weights — in
// fp32, bf16-mixed, 16-mixed and bf16-true — plus `extra_variants`, beside one process with the
// same global batch ("single-8") and the model untrained ("untrained": a learning rate of 1e-30,
// which moves no float32 weight). Every run
// completes and saves its weights; the fp32 run's test loss and training loss are one process's
// within 1e-4; every trained run's test loss is below the untrained one's; each precision's
// forward computed in its dtype (the run's forward_dtype) and its test loss is within 0.05 of
// fp32's without equalling it. Returns the test losses by variant for the caller's own checks.
std::map<std::string, double> expect_composes_with_precisions(
    const TempDir& dir, const std::string& db, const std::string& strategy,
    const std::vector<std::string>& extra_variants = {});

}  // namespace trainyard::testing
