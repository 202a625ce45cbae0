#include "reports/report_options.h"

#include "common/metrics.h"

namespace trainyard {

const OptionSet<ReportOptions>& report_option_set() {
  static const OptionSet<ReportOptions> set = [] {
    OptionSet<ReportOptions> s;
    std::vector<std::string> metrics = metric_keys(MetricScope::final);
    for (const auto& key : metric_keys(MetricScope::derived)) metrics.push_back(key);
    s.add("title", &ReportOptions::title, "heading of the experiment's section in reports")
        .add("baseline", &ReportOptions::baseline,
             "variant that speedups are relative to; empty = the first variant")
        .add("metrics", &ReportOptions::metrics, "columns of the results table", one_of(metrics));
    return s;
  }();
  return set;
}

}  // namespace trainyard
