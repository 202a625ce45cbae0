#include "runner/config/sweep.h"

#include <set>

#include <fmt/format.h>

#include "common/text.h"
#include "runner/config/layering.h"
#include "runner/config/search_space.h"

namespace trainyard {

namespace {

// What a sweep may vary: a run's settings. (A variant setting sweep or report gets its own
// message.)
const std::vector<std::string> kRunSections = {"model", "dataset", "train", "runtime"};
const std::vector<std::string> kVariantKeys = {"model",   "dataset", "train",
                                               "runtime", "sweep",   "report"};

std::string grid_label(const std::string& key) { return split(key, '.').back(); }

}  // namespace

std::vector<Variant> expand_sweep(const ConfigTree& sweep, Diagnostics& diagnostics,
                                  int64_t max_runs, int64_t repeats) {
  report_mapping_for_value(sweep, "variants", "sweep.variants", "a non-empty list of {name, set}",
                           diagnostics);
  std::vector<Variant> variants;
  std::set<std::string> names;
  if (const ConfigValue* list = sweep.find("variants")) {
    if (!list->node.IsSequence() || list->node.size() == 0) {
      diagnostics.error(list->origin, "'sweep.variants' must be a non-empty list of {name, set}");
    } else {
      for (const auto& item : list->node) {
        Origin origin = origin_of(item, list->origin.file);
        if (!item.IsMap()) {
          diagnostics.error(origin, "each sweep variant must be a mapping with 'name' and 'set'");
          continue;
        }
        Variant variant;
        for (auto it = item.begin(); it != item.end(); ++it) {
          std::string key = it->first.Scalar();
          if (key == "name") {
            variant.name = it->second.IsScalar() ? it->second.Scalar() : "";
          } else if (key == "set") {
            if (it->second.IsMap())
              flatten_into(variant.overrides, it->second, list->origin.file);
            else if (!it->second.IsNull())
              diagnostics.error(origin_of(it->second, list->origin.file),
                                "'set' must be a mapping of dotted keys to values");
          } else if (key != "description") {
            std::string guess = closest_match(key, {"name", "set", "description"});
            diagnostics.error(origin_of(it->first, list->origin.file),
                              fmt::format("unknown key '{}' in a sweep variant{}", key,
                                          guess.empty() ? "; expected name, set, description"
                                                        : " (did you mean '" + guess + "'?)"));
          }
        }
        if (variant.name.empty()) {
          diagnostics.error(origin, "sweep variant without a 'name'");
          continue;
        }
        if (!names.insert(variant.name).second)
          diagnostics.error(origin, fmt::format("duplicate sweep variant name '{}'", variant.name));
        expand_component_shorthand(variant.overrides);
        report_unknown_keys(variant.overrides, kVariantKeys, "", "a sweep variant's 'set'",
                            diagnostics);
        for (const auto& [key, value] : variant.overrides.entries())
          if (key_is_under(key, "sweep") || key_is_under(key, "report"))
            diagnostics.error(value.key_origin, fmt::format("a variant cannot set '{}'", key));
        variants.push_back(std::move(variant));
      }
    }
  }
  if (variants.empty()) variants.push_back({"", {}});

  ConfigTree grid = sweep.subtree("grid");
  if (const ConfigValue* value = sweep.find("grid"))
    diagnostics.error(value->origin, "'sweep.grid' must map dotted keys to lists of values");
  report_unknown_keys(grid, kRunSections, "",
                      "'sweep.grid' (its keys are a run's settings, e.g. train.batch_size)",
                      diagnostics);
  // Count first: a grid of ten keys of ten values each is ten billion runs, which must be an error,
  // not an out-of-memory.
  double runs =
      static_cast<double>(variants.size()) * static_cast<double>(std::max<int64_t>(1, repeats));
  std::vector<std::string> factors = {std::to_string(variants.size()) + " variant(s)"};
  for (const auto& [key, value] : grid.entries())
    if (value.node.IsSequence() && value.node.size() > 0) {
      runs *= static_cast<double>(value.node.size());
      factors.push_back(fmt::format("{} values of {}", value.node.size(), key));
    }
  if (repeats > 1) factors.push_back(fmt::format("{} repeats", repeats));
  if (runs > static_cast<double>(max_runs)) {
    const ConfigValue* where =
        grid.entries().empty() ? sweep.find("variants") : &grid.entries().begin()->second;
    diagnostics.error(
        where ? where->key_origin : Origin{},
        fmt::format("the sweep expands to {:.0f} runs ({}), more than the limit of {}; shrink "
                    "the sweep, or raise the limit with --max-runs N",
                    runs, join(factors, " x "), max_runs));
    for (auto& variant : variants)
      if (variant.name.empty()) variant.name = "default";
    return variants;
  }
  for (const auto& [key, value] : grid.entries()) {
    if (!value.node.IsSequence() || value.node.size() == 0) {
      diagnostics.error(value.origin,
                        fmt::format("'sweep.grid.{}' must be a non-empty list of values", key));
      continue;
    }
    std::vector<Variant> expanded;
    for (const auto& variant : variants) {
      for (const auto& item : value.node) {
        Variant v = variant;
        std::string label =
            grid_label(key) + "=" + (item.IsScalar() ? item.Scalar() : yaml_flow_text(item));
        v.name = v.name.empty() ? label : v.name + "/" + label;
        ConfigTree one;
        one.set(key, {item, origin_of(item, value.origin.file), value.key_origin});
        expand_component_shorthand(one);
        v.overrides.merge(one);
        expanded.push_back(std::move(v));
      }
    }
    variants = std::move(expanded);
  }
  for (auto& variant : variants)
    if (variant.name.empty()) variant.name = "default";
  return variants;
}

const OptionSet<SweepOptions>& sweep_option_set() {
  static const OptionSet<SweepOptions> set = [] {
    OptionSet<SweepOptions> s;
    s.add("repeats", &SweepOptions::repeats,
          "runs of every variant, with seeds train.seed, train.seed + 1, ...; the report shows "
          "their median and spread",
          between(1, 1000))
        .add("order", &SweepOptions::order,
             "interleaved: the repeats in rounds of every variant, which the report pairs so that "
             "what drifts between rounds cancels out; grouped: each variant's back to back");
    return s;
  }();
  return set;
}

SweepOptions decode_sweep_options(const ConfigTree& sweep, Diagnostics& diagnostics) {
  return sweep_option_set().decode(sweep, "sweep", "section 'sweep'", Origin{}, diagnostics,
                                   {"variants", "grid", "search"});
}

std::vector<OptionInfo> describe_sweep_options() {
  std::vector<OptionInfo> options = {
      {"variants", "list", "", "",
       "named variants: [{name: bf16, set: {runtime.precision: bf16-mixed}}, ...]; each sets "
       "dotted keys of model, dataset, train, runtime"},
      {"grid", "map", "", "",
       "dotted key -> list of values; every combination, times every variant "
       "(grid: {train.batch_size: [16, 32]})"}};
  for (OptionInfo& info : sweep_option_set().describe()) options.push_back(std::move(info));
  for (OptionInfo& info : describe_search_options()) options.push_back(std::move(info));
  return options;
}

}  // namespace trainyard
