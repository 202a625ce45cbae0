// The `report` section of an experiment file: how its section of a report looks. Declared here,
// beside the reports that read it; the experiment loader validates it and the store keeps it.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "common/metrics.h"
#include "trainyard/options.h"

namespace trainyard {

struct ReportOptions {
  std::string title;
  std::string baseline;  // variant the speedups are relative to; "" = the first variant
  std::vector<std::string> metrics = {"train_seconds", "speedup", "test_acc", "peak_memory_bytes",
                                      "samples_per_s"};
  // report.target: the quality a run must reach, for time-to-target. "" = no target.
  std::string target_metric;  // val_acc (reached at or above the value) or val_loss (at or below)
  double target_value = 0;
  // report.quality_margin: the most quality a faster variant may lose and still be the answer —
  // test accuracy in points as a fraction (0.01: 1 pt), a language model's test perplexity as a
  // ratio (0.01: 1%). Non-inferiority: the interval of the difference must clear -margin.
  double quality_margin = 0.01;
  // report.price_per_device_hour: one price for every device (key ""), or one per device: a key
  // names the devices whose name contains it (case-insensitively; the longest such key wins),
  // `cpu` the runs on the CPU, `default` any other. Empty: no cost.
  std::map<std::string, double> prices{};

  // report.target's metric, as the type every watched figure has (target_metric is its word, as
  // written and stored); has_target() first.
  bool has_target() const { return watched_metric(target_metric).has_value(); }
  WatchedMetric target() const { return *watched_metric(target_metric); }
  // Whether `value` of the target's metric reaches it.
  bool reaches_target(double value) const { return reaches(target(), value, target_value); }
  // The price of a device-hour of `device_name` (`device_type`: "cpu", "cuda", or "" when the
  // run did not record it); nullopt when no key matches.
  std::optional<double> price_for(const std::string& device_name,
                                  const std::string& device_type) const;
};

// The options the OptionSet declares (title, baseline, metrics, target.*). The price, which is a
// number or a mapping, is read by decode_report_options.
const OptionSet<ReportOptions>& report_option_set();

// The section (keys relative to "report") decoded, price included, with problems in `diagnostics`
// where they are written.
ReportOptions decode_report_options(const ConfigTree& section, const Origin& section_origin,
                                    Diagnostics& diagnostics);
// The section as the store keeps it: YAML text that decode_report_options reads back.
std::string encode_report_options(const ReportOptions& options);
// What `trainyard list report` prints: the OptionSet's options and the price.
std::vector<OptionInfo> describe_report_options();

}  // namespace trainyard
