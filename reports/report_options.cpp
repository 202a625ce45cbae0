#include "reports/report_options.h"

#include <cctype>

#include <fmt/format.h>

#include "common/metrics.h"
#include "common/text.h"

namespace trainyard {

namespace {

constexpr const char* kPriceKey = "price_per_device_hour";

// report.price_per_device_hour: a number (every device's price), or a mapping from device names
// to numbers. Each problem where it is written.
std::map<std::string, double> decode_prices(const ConfigTree& section, Diagnostics& diagnostics) {
  std::map<std::string, double> prices;
  const std::string name = std::string("report.") + kPriceKey;
  auto price = [&](const ConfigValue& value, const std::string& key) {
    std::string expected;
    double number = 0;
    if (!decode_value(value.node, number, expected) || !(number >= 0)) {
      diagnostics.error(value.origin,
                        fmt::format("'{}' must be a number ≥ 0 (a price per device-hour), got {}",
                                    key, describe_yaml_value(value.node)));
      return;
    }
    prices[key == name ? "" : key.substr(name.size() + 1)] = number;
  };
  if (const ConfigValue* value = section.find(kPriceKey)) {
    if (!value->node.IsNull()) price(*value, name);
    return prices;
  }
  const ConfigTree by_device = section.subtree(kPriceKey);
  for (const auto& [device, value] : by_device.entries()) price(value, name + "." + device);
  return prices;
}

}  // namespace

std::optional<double> ReportOptions::price_for(const std::string& device_name,
                                               const std::string& device_type) const {
  if (auto all = prices.find(""); all != prices.end()) return all->second;
  if (device_type == "cpu")
    if (auto cpu = prices.find("cpu"); cpu != prices.end()) return cpu->second;
  const std::string name = lower(device_name);
  // As a word of the name: "L4" prices an "NVIDIA L4", not an "NVIDIA L40S".
  auto names = [&](const std::string& key) {
    auto is_word_char = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) != 0; };
    for (size_t at = name.find(key); at != std::string::npos; at = name.find(key, at + 1)) {
      const bool starts = at == 0 || !is_word_char(name[at - 1]);
      const bool ends = at + key.size() == name.size() || !is_word_char(name[at + key.size()]);
      if (starts && ends) return true;
    }
    return false;
  };
  std::optional<double> found;
  size_t longest = 0;
  for (const auto& [key, price] : prices) {
    if (key == "cpu" || key == "default" || key.empty()) continue;
    if (names(lower(key)) && key.size() > longest) {
      found = price;
      longest = key.size();
    }
  }
  if (found) return found;
  if (auto fallback = prices.find("default"); fallback != prices.end()) return fallback->second;
  return std::nullopt;
}

const OptionSet<ReportOptions>& report_option_set() {
  static const OptionSet<ReportOptions> set = [] {
    OptionSet<ReportOptions> s;
    std::vector<std::string> metrics = metric_keys(MetricScope::final);
    for (const auto& key : metric_keys(MetricScope::derived)) metrics.push_back(key);
    s.add("title", &ReportOptions::title, "heading of the experiment's section in reports")
        .add("baseline", &ReportOptions::baseline,
             "variant that speedups are relative to; empty = the first variant")
        .add("metrics", &ReportOptions::metrics, "columns of the results table", one_of(metrics))
        .add("target.metric", &ReportOptions::target_metric,
             "report.target: time-to-target is the training time (validation included) until "
             "the first validation whose val_acc or val_f1 (macro-F1) is at least, or val_loss at "
             "most, target.value; empty = no target",
             one_of({"", metric::kValAcc, metric::kValF1, metric::kValLoss}))
        .add("target.value", &ReportOptions::target_value,
             "report.target: the value to reach (val_acc and val_f1 as a fraction, 0-1)")
        .add("quality_margin", &ReportOptions::quality_margin,
             "the most quality a faster variant may lose and still be the answer: test accuracy "
             "as a fraction (0.01 = 1 point), test perplexity as a ratio (0.01 = 1%); the "
             "interval of its difference from the baseline must lie above -margin "
             "(non-inferiority)",
             between(0, 1))
        .check([](const ReportOptions& o) -> std::optional<std::string> {
          if (!o.has_target()) return std::nullopt;
          if (!lower_is_better(o.target()) && (o.target_value <= 0 || o.target_value > 1))
            return fmt::format(
                "target.value {} is no {} to reach; write a fraction in (0, 1], e.g. 0.9",
                o.target_value, o.target_metric);
          if (lower_is_better(o.target()) && !(o.target_value > 0))
            return fmt::format(
                "target.value {} is no val_loss a run reaches; write the loss to get below, e.g. "
                "0.35",
                o.target_value);
          return std::nullopt;
        });
    return s;
  }();
  return set;
}

ReportOptions decode_report_options(const ConfigTree& section, const Origin& section_origin,
                                    Diagnostics& diagnostics) {
  ReportOptions options = report_option_set().decode(section, "report", "section 'report'",
                                                     section_origin, diagnostics, {kPriceKey});
  options.prices = decode_prices(section, diagnostics);
  // A value without a metric would be silently no target.
  if (options.target_metric.empty())
    if (const ConfigValue* value = section.find("target.value"))
      diagnostics.error(value->origin,
                        "'report.target.value' needs 'report.target.metric' (val_acc, val_f1 or "
                        "val_loss)");
  return options;
}

std::string encode_report_options(const ReportOptions& options) {
  ConfigTree tree = report_option_set().encode(options, "", {});
  for (const auto& [device, price] : options.prices)
    tree.set(device.empty() ? kPriceKey : std::string(kPriceKey) + "." + device,
             {YAML::Node(price), {}, {}});
  return tree.to_yaml_text();
}

std::vector<OptionInfo> describe_report_options() {
  std::vector<OptionInfo> options = report_option_set().describe();
  options.push_back({kPriceKey, "float or map", "-", "≥ 0",
                     "cost per device-hour: one number, or per device name "
                     "({H100: 2.5, cpu: 0.05, default: 1}); a run costs its training time x its "
                     "ranks x the price"});
  return options;
}

}  // namespace trainyard
