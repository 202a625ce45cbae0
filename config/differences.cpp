#include "config/differences.h"

#include <algorithm>
#include <cstdint>
#include <stdexcept>

namespace trainyard {

namespace {

using FlatConfig = std::map<std::string, std::string>;

// The section of the innermost component above `key` whose `name` the two configurations give
// differently ("runtime.strategy" for "runtime.strategy.bucket_mb" under ddp against single);
// empty when there is none.
std::string renamed_section(const std::string& key, const FlatConfig& mine,
                            const FlatConfig& base) {
  for (auto dot = key.rfind('.'); dot != std::string::npos && dot > 0;
       dot = key.rfind('.', dot - 1)) {
    const std::string section = key.substr(0, dot), name_key = section + ".name";
    if (name_key == key) continue;
    const auto a = mine.find(name_key), b = base.find(name_key);
    if (a != mine.end() && b != base.end() && a->second != b->second) return section;
  }
  return "";
}

// The component whose own default `key` = `value` in `config` is, under a renamed component
// ("ddp" for runtime.strategy.backend: auto against single); "" when it is not such a default.
std::string renamed_components_default(const std::string& key, const std::string& value,
                                       const FlatConfig& config, const FlatConfig& other,
                                       const OptionDefault& option_default) {
  if (!option_default) return "";
  const std::string section = renamed_section(key, config, other);
  if (section.empty()) return "";
  const std::string& name = config.at(section + ".name");
  const auto value_default = option_default(section, name, key.substr(section.size() + 1));
  return value_default && *value_default == value ? name : "";
}

// An integer setting of `config`, when it has one.
std::optional<int64_t> integer_of(const FlatConfig& config, const std::string& key) {
  const auto it = config.find(key);
  if (it == config.end()) return std::nullopt;
  try {
    size_t used = 0;
    const int64_t value = std::stoll(it->second, &used);
    return used == it->second.size() ? std::optional(value) : std::nullopt;
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

// The dtypes runtime.precision means, by Lightning's naming of precisions: "<type>-true" keeps
// the weights and computes in <type>; "<type>-mixed" keeps float32 weights and computes under
// autocast in <type>. A name of another form (a plugin's) derives nothing.
void add_precision_dtypes(FlatConfig& config) {
  const auto precision = config.find("runtime.precision");
  if (precision == config.end()) return;
  const std::string& name = precision->second;
  const size_t dash = name.rfind('-');
  if (dash == std::string::npos) return;
  const std::string type = name.substr(0, dash), mode = name.substr(dash + 1);
  const std::string dtype = type == "32"     ? "float32"
                            : type == "bf16" ? "bfloat16"
                            : type == "16"   ? "float16"
                                             : "";
  if (dtype.empty() || (mode != "true" && mode != "mixed")) return;
  config["derived.weights_dtype"] = mode == "true" ? dtype : "float32";
  config["derived.compute_dtype"] = dtype;
}

// `config` with the settings a user reasons with that no key holds: the dtypes of the weights and
// of the computation, the global batch (devices × batch × gradient accumulation: the samples of
// one optimizer step) and, where the dataset says its training size, the optimizer steps of an
// epoch.
FlatConfig with_derived_settings(FlatConfig config) {
  add_precision_dtypes(config);
  const auto batch = integer_of(config, "train.batch_size");
  const auto devices = integer_of(config, "runtime.devices");
  const auto accumulation = integer_of(config, "train.grad_accum");
  if (!batch || !devices || *batch < 1 || *devices < 1) return config;
  const int64_t per_step = *devices * *batch,
                global = per_step * std::max<int64_t>(accumulation.value_or(1), 1);
  config["derived.global_batch"] = std::to_string(global);
  const auto samples = integer_of(config, "dataset.train_size");
  const auto limit = integer_of(config, "train.limit_train_batches");
  if (samples && *samples > 0) {
    // As the loader and trainer count them: each rank's share, whole batches only, a last
    // partial accumulation still stepping.
    int64_t batches = *samples / *devices / *batch;
    if (limit && *limit > 0) batches = std::min(batches, *limit);
    const int64_t accumulate = std::max<int64_t>(accumulation.value_or(1), 1);
    config["derived.optimizer_steps_per_epoch"] =
        std::to_string((batches + accumulate - 1) / accumulate);
  }
  return config;
}

}  // namespace

std::vector<ConfigDifference> config_differences(const FlatConfig& mine_written,
                                                 const FlatConfig& base_written,
                                                 const OptionDefault& option_default) {
  const FlatConfig mine = with_derived_settings(mine_written);
  const FlatConfig base = with_derived_settings(base_written);
  std::map<std::string, ConfigDifference> found;  // sorted by key
  for (const auto& [key, value] : mine) {
    const auto it = base.find(key);
    if (it != base.end() && it->second == value) continue;
    // An option only one side's component has is a difference too — the new component's default
    // now applies, the old one's option is gone — marked as a default where it is one. One both
    // have differs whatever its value's origin (adamw's default weight_decay against adam's).
    ConfigDifference difference{key, value, it == base.end() ? "" : it->second, true,
                                it != base.end()};
    if (it == base.end())
      difference.mine_default_of =
          renamed_components_default(key, value, mine, base, option_default);
    found[key] = difference;
  }
  for (const auto& [key, value] : base)
    if (!mine.count(key))
      found[key] =
          ConfigDifference{key,
                           "",
                           value,
                           false,
                           true,
                           "",
                           renamed_components_default(key, value, base, mine, option_default)};
  std::vector<ConfigDifference> out;
  for (auto& [key, difference] : found) out.push_back(std::move(difference));
  return out;
}

std::string describe_difference(const ConfigDifference& d) {
  auto side = [](bool has, const std::string& value, const std::string& default_of) {
    if (!has) return std::string("not set");
    const std::string shown = value.empty() ? "\"\"" : value;
    return default_of.empty() ? shown : shown + ", " + default_of + "'s default";
  };
  return d.key + ": " + side(d.has_mine, d.mine, d.mine_default_of) +
         " (baseline: " + side(d.has_base, d.base, d.base_default_of) + ")";
}

}  // namespace trainyard
