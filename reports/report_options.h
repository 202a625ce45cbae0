// The `report` section of an experiment file: how its section of a report looks. Declared here,
// beside the reports that read it; the experiment loader validates it and the store keeps it.
#pragma once

#include <string>
#include <vector>

#include "config/options.h"

namespace trainyard {

struct ReportOptions {
  std::string title;
  std::string baseline;  // variant the speedups are relative to; "" = the first variant
  std::vector<std::string> metrics = {"train_seconds", "speedup", "test_acc", "peak_memory_bytes",
                                      "samples_per_s"};
};

const OptionSet<ReportOptions>& report_option_set();

}  // namespace trainyard
