#include "reports/report.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <optional>
#include <set>

#include <fmt/format.h>

#include "common/clock.h"
#include "common/metrics.h"
#include "common/text.h"
#include "config/config_tree.h"
#include "config/options.h"
#include "reports/statistics.h"

namespace trainyard {

namespace {

ReportOptions stored_report_options(const ExperimentRecord& experiment) {
  ConfigTree tree;
  try {
    YAML::Node root = YAML::Load(experiment.report_yaml);
    if (root.IsMap()) flatten_into(tree, root, "<stored report settings>");
  } catch (const YAML::Exception&) {
    // Unreadable settings fall back to the defaults; the numbers are still right.
  }
  Diagnostics ignored;
  return decode_report_options(tree, {}, ignored);
}

RepeatRun repeat_run(Store& store, const RunRecord& run) {
  RepeatRun out{.run_id = run.id, .repeat = run.repeat, .status = run.status};
  out.log_path = run.environment.log_path;
  if (const std::string stem = run_files_stem(run); !stem.empty()) out.config_path = stem + ".yaml";
  out.steps = store.step_metrics(run.id);
  out.epochs = store.epoch_metrics(run.id);
  return out;
}

// A completed run's figures: its final metrics and what the report derives from its records
// (`repeat`, `attributes`) — time-to-target (when it reached report.target), device-hours, and
// with prices its cost.
std::map<std::string, double> run_figures(Store& store, const RunRecord& run,
                                          const RepeatRun& repeat,
                                          const std::map<std::string, std::string>& attributes,
                                          const ReportOptions& options) {
  std::map<std::string, double> figures = store.final_metrics(run.id);
  if (run.status != RunStatus::completed) return figures;
  if (options.has_target())
    for (const Validation& validation : validations(repeat)) {
      auto value = validation.values.find(options.target_metric);
      if (value != validation.values.end() && options.reaches_target(value->second)) {
        figures[metric::kTimeToTarget] = validation.elapsed;
        break;
      }
    }
  auto attribute = [&](const char* key) {
    auto it = attributes.find(key);
    return it == attributes.end() ? std::string() : it->second;
  };
  // Every rank's device, on every node (runs recorded before `ranks`: one node's devices).
  const std::string ranks_text = attribute("ranks");
  int64_t ranks_recorded = 0;
  const auto [end, error] =
      std::from_chars(ranks_text.data(), ranks_text.data() + ranks_text.size(), ranks_recorded);
  const double ranks =
      error == std::errc() && end == ranks_text.data() + ranks_text.size() && ranks_recorded > 0
          ? static_cast<double>(ranks_recorded)
          : static_cast<double>(run.devices);
  auto seconds = figures.find(metric::kTrainSeconds);
  if (seconds == figures.end()) return figures;
  figures[metric::kDeviceHours] = seconds->second * ranks / 3600;
  const auto price = options.price_for(run.environment.device_name, attribute("device_type"));
  if (!price) return figures;
  figures[metric::kCost] = figures[metric::kDeviceHours] * *price;
  if (auto ttt = figures.find(metric::kTimeToTarget); ttt != figures.end())
    figures[metric::kCostToTarget] = ttt->second * ranks / 3600 * *price;
  return figures;
}

VariantRow make_row(Store& store, const RunRecord& run, const ReportOptions& options) {
  VariantRow row;
  row.variant = run.variant;
  row.run_id = run.id;
  row.status = run.status;
  row.precision = run.precision;
  row.strategy = run.strategy;
  row.devices = run.devices;
  row.device_name = run.environment.device_name;
  row.torch_version = run.environment.torch_version;
  row.ended_at = run.ended_at;
  row.error = run.error;
  row.failure = run.failure;
  RepeatRun repeat = repeat_run(store, run);
  row.attributes = store.attributes(run.id);
  row.metrics = run_figures(store, run, repeat, row.attributes, options);
  row.epochs = repeat.epochs;
  row.repeats = {std::move(repeat)};
  row.target_reached = row.metrics.count(metric::kTimeToTarget) ? 1 : 0;
  row.run_ids = {run.id};
  row.config_yaml = run.config_yaml;
  row.resumes = run.resumes;
  row.completed = run.status == RunStatus::completed ? 1 : 0;
  if (row.completed == 1)
    for (const auto& [key, value] : row.metrics) row.samples[key] = {value};
  row.log_path = run.environment.log_path;
  if (const std::string stem = run_files_stem(run); !stem.empty()) row.config_path = stem + ".yaml";
  row.git_revision = run.environment.git_revision;
  row.host = run.host;
  return row;
}

// One row over a variant's repeats (`runs`: the run of each repeat that ran, by repeat): the
// first completed one is shown; the figures are the medians over the completed ones, with their
// min and max, and so is each epoch's.
VariantRow aggregate_row(Store& store, const std::string& variant,
                         const std::vector<const RunRecord*>& runs, int64_t planned,
                         const ReportOptions& options) {
  std::vector<const RunRecord*> completed;
  for (const RunRecord* run : runs)
    if (run->status == RunStatus::completed) completed.push_back(run);
  if (runs.empty()) {
    VariantRow row;  // the file describes it; nothing ran it yet
    row.variant = variant;
    row.planned = planned;
    row.error = "not run yet with this configuration";
    return row;
  }
  VariantRow row = make_row(store, completed.empty() ? *runs.back() : *completed.front(), options);
  row.planned = planned;
  row.run_ids.clear();
  row.repeats.clear();
  row.resumes = 0;
  std::map<std::string, std::vector<double>> values;  // the completed runs' figures, by key
  std::vector<const RepeatRun*> completed_repeats;
  for (const RunRecord* run : runs) {
    row.run_ids.push_back(run->id);
    row.repeats.push_back(repeat_run(store, *run));
    row.resumes += run->resumes;
  }
  for (size_t i = 0; i < runs.size(); ++i) {
    if (runs[i]->status != RunStatus::completed) continue;
    completed_repeats.push_back(&row.repeats[i]);
    for (const auto& [key, value] :
         run_figures(store, *runs[i], row.repeats[i], store.attributes(runs[i]->id), options))
      values[key].push_back(value);
  }
  row.completed = static_cast<int64_t>(completed.size());
  row.samples = values;
  row.target_reached = static_cast<int64_t>(values[metric::kTimeToTarget].size());
  if (row.target_reached == 0) values.erase(metric::kTimeToTarget);
  if (completed.size() > 1) {
    std::map<std::pair<int64_t, std::string>, std::vector<double>> epoch_values;
    for (const RepeatRun* repeat : completed_repeats)
      for (const EpochRow& epoch : repeat->epochs)
        for (const auto& [key, value] : epoch.values)
          epoch_values[{epoch.epoch, key}].push_back(value);
    row.metrics.clear();
    for (const auto& [key, list] : values) {
      row.metrics[key] = median(list);
      row.spread[key] = {*std::min_element(list.begin(), list.end()),
                         *std::max_element(list.begin(), list.end())};
    }
    row.epochs.clear();
    for (const auto& [where, list] : epoch_values) {
      if (row.epochs.empty() || row.epochs.back().epoch != where.first)
        row.epochs.push_back({where.first, {}});
      row.epochs.back().values[where.second] = median(list);
    }
  }
  // What happened to the repeats that did not complete (or never ran).
  std::vector<std::string> missing;
  for (const RunRecord* run : runs)
    if (run->status != RunStatus::completed && !completed.empty())
      missing.push_back(fmt::format(
          "repeat {} (run {}) {}{}", run->repeat + 1, run->id, to_string(run->status),
          run->failure == FailureClass::none ? "" : fmt::format(" ({})", to_string(run->failure))));
  if (static_cast<int64_t>(runs.size()) < planned)
    missing.push_back(plural(planned - static_cast<int64_t>(runs.size()), "repeat") +
                      " not run yet");
  if (!missing.empty() && !completed.empty())
    row.error =
        fmt::format("{} of {} completed; {}", completed.size(), planned, join(missing, "; "));
  return row;
}

// The run to show for a configuration: its newest completed run, else its newest run.
bool better_choice(const RunRecord& candidate, const RunRecord& chosen) {
  return candidate.status == RunStatus::completed || chosen.status != RunStatus::completed;
}

// A config value as the differences show it: an empty string is "" (not nothing after the colon).
std::string shown(const std::string& value) { return value.empty() ? "\"\"" : value; }

// "train.epochs: 1 (the file: 3)" for each key in which `run_yaml` differs from `file_yaml`.
std::vector<std::string> differences(const std::string& run_yaml, const std::string& file_yaml) {
  const auto run = flat_config(run_yaml), file = flat_config(file_yaml);
  std::vector<std::string> out;
  for (const auto& [key, value] : run) {
    auto it = file.find(key);
    if (it == file.end())
      out.push_back(fmt::format("{}: {} (not in the file)", key, shown(value)));
    else if (it->second != value)
      out.push_back(fmt::format("{}: {} (the file: {})", key, shown(value), shown(it->second)));
  }
  for (const auto& [key, value] : file)
    if (!run.count(key))
      out.push_back(fmt::format("{}: not set (the file: {})", key, shown(value)));
  return out;
}

// Rows: each variant of the file as it is now, with the run of exactly that configuration; every
// other configuration's newest run goes to `other_runs`.
void choose_current_runs(Store& store, const std::vector<RunRecord>& runs,
                         const CurrentExperiment& current, ExperimentReport& section) {
  using Key = std::pair<std::string, std::string>;          // variant and config hash
  std::map<std::string, const CurrentVariant*> by_variant;  // its first repeat
  std::vector<std::string> variant_order;
  std::set<Key> wanted;
  std::map<Key, Key> current_of_legacy;  // a run recorded before fingerprints is its config's
  for (const auto& variant : current.variants) {
    if (!variant.legacy_config_hash.empty() && variant.legacy_config_hash != variant.config_hash)
      current_of_legacy[{variant.variant, variant.legacy_config_hash}] = {variant.variant,
                                                                          variant.config_hash};
    if (!by_variant.count(variant.variant)) {
      by_variant[variant.variant] = &variant;
      variant_order.push_back(variant.variant);
    }
    wanted.insert({variant.variant, variant.config_hash});
  }
  std::map<Key, const RunRecord*> chosen, other;
  std::vector<Key> other_order;
  for (const auto& run : runs) {
    Key key{run.variant, run.config_hash};
    if (auto it = current_of_legacy.find(key); it != current_of_legacy.end()) key = it->second;
    if (wanted.count(key)) {
      if (!chosen.count(key) || better_choice(run, *chosen[key])) chosen[key] = &run;
      continue;
    }
    if (!other.count(key)) other_order.push_back(key);
    if (!other.count(key) || better_choice(run, *other[key])) other[key] = &run;
  }
  for (const auto& name : variant_order) {
    std::vector<const RunRecord*> repeats;
    int64_t planned = 0;
    for (const auto& variant : current.variants) {
      if (variant.variant != name) continue;
      ++planned;
      auto it = chosen.find({name, variant.config_hash});
      if (it != chosen.end()) repeats.push_back(it->second);
    }
    VariantRow row = aggregate_row(store, name, repeats, planned, section.options);
    row.config_yaml = by_variant[name]->config_yaml;
    section.rows.push_back(std::move(row));
  }
  for (const auto& key : other_order) {
    const RunRecord& run = *other[key];
    OtherRun entry{
        .variant = run.variant, .run_id = run.id, .status = run.status, .ended_at = run.ended_at};
    entry.metrics = store.final_metrics(run.id);
    entry.error = run.error;
    entry.failure = run.failure;
    auto it = by_variant.find(run.variant);
    if (it == by_variant.end())
      entry.differences = {"the file has no variant of this name any more"};
    else
      entry.differences = differences(run.config_yaml, it->second->config_yaml);
    section.other_runs.push_back(std::move(entry));
  }
}

// Each run of another configuration against the baseline of its own configuration: the baseline
// variant's run that differs from the file in the same keys and values (the same smoke test's
// --set), when there is one.
void compare_other_runs(ExperimentReport& section) {
  for (auto& entry : section.other_runs) {
    if (entry.variant == section.baseline || entry.status != RunStatus::completed) continue;
    for (const auto& base : section.other_runs) {
      if (base.variant != section.baseline || base.status != RunStatus::completed ||
          base.differences != entry.differences)
        continue;
      const auto mine = entry.metrics.find(metric::kTrainSeconds);
      const auto theirs = base.metrics.find(metric::kTrainSeconds);
      if (mine != entry.metrics.end() && theirs != base.metrics.end() && mine->second > 0)
        entry.speedup = theirs->second / mine->second;
    }
  }
}

// Without the file: each variant's newest completed run (or newest run), whatever its
// configuration.
void choose_newest_runs(Store& store, const std::vector<RunRecord>& runs,
                        ExperimentReport& section) {
  std::map<std::string, RunRecord> chosen;
  std::map<std::string, int64_t> position;
  for (const auto& run : runs) {
    auto it = chosen.find(run.variant);
    if (it == chosen.end() || better_choice(run, it->second)) chosen[run.variant] = run;
    position[run.variant] = run.position;
  }
  std::vector<std::string> order;
  for (const auto& [variant, run] : chosen) order.push_back(variant);
  std::stable_sort(order.begin(), order.end(),
                   [&](const auto& a, const auto& b) { return position[a] < position[b]; });
  for (const auto& variant : order)
    section.rows.push_back(make_row(store, chosen[variant], section.options));
}

// Why `row` has no figures to compare: it failed, was skipped, or has not finished.
std::string not_compared(const VariantRow& row) {
  const std::string error = row.error.substr(0, row.error.find('\n'));
  if (row.status == RunStatus::failed)
    return fmt::format("failed ({}){}", to_string(row.failure), error.empty() ? "" : ": " + error);
  if (row.status == RunStatus::skipped) return "skipped" + (error.empty() ? "" : ": " + error);
  return error.empty() ? fmt::format("not finished ({})", to_string(row.status)) : error;
}

// "val_acc ≥ 90.0%", "val_loss ≤ 0.35": report.target in words.
std::string target_text(const ReportOptions& options) {
  return options.target_metric == "val_loss"
             ? fmt::format("val_loss ≤ {:g}", options.target_value)
             : fmt::format("val_acc ≥ {:.1f}%", 100 * options.target_value);
}

// Welch's t-test of `row`'s times (`key`: training time or time-to-target) against `base`'s, on
// their logarithms (so the difference is minus the log of the speedup); nullopt without two
// positive times on each side.
std::optional<WelchTest> log_time_test(const VariantRow& base, const VariantRow& row,
                                       const char* key) {
  auto logs = [&](const VariantRow& r) {
    std::vector<double> out;
    auto it = r.samples.find(key);
    if (it == r.samples.end()) return out;
    for (double t : it->second) {
      if (!(t > 0)) return std::vector<double>{};  // a run that trained nothing: no ratio
      out.push_back(std::log(t));
    }
    return out;
  };
  return welch_t_test(logs(base), logs(row));
}

// A difference with its sign, "+1.2" or "-0.4", at `decimals`; one that rounds to zero reads
// "+0.0" whichever side it lies on ("-0.0" would claim a direction the figure does not show).
// Not for differences a test found beyond noise: there the sign is the finding.
std::string signed_text(double value, int decimals) {
  std::string text = fmt::format("{:+.{}f}", value, decimals);
  if (text.find_first_not_of("+-0.") == std::string::npos) text[0] = '+';
  return text;
}

// How many of each side's runs a figure comes from: "n=5/5".
std::string counts(int64_t mine, int64_t base) { return fmt::format("n={}/{}", mine, base); }

// A time against the baseline's as a ratio: "2.90× faster (2.70–3.10×, n=5/5)", or "time within
// noise (1.02×, 0.95–1.10×, n=5/5)" — tested when each side has two runs or more.
std::string speed_part(const VariantRow& base, const VariantRow& row, const char* key, double ratio,
                       bool tested, const std::string& n, const std::string& what) {
  // `beyond_noise`: the test says the times differ, so the direction stands however small; else a
  // ratio that rounds to 1.00 claims none ("1.00× slower" would).
  auto speed = [&](double r, bool beyond_noise) {
    const double factor = r >= 1 ? r : 1 / r;
    const bool rounds_to_one = fmt::format("{:.2f}", factor) == "1.00";
    if (rounds_to_one && !beyond_noise) return what + "as fast (1.00×)";
    return fmt::format("{}{:.{}f}× {}", what, factor, rounds_to_one ? 3 : 2,
                       r >= 1 ? "faster" : "slower");
  };
  const auto test = tested ? log_time_test(base, row, key) : std::nullopt;
  if (!test) return speed(ratio, false);
  // mean(log mine) - mean(log base) = -log(speedup): the interval's ends swap.
  const double center = std::exp(-test->difference), low = std::exp(-test->high),
               high = std::exp(-test->low);
  // A slowdown's interval reads as its headline does: how many times slower.
  const double shown_low = center >= 1 ? low : 1 / high, shown_high = center >= 1 ? high : 1 / low;
  if (test->significant())
    return fmt::format("{} ({:.2f}–{:.2f}×, {})", speed(center, true), shown_low, shown_high, n);
  return fmt::format("{}time within noise ({:.2f}×, {:.2f}–{:.2f}×, {})", what, center, low, high,
                     n);
}

// A figure against the baseline's in percent: "cost 0.42 (−35%)".
std::string percent_part(const VariantRow& base, const VariantRow& row, const char* key,
                         const std::string& label) {
  auto mine = row.metrics.find(key);
  auto theirs = base.metrics.find(key);
  if (mine == row.metrics.end() || theirs == base.metrics.end() || !(theirs->second > 0)) return "";
  return fmt::format("{} {} ({}%)", label, format_metric(*find_metric(key), mine->second),
                     signed_text(100 * (mine->second / theirs->second - 1), 0));
}

// train.micro_batch_size: auto halved the micro-batch to fit: "batch 256: fit at micro-batch 32
// after 3 halvings (4.1s lost)"; "" when nothing ran out of memory.
std::string micro_batch_part(const VariantRow& row) {
  auto events = row.metrics.find(metric::kOomEvents);
  auto micro = row.metrics.find(metric::kMicroBatchSize);
  if (events == row.metrics.end() || micro == row.metrics.end() || !(events->second > 0)) return "";
  const auto config = flat_config(row.config_yaml);
  const auto batch = config.find("train.batch_size");
  auto lost = row.metrics.find(metric::kOomSeconds);
  return fmt::format(
      "{}fit at micro-batch {:.0f} after {}{}",
      batch == config.end() ? "" : "batch " + batch->second + ": ", micro->second,
      plural(static_cast<int64_t>(std::lround(events->second)), "halving"),
      lost == row.metrics.end() ? "" : fmt::format(" ({} lost)", format_duration(lost->second)));
}

// The baseline's own line: what the others are compared with.
std::string baseline_verdict(const VariantRow& base, const ReportOptions& options) {
  std::vector<std::string> parts = {"baseline"};
  // A baseline that never completed: what became of it, as the others' lines say theirs.
  if (base.completed == 0) parts.push_back(not_compared(base));
  if (const std::string micro = micro_batch_part(base); !micro.empty()) parts.push_back(micro);
  if (options.has_target() && base.completed > 0) {
    auto ttt = base.metrics.find(metric::kTimeToTarget);
    parts.push_back(ttt == base.metrics.end()
                        ? fmt::format("did not reach {}", target_text(options))
                        : fmt::format("reaches {} in {} ({} of {} runs)", target_text(options),
                                      format_duration(ttt->second), base.target_reached,
                                      base.completed));
  }
  if (auto cost = base.metrics.find(metric::kCost); cost != base.metrics.end())
    parts.push_back(
        fmt::format("cost {} a run", format_metric(*find_metric(metric::kCost), cost->second)));
  return join(parts, ", ");
}

// The variant's answer against the baseline: its training time as a speedup; with report.target,
// its time-to-target as one; test accuracy in points; peak memory and cost in percent. With two or
// more runs of each, Welch's t-test at 95% says whether times (on their logarithm: a ratio) and
// accuracy differ beyond the repeats' noise; with fewer, the verdict says the spread is unknown and
// claims nothing about noise.
std::string verdict_of(const VariantRow& row, const VariantRow& base,
                       const ReportOptions& options) {
  if (&row == &base) return baseline_verdict(base, options);
  if (row.completed == 0) return not_compared(row);
  if (base.completed == 0) return "the baseline did not complete: nothing to compare";
  const bool tested = row.completed >= 2 && base.completed >= 2;
  std::vector<std::string> parts;
  auto samples = [](const VariantRow& r, const char* key) {
    auto it = r.samples.find(key);
    return it == r.samples.end() ? std::vector<double>{} : it->second;
  };
  if (row.metrics.count(metric::kSpeedup))
    parts.push_back(speed_part(base, row, metric::kTrainSeconds, row.metrics.at(metric::kSpeedup),
                               tested, counts(row.completed, base.completed), ""));
  if (options.has_target()) {
    const std::string reached =
        row.target_reached < row.completed
            ? fmt::format(", reached in {} of {} runs", row.target_reached, row.completed)
            : "";
    if (row.target_reached == 0)
      parts.push_back(fmt::format("did not reach {}", target_text(options)));
    else if (base.target_reached == 0)
      parts.push_back(fmt::format("reaches {} in {}{}; the baseline does not", target_text(options),
                                  format_duration(row.metrics.at(metric::kTimeToTarget)), reached));
    else if (row.metrics.count(metric::kTargetSpeedup))
      parts.push_back(speed_part(base, row, metric::kTimeToTarget,
                                 row.metrics.at(metric::kTargetSpeedup),
                                 row.target_reached >= 2 && base.target_reached >= 2,
                                 counts(row.target_reached, base.target_reached), "to target ") +
                      reached);
  }
  const auto mine_acc = samples(row, metric::kTestAcc), base_acc = samples(base, metric::kTestAcc);
  if (!mine_acc.empty() && !base_acc.empty()) {
    const auto test = tested ? welch_t_test(base_acc, mine_acc) : std::nullopt;
    if (!test) {
      parts.push_back(fmt::format(
          "test accuracy {} pt",
          signed_text(100 * (row.metrics.at(metric::kTestAcc) - base.metrics.at(metric::kTestAcc)),
                      1)));
    } else if (test->significant()) {
      // Beyond noise: the signs stand, a rounded zero's included ("-0.0 to -0.1").
      parts.push_back(fmt::format("test accuracy {:+.1f} pt ({:+.1f} to {:+.1f})",
                                  100 * test->difference, 100 * test->low, 100 * test->high));
    } else {
      parts.push_back(fmt::format("test accuracy {} pt (within noise)",
                                  signed_text(100 * test->difference, 1)));
    }
  }
  // A language model's quality: perplexity, compared as the ratio of the two (the difference of
  // test losses, their logarithms, tested as accuracy is).
  const auto mine_loss = samples(row, metric::kTestLoss),
             base_loss = samples(base, metric::kTestLoss);
  if (row.metrics.count(metric::kTestPerplexity) && base.metrics.count(metric::kTestPerplexity) &&
      !mine_loss.empty() && !base_loss.empty()) {
    auto percent = [](double log_ratio) { return 100 * (std::exp(log_ratio) - 1); };
    const auto test = tested ? welch_t_test(base_loss, mine_loss) : std::nullopt;
    if (!test)
      parts.push_back(fmt::format("test perplexity {}%",
                                  signed_text(100 * (row.metrics.at(metric::kTestPerplexity) /
                                                         base.metrics.at(metric::kTestPerplexity) -
                                                     1),
                                              1)));
    else if (test->significant())
      parts.push_back(fmt::format("test perplexity {:+.1f}% ({:+.1f} to {:+.1f})",
                                  percent(test->difference), percent(test->low),
                                  percent(test->high)));
    else
      parts.push_back(fmt::format("test perplexity {}% (within noise)",
                                  signed_text(percent(test->difference), 1)));
  }
  // The device's: CUDA's allocated peak on a GPU, the process's on the CPU.
  const char* memory_key = base.metrics.count(metric::kCudaPeakAllocated)
                               ? metric::kCudaPeakAllocated
                               : metric::kPeakMemory;
  auto memory = row.metrics.find(memory_key);
  auto base_memory = base.metrics.find(memory_key);
  if (memory != row.metrics.end() && base_memory != base.metrics.end() && base_memory->second > 0)
    parts.push_back(fmt::format("peak memory {}%",
                                signed_text(100 * (memory->second / base_memory->second - 1), 0)));
  for (const auto& part :
       {percent_part(base, row, metric::kCost, "cost"),
        percent_part(base, row, metric::kCostToTarget, "cost to target"), micro_batch_part(row)})
    if (!part.empty()) parts.push_back(part);
  std::string verdict = join(parts, ", ");
  if (!tested) {
    const std::string who = row.completed < 2 && base.completed < 2 ? "one run each"
                            : row.completed < 2                     ? "one run of this variant"
                                                                    : "one run of the baseline";
    verdict = who + ": spread unknown — set sweep.repeats; " + verdict;
  }
  return verdict;
}

// The experiment's answer from the verdicts: the variant that reaches report.target soonest (or
// without a target, trains fastest) beyond noise.
std::string answer_of(const ExperimentReport& section, const VariantRow& base) {
  const bool target = section.options.has_target();
  const char* key = target ? metric::kTimeToTarget : metric::kTrainSeconds;
  auto runs = [&](const VariantRow& row) { return target ? row.target_reached : row.completed; };
  if (base.completed == 0)
    return fmt::format("{} did not complete: nothing to compare", base.variant);
  if (target && base.target_reached == 0)
    return fmt::format("{} did not reach {}: no time-to-target to compare with", base.variant,
                       target_text(section.options));
  const VariantRow* fastest = nullptr;
  double fastest_speedup = 0;  // the verdict's: the ratio of geometric means
  bool untested = false;
  for (const auto& row : section.rows) {
    if (&row == &base || runs(row) == 0) continue;
    if (runs(row) < 2 || runs(base) < 2) {
      untested = true;
      continue;
    }
    // To be the answer, every run of it reached the target (MLPerf counts a result only then).
    if (target && row.target_reached < row.completed) continue;
    const auto test = log_time_test(base, row, key);
    if (!test || !test->significant() || test->difference >= 0) continue;  // not faster
    if (std::exp(-test->difference) > fastest_speedup) {
      fastest = &row;
      fastest_speedup = std::exp(-test->difference);
    }
  }
  const std::string what = target ? "to " + target_text(section.options) : "";
  if (fastest)
    return target ? fmt::format("fastest {} beyond noise: {}, {:.2f}× sooner than {}", what,
                                fastest->variant, fastest_speedup, base.variant)
                  : fmt::format("fastest beyond noise: {}, {:.2f}× faster than {}",
                                fastest->variant, fastest_speedup, base.variant);
  if (untested) {
    if (!target) return "speedups untested: fewer than two runs a variant — set sweep.repeats";
    // "Check the target" only where a completed run missed it.
    bool missed = false;
    for (const auto& row : section.rows) missed = missed || row.target_reached < row.completed;
    return fmt::format(
        "speedups to target untested: a variant has fewer than two runs that "
        "reached {} — set sweep.repeats{}",
        target_text(section.options), missed ? ", or check the target" : "");
  }
  return fmt::format("no variant is faster{} than {} beyond noise", target ? " to target" : "",
                     base.variant);
}

// A ratio of the baseline's `key` over each row's — of their medians, with its range from the
// extremes (slowest baseline over fastest row, and the reverse) — as `ratio_key`.
void ratio_over_baseline(ExperimentReport& section, const VariantRow& baseline, const char* key,
                         const char* ratio_key) {
  auto times = [&](const VariantRow& row) -> std::optional<Spread> {
    auto it = row.metrics.find(key);
    if (row.completed == 0 || it == row.metrics.end() || it->second <= 0) return std::nullopt;
    auto spread = row.spread.find(key);
    return spread == row.spread.end() ? Spread{it->second, it->second} : spread->second;
  };
  const auto base = times(baseline);
  if (!base) return;
  const double base_median = baseline.metrics.at(key);
  for (auto& row : section.rows) {
    const auto mine = times(row);
    if (!mine) continue;
    row.metrics[ratio_key] = base_median / row.metrics.at(key);
    if (row.spread.count(key) || baseline.spread.count(key))
      row.spread[ratio_key] = {base->min / mine->max, base->max / mine->min};
  }
}

// Each row's speedups over the baseline (training time, and time-to-target with a target), its
// verdict and differences from the baseline's configuration, and the experiment's answer.
void compare_with_baseline(ExperimentReport& section, const OptionDefault& option_default) {
  const VariantRow* baseline = nullptr;
  for (const auto& row : section.rows)
    if (row.variant == section.baseline) baseline = &row;
  if (!baseline) return;
  for (auto& row : section.rows) {
    if (&row == baseline || baseline->config_yaml.empty() || row.config_yaml.empty()) continue;
    for (const auto& d : config_differences(flat_config(row.config_yaml),
                                            flat_config(baseline->config_yaml), option_default))
      if (d.has_mine) row.differs.push_back(d.key + ": " + shown(d.mine));
  }
  ratio_over_baseline(section, *baseline, metric::kTrainSeconds, metric::kSpeedup);
  if (section.options.has_target())
    ratio_over_baseline(section, *baseline, metric::kTimeToTarget, metric::kTargetSpeedup);
  for (auto& row : section.rows) row.verdict = verdict_of(row, *baseline, section.options);
  section.answer = answer_of(section, *baseline);
}

// A target and prices are asked for to be shown: their columns join the table when the file's
// `report.metrics` does not name them — time-to-target and its speedup after the speedup, the
// costs at the end.
void with_answer_columns(ReportOptions& options) {
  auto& columns = options.metrics;
  auto add = [&](const char* key, const char* after) {
    if (std::find(columns.begin(), columns.end(), key) != columns.end()) return;
    auto at = std::find(columns.begin(), columns.end(), after);
    columns.insert(at == columns.end() ? columns.end() : at + 1, key);
  };
  if (options.has_target()) {
    add(metric::kTimeToTarget, metric::kSpeedup);
    add(metric::kTargetSpeedup, metric::kTimeToTarget);
  }
  if (!options.prices.empty()) {
    add(metric::kCost, "");
    if (options.has_target()) add(metric::kCostToTarget, metric::kCost);
  }
}

// The task's figures: a language model has no accuracy and counts tokens. In the section of one
// (its runs have a test perplexity and no accuracy), the default columns' classification figures
// show the language model's counterparts: test_acc test_ppl, samples_per_s tokens_per_s.
void with_task_columns(ExperimentReport& section) {
  auto any_row_has = [&](const char* key) {
    for (const auto& row : section.rows)
      if (row.metrics.count(key)) return true;
    return false;
  };
  section.language_model = any_row_has(metric::kTestPerplexity) && !any_row_has(metric::kTestAcc);
  if (!section.language_model) return;
  for (auto& column : section.options.metrics) {
    if (column == metric::kTestAcc) column = metric::kTestPerplexity;
    if (column == metric::kSamplesPerSecond) column = metric::kTokensPerSecond;
  }
}

}  // namespace

std::vector<Validation> validations(const RepeatRun& run) {
  std::vector<Validation> out;
  for (const StepRow& step : run.steps) {
    auto elapsed = step.values.find(metric::kElapsedSeconds);
    if (elapsed != step.values.end() && step.values.count(metric::kValSeconds))
      out.push_back({elapsed->second, step.values});
  }
  if (!out.empty()) return out;
  double elapsed = 0;
  for (const EpochRow& epoch : run.epochs) {
    auto seconds = epoch.values.find(metric::kEpochSeconds);
    if (seconds == epoch.values.end()) return {};  // no time to place the rest at
    elapsed += seconds->second;
    out.push_back({elapsed, epoch.values});
  }
  return out;
}

Report build_report(Store& store, const std::string& experiment_name,
                    const CurrentExperiments& current) {
  Report report;
  report.generated_at = utc_now();
  std::vector<ExperimentRecord> experiments = store.experiments();
  if (!experiment_name.empty()) experiments = {store.experiment_named(experiment_name)};
  for (const auto& experiment : experiments) {
    ExperimentReport section;
    section.experiment = experiment;
    section.options = stored_report_options(experiment);
    with_answer_columns(section.options);

    const std::vector<RunRecord> runs = store.runs(experiment.name);
    const CurrentExperiment now = current ? current(experiment) : CurrentExperiment{};
    if (current && now.problem.empty()) {
      choose_current_runs(store, runs, now, section);
    } else {
      if (current)
        section.note = fmt::format(
            "{}: {}; the rows are each variant's newest runs, whatever their configuration",
            experiment.file, now.problem);
      choose_newest_runs(store, runs, section);
    }

    section.baseline = section.options.baseline;
    if (section.baseline.empty() && !section.rows.empty())
      section.baseline = section.rows.front().variant;
    with_task_columns(section);
    compare_with_baseline(section, now.option_default);
    compare_other_runs(section);
    report.experiments.push_back(std::move(section));
  }
  return report;
}

std::string other_run_status(const OtherRun& run) {
  const bool named = run.failure != FailureClass::none &&
                     run.failure != FailureClass::interrupted && run.status != RunStatus::completed;
  return to_string(run.status) + (named ? fmt::format(" ({})", to_string(run.failure)) : "");
}

std::string other_run_quality(const OtherRun& run, bool name) {
  if (run.metrics.count(metric::kTestPerplexity))
    return (name ? "test perplexity " : "ppl ") + other_run_figure(run, metric::kTestPerplexity);
  return (name ? "test accuracy " : "") + other_run_figure(run, metric::kTestAcc);
}

std::string other_run_figure(const OtherRun& run, const std::string& key) {
  const auto it = run.metrics.find(key);
  const MetricInfo* info = find_metric(key);
  return it == run.metrics.end() || info == nullptr ? "—" : format_metric(*info, it->second);
}

std::string html_escape(const std::string& text) {
  // Besides markup: control characters (a log's terminal colours) and bidi overrides and isolates
  // (U+202A-U+202E, U+2066-U+2069), which could make a name display as another ("Trojan Source"),
  // become U+FFFD. Tab and newline stay.
  static const std::string kReplacement = "\xEF\xBF\xBD";
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    if (c == 0xE2 && i + 2 < text.size()) {
      const unsigned char b1 = static_cast<unsigned char>(text[i + 1]),
                          b2 = static_cast<unsigned char>(text[i + 2]);
      if ((b1 == 0x80 && b2 >= 0xAA && b2 <= 0xAE) || (b1 == 0x81 && b2 >= 0xA6 && b2 <= 0xA9)) {
        out += kReplacement;
        i += 2;
        continue;
      }
    }
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        if ((c < 0x20 && c != '\t' && c != '\n' && c != '\r') || c == 0x7F)
          out += kReplacement;
        else
          out += static_cast<char>(c);
    }
  }
  return out;
}

namespace {

// The median, and the repeats' range when there are several: "4.2s (4.1s – 4.4s)".
std::string cell(const VariantRow& row, const std::string& key) {
  auto it = row.metrics.find(key);
  const MetricInfo* info = find_metric(key);
  if (it == row.metrics.end() || info == nullptr) return "—";
  auto spread = row.spread.find(key);
  if (spread == row.spread.end()) return format_metric(*info, it->second);
  return fmt::format("{} ({} – {})", format_metric(*info, it->second),
                     format_metric(*info, spread->second.min),
                     format_metric(*info, spread->second.max));
}

std::string row_status(const VariantRow& row) {
  if (row.run_id == 0) return "not run";
  if (row.failure == FailureClass::not_started) return "not started";
  if (row.status == RunStatus::completed || row.failure == FailureClass::none ||
      row.failure == FailureClass::interrupted)
    return to_string(row.status);
  return fmt::format("{} ({})", to_string(row.status), to_string(row.failure));
}

std::string csv_field(const std::string& text) {
  if (text.find_first_of(",\"\n") == std::string::npos) return text;
  std::string out = "\"";
  for (char c : text) out += c == '"' ? std::string("\"\"") : std::string(1, c);
  return out + "\"";
}

// Text from YAML or the store as Markdown shows it literally: a '|' would end a table cell, a
// newline the row, '<' and '&' start HTML (which Markdown passes through), '*', '`', '[' and '\\'
// mark up ('_' inside a word, as in train.batch_size, does not).
std::string md(const std::string& text) {
  std::string out;
  for (char c : text) {
    switch (c) {
      case '\n':
      case '\r':
        out += ' ';
        break;
      case '<':
        out += "&lt;";
        break;
      case '&':
        out += "&amp;";
        break;
      case '|':
      case '*':
      case '`':
      case '[':
      case '\\':
        out += '\\';
        out += c;
        break;
      default:
        out += c;
    }
  }
  return out;
}

std::string md_join(const std::vector<std::string>& items) {
  std::vector<std::string> escaped;
  for (const auto& item : items) escaped.push_back(md(item));
  return join(escaped, "; ");
}

}  // namespace

std::string render_markdown(const Report& report) {
  std::string out = "# Trainyard report\n\n";
  for (const auto& section : report.experiments) {
    const auto& e = section.experiment;
    out += fmt::format("## {}\n\n",
                       md(section.options.title.empty() ? e.name : section.options.title));
    if (!e.description.empty()) out += md(e.description) + "\n\n";
    if (!section.note.empty()) out += "> " + md(section.note) + "\n\n";
    out += md(summary_line(section)) + "\n\n";
    for (const auto& row : section.rows)
      if (!row.verdict.empty())
        out += fmt::format("- **{}** — {}\n", md(row.variant), md(row.verdict));
    out += "\n| variant | status | n | precision | devices | strategy |";
    std::string rule = "|---|---|---:|---|---:|---|";
    for (const auto& key : section.options.metrics) {
      out += " " + find_metric(key)->label + " |";
      rule += "---:|";
    }
    out += " differs from the baseline in |\n" + rule + "---|\n";
    for (const auto& row : section.rows) {
      out +=
          fmt::format("| {}{} | {} | {}/{} | {} | {} | {} |", md(row.variant),
                      row.variant == section.baseline ? " (baseline)" : "", row_status(row),
                      row.completed, row.planned, md(row.precision), row.devices, md(row.strategy));
      for (const auto& key : section.options.metrics) out += " " + cell(row, key) + " |";
      out += " " + md_join(row.differs) + " |\n";
    }
    out += "\n";
    for (const auto& row : section.rows)
      if (!row.error.empty())
        out += fmt::format("- {}: {}\n", md(row.variant), md(first_line(row.error)));
    out += "\n";
    if (!section.other_runs.empty()) {
      out += "Runs of other configurations (not in the table):\n\n";
      for (const auto& run : section.other_runs) {
        std::string figures;
        if (run.status == RunStatus::completed)
          figures = fmt::format(", {}, {}{}", other_run_figure(run, metric::kTrainSeconds),
                                other_run_quality(run),
                                run.speedup > 0 ? fmt::format(", {:.2f}x", run.speedup) : "");
        out += fmt::format("- {} (run {}, {}{}): {}{}\n", md(run.variant), run.run_id,
                           other_run_status(run), figures,
                           run.differences.empty() ? "the same settings" : md_join(run.differences),
                           run.error.empty() ? "" : " — " + md(first_line(run.error)));
      }
      out += "\n";
    }
  }
  return out;
}

std::string render_answers(const Report& report, size_t width) {
  std::string out;
  auto add = [&](const std::string& text, const std::string& indent, const std::string& hanging) {
    const size_t room = width > hanging.size() + 20 ? width - hanging.size() : 0;
    const auto lines = wrap(text, room);
    for (size_t i = 0; i < lines.size(); ++i) out += (i == 0 ? indent : hanging) + lines[i] + "\n";
  };
  for (const auto& section : report.experiments) {
    add(section.experiment.name + ": " + summary_line(section), "", "    ");
    for (const auto& row : section.rows)  // (a lone baseline's says more than "baseline" only)
      if (!row.verdict.empty() && (section.rows.size() > 1 || row.verdict != "baseline"))
        add(row.variant + " — " + row.verdict, "  ", "      ");
  }
  return out;
}

std::string render_csv(const Report& report) {
  std::vector<std::string> keys;
  for (const auto& m : metric_vocabulary())
    if (m.scope == MetricScope::final || m.scope == MetricScope::derived) keys.push_back(m.key);
  // Each figure is the median over the variant's completed repeats, with its min and max.
  std::string out =
      "experiment,variant,run_id,status,failure_class,n,repeats,precision,devices,strategy,"
      "device,torch_version";
  for (const auto& key : keys) out += "," + key + "," + key + "_min," + key + "_max";
  out += ",verdict\n";
  for (const auto& section : report.experiments) {
    for (const auto& row : section.rows) {
      out += fmt::format(
          "{},{},{},{},{},{},{},{},{},{},{},{}", csv_field(section.experiment.name),
          csv_field(row.variant), row.run_id, row.run_id == 0 ? "not run" : to_string(row.status),
          to_string(row.failure), row.completed, row.planned, csv_field(row.precision), row.devices,
          csv_field(row.strategy), csv_field(row.device_name), csv_field(row.torch_version));
      for (const auto& key : keys) {
        auto it = row.metrics.find(key);
        if (it == row.metrics.end()) {
          out += ",,,";
          continue;
        }
        auto spread = row.spread.find(key);
        const Spread range =
            spread == row.spread.end() ? Spread{it->second, it->second} : spread->second;
        out += fmt::format(",{},{},{}", it->second, range.min, range.max);
      }
      out += "," + csv_field(row.verdict) + "\n";
    }
  }
  return out;
}

}  // namespace trainyard
