// The report's statistical decisions (reports/comparison.cpp), made once per section and stored on
// it: speedups, verdicts, the answer and each column's best. Called by build_report.
#pragma once

#include "reports/report.h"

namespace trainyard {

// Against the section's baseline (when it has one): each row's speedups (metrics "speedup" and,
// with report.target, "target_speedup"), its verdict and the section's answer; and in every
// section the rows holding each shown column's best value beyond noise (VariantRow::best).
void compare_with_baseline(ExperimentReport& section);

}  // namespace trainyard
