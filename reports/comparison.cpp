// Every statistical decision of a report, made once and stored on its section: each variant's
// speedups over the baseline, its verdict (what is beyond the noise of the repeats, by
// reports/statistics.h's test), the experiment's answer, and the best value of each column. The
// renderers (HTML, Markdown, CSV, the terminal) show what is decided here and decide nothing.
#include "reports/comparison.h"

#include <algorithm>
#include <cmath>
#include <optional>

#include <fmt/format.h>

#include "common/metrics.h"
#include "common/text.h"
#include "reports/statistics.h"
#include "trainyard/options.h"

namespace trainyard {

namespace {

// A row's runs' values of `key` (its completed repeats'), none when it has none.
std::vector<double> samples_of(const VariantRow& row, const std::string& key) {
  auto it = row.samples.find(key);
  return it == row.samples.end() ? std::vector<double>{} : it->second;
}

// Why `row` has no figures to compare: it failed, was skipped, or has not finished.
std::string not_compared(const VariantRow& row) {
  const std::string error = row.error.substr(0, row.error.find('\n'));
  if (row.status == RunStatus::failed)
    return fmt::format("failed ({}){}", to_string(row.failure), error.empty() ? "" : ": " + error);
  if (row.status == RunStatus::skipped) return "skipped" + (error.empty() ? "" : ": " + error);
  return error.empty() ? fmt::format("not finished ({})", to_string(row.status)) : error;
}

// "val_acc ≥ 90.0%", "val_f1 ≥ 80.0%", "val_loss ≤ 0.35": report.target in words.
std::string target_text(const ReportOptions& options) {
  const WatchedMetric metric = options.target();
  return lower_is_better(metric)
             ? fmt::format("{} ≤ {:g}", metric_key(metric), options.target_value)
             : fmt::format("{} ≥ {}", metric_key(metric),
                           figure_text(metric, options.target_value, 1));
}

// The test of `row`'s figure `key` against `base`'s — on their logarithms when `log` (times,
// whose difference is then a ratio; nothing when a time is not positive) — at `level`: paired by
// round when both sides ran every run behind the figure in rounds of a batch (sweep.order:
// interleaved) and share two rounds or more, so that what drifted between rounds cancels; Welch's
// otherwise. `paired` says which.
std::optional<WelchTest> compare_runs(const VariantRow& base, const VariantRow& row,
                                      const std::string& key, bool log, double level,
                                      bool* paired = nullptr) {
  if (paired) *paired = false;
  auto value = [&](double x) { return log ? std::log(x) : x; };
  auto usable = [&](const std::vector<double>& values) {
    return std::all_of(values.begin(), values.end(), [&](double x) { return !log || x > 0; });
  };
  const std::vector<double> mine = samples_of(row, key), theirs = samples_of(base, key);
  if (!usable(mine) || !usable(theirs)) return std::nullopt;
  auto rounds = [&](const VariantRow& r, size_t n) {
    auto it = r.by_round.find(key);
    return it != r.by_round.end() && it->second.size() == n ? &it->second : nullptr;
  };
  const auto* my_rounds = rounds(row, mine.size());
  const auto* their_rounds = rounds(base, theirs.size());
  if (my_rounds && their_rounds) {
    std::vector<double> a, b;
    for (const auto& [round, x] : *their_rounds)
      if (auto it = my_rounds->find(round); it != my_rounds->end()) {
        a.push_back(value(x));
        b.push_back(value(it->second));
      }
    // Pairs that all differ alike (no spread) say nothing of the noise: Welch's then.
    if (auto test = paired_t_test(a, b, level)) {
      if (paired) *paired = true;
      return test;
    }
  }
  std::vector<double> a, b;
  for (double x : theirs) a.push_back(value(x));
  for (double x : mine) b.push_back(value(x));
  return welch_t_test(a, b, level);
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

// The claim that `row` trains (`key` training time) or reaches report.target (`key`
// time-to-target) `estimate` times as fast as `base`: the ratio of their times' geometric means —
// compare_runs' test on the logarithms of the times, so a difference is a ratio — with its
// interval at `level` when `tested` (each side has two runs or more); nullopt without a positive
// time on each side.
std::optional<Claim> speed_claim(const VariantRow& base, const VariantRow& row, const char* key,
                                 bool tested, int64_t n, int64_t base_n, double level) {
  auto logs = [&](const VariantRow& r) {
    std::vector<double> out;
    for (double t : samples_of(r, key)) {
      if (!(t > 0)) return std::vector<double>{};  // a run that trained nothing: no ratio
      out.push_back(std::log(t));
    }
    return out;
  };
  const std::vector<double> mine = logs(row), theirs = logs(base);
  if (mine.empty() || theirs.empty()) return std::nullopt;
  Claim claim{.n = n, .base_n = base_n};
  auto mean = [](const std::vector<double>& v) {
    double sum = 0;
    for (double x : v) sum += x;
    return sum / static_cast<double>(v.size());
  };
  claim.estimate = &row == &base ? 1.0 : std::exp(mean(theirs) - mean(mine));
  if (!tested || &row == &base) return claim;
  bool paired = false;
  if (const auto test = compare_runs(base, row, key, /*log=*/true, level, &paired)) {
    // mean(log mine) - mean(log base) = -log(speedup): the interval's ends swap.
    claim.estimate = std::exp(-test->difference);
    claim.low = std::exp(-test->high);
    claim.high = std::exp(-test->low);
    claim.tested = true;
    claim.paired = paired;
    claim.level = level;
    claim.beyond_noise = test->significant();
  }
  return claim;
}

// A speed claim in words: "2.90× faster (2.70–3.10×, n=5/5)", or "time within noise (1.02×,
// 0.95–1.10×, n=5/5)"; untested, the estimate alone ("2.90× faster").
std::string speed_part(const Claim& claim, const std::string& what) {
  // `beyond_noise`: the test says the times differ, so the direction stands however small; else a
  // ratio that rounds to 1.00 claims none ("1.00× slower" would).
  auto speed = [&](double r, bool beyond_noise) {
    const double factor = r >= 1 ? r : 1 / r;
    const bool rounds_to_one = fmt::format("{:.2f}", factor) == "1.00";
    if (rounds_to_one && !beyond_noise) return what + "as fast (1.00×)";
    return fmt::format("{}{:.{}f}× {}", what, factor, rounds_to_one ? 3 : 2,
                       r >= 1 ? "faster" : "slower");
  };
  if (!claim.tested) return speed(claim.estimate, false);
  const std::string n =
      counts(claim.n, claim.base_n) + (claim.paired ? ", paired by round" : "") +
      (claim.level > kVerdictLevel ? fmt::format(", {:.3g}% each", 100 * claim.level) : "");
  const double center = claim.estimate, low = claim.low, high = claim.high;
  // A slowdown's interval reads as its headline does: how many times slower.
  const double shown_low = center >= 1 ? low : 1 / high, shown_high = center >= 1 ? high : 1 / low;
  if (claim.beyond_noise)
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
std::string verdict_of(const VariantRow& row, const VariantRow& base, const ReportOptions& options,
                       double level) {
  if (&row == &base) return baseline_verdict(base, options);
  if (row.completed == 0) return not_compared(row);
  if (base.completed == 0) return "the baseline did not complete: nothing to compare";
  const bool tested = row.completed >= 2 && base.completed >= 2;
  std::vector<std::string> parts;
  auto samples = [](const VariantRow& r, const char* key) {
    auto it = r.samples.find(key);
    return it == r.samples.end() ? std::vector<double>{} : it->second;
  };
  if (auto claim = row.claims.find(metric::kSpeedup); claim != row.claims.end())
    parts.push_back(speed_part(claim->second, ""));
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
    else if (auto claim = row.claims.find(metric::kTargetSpeedup); claim != row.claims.end())
      parts.push_back(speed_part(claim->second, "to target ") + reached);
  }
  const auto mine_acc = samples(row, metric::kTestAcc), base_acc = samples(base, metric::kTestAcc);
  if (!mine_acc.empty() && !base_acc.empty()) {
    const auto test =
        tested ? compare_runs(base, row, metric::kTestAcc, false, level) : std::nullopt;
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
      parts.push_back(fmt::format("test accuracy {} pt ({:+.1f} to {:+.1f}, within noise)",
                                  signed_text(100 * test->difference, 1), 100 * test->low,
                                  100 * test->high));
    }
  }
  // A language model's quality: perplexity, compared as the ratio of the two (the difference of
  // test losses, their logarithms, tested as accuracy is).
  const auto mine_loss = samples(row, metric::kTestLoss),
             base_loss = samples(base, metric::kTestLoss);
  if (row.metrics.count(metric::kTestPerplexity) && base.metrics.count(metric::kTestPerplexity) &&
      !mine_loss.empty() && !base_loss.empty()) {
    auto percent = [](double log_ratio) { return 100 * (std::exp(log_ratio) - 1); };
    const auto test =
        tested ? compare_runs(base, row, metric::kTestLoss, false, level) : std::nullopt;
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
      parts.push_back(fmt::format("test perplexity {}% ({:+.1f} to {:+.1f}, within noise)",
                                  signed_text(percent(test->difference), 1), percent(test->low),
                                  percent(test->high)));
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

// How `row`'s quality compares with the baseline's, for the answer: the difference with its
// interval at `level` — test accuracy in points, or a language model's test perplexity in percent —
// and whether it is shown not worse by more than report.quality_margin (non-inferiority: the whole
// interval above -margin), or worse beyond noise.
struct QualityCheck {
  bool shown_equal = false;  // the interval clears -margin: the speed may be claimed as a win
  bool lost = false;         // worse beyond noise
  std::string text;          // "test accuracy -27.7 pt (-93.0 to +37.6)"
  std::string unit = "pt";   // the margin's: points of accuracy, or percent of perplexity
};

QualityCheck quality_check(const VariantRow& base, const VariantRow& row, double margin,
                           double level) {
  QualityCheck check;
  if (!samples_of(row, metric::kTestAcc).empty() && !samples_of(base, metric::kTestAcc).empty()) {
    const auto test = compare_runs(base, row, metric::kTestAcc, false, level);
    if (!test) return {.text = "test accuracy untested"};
    check.shown_equal = test->low > -margin;
    check.lost = test->significant() && test->difference < 0;
    check.text = fmt::format("test accuracy {:+.1f} pt ({:+.1f} to {:+.1f})",
                             100 * test->difference, 100 * test->low, 100 * test->high);
    return check;
  }
  if (!samples_of(row, metric::kTestLoss).empty() && !samples_of(base, metric::kTestLoss).empty() &&
      row.metrics.count(metric::kTestPerplexity) && base.metrics.count(metric::kTestPerplexity)) {
    // The difference of test losses is the logarithm of the perplexities' ratio.
    const auto test = compare_runs(base, row, metric::kTestLoss, false, level);
    check.unit = "%";
    if (!test) return {.text = "test perplexity untested", .unit = "%"};
    auto percent = [](double log_ratio) { return 100 * (std::exp(log_ratio) - 1); };
    check.shown_equal = std::exp(test->high) - 1 < margin;
    check.lost = test->significant() && test->difference > 0;
    check.text = fmt::format("test perplexity {:+.1f}% ({:+.1f} to {:+.1f})",
                             percent(test->difference), percent(test->low), percent(test->high));
    return check;
  }
  return {.text = "no test figure to show its quality by"};
}

// The margin in the quality's own words: "1 pt" of accuracy, "1%" of perplexity.
std::string margin_text(const QualityCheck& quality, double margin) {
  return fmt::format("{:g}{}", 100 * margin, quality.unit == "pt" ? " pt" : "%");
}

// The experiment's answer from the verdicts: the variant that reaches report.target soonest (or
// without a target, trains fastest) beyond noise, and whose quality is shown not worse than the
// baseline's by more than report.quality_margin — with its quality's interval beside the speed.
// A faster variant that lost quality, whose quality is not shown equal (too few or too noisy
// repeats), or that did not learn is never the answer; the answer names the fastest such one as
// what it is ("bs64: 2.04× faster, quality not shown equal (...) — not a win").
std::string answer_of(const ExperimentReport& section, const VariantRow& base, double level) {
  const bool target = section.options.has_target();
  const double margin = section.options.quality_margin;
  const char* key = target ? metric::kTargetSpeedup : metric::kSpeedup;
  auto runs = [&](const VariantRow& row) { return target ? row.target_reached : row.completed; };
  if (section.rows.size() < 2)
    return "one variant: nothing to compare it with (sweep.variants adds others)";
  if (base.completed == 0)
    return fmt::format("{} did not complete: nothing to compare", base.variant);
  if (target && base.target_reached == 0)
    return fmt::format("{} did not reach {}: no time-to-target to compare with", base.variant,
                       target_text(section.options));
  const VariantRow* fastest = nullptr;
  double fastest_speedup = 0;  // the verdict's: the ratio of geometric means
  QualityCheck fastest_quality;
  // The fastest of those faster beyond noise that are no win, and why not.
  const VariantRow* refused = nullptr;
  double refused_speedup = 0;
  std::string refused_why;
  bool untested = false;
  const char* sooner = target ? "sooner" : "faster";
  for (const auto& row : section.rows) {
    if (&row == &base || runs(row) == 0) continue;
    if (runs(row) < 2 || runs(base) < 2) {
      untested = true;
      continue;
    }
    // To be the answer, every run of it reached the target (MLPerf counts a result only then).
    if (target && row.target_reached < row.completed) continue;
    const auto claim = row.claims.find(key);
    if (claim == row.claims.end() || !claim->second.beyond_noise || !(claim->second.estimate > 1))
      continue;  // not faster beyond noise
    const double speedup = claim->second.estimate;
    const QualityCheck quality = quality_check(base, row, margin, level);
    // Equal to a baseline that learned nothing is no win either.
    if (quality.shown_equal && row.did_not_learn.empty() && base.did_not_learn.empty()) {
      if (speedup > fastest_speedup) {
        fastest = &row;
        fastest_speedup = speedup;
        fastest_quality = quality;
      }
      continue;
    }
    if (speedup > refused_speedup) {
      refused = &row;
      refused_speedup = speedup;
      refused_why =
          !row.did_not_learn.empty()
              ? fmt::format("{:.2f}× {} but {}", speedup, sooner, row.did_not_learn)
          : !base.did_not_learn.empty() ? fmt::format("{:.2f}× {} than a baseline that {}", speedup,
                                                      sooner, base.did_not_learn)
          : quality.lost ? fmt::format("{:.2f}× {} but {}", speedup, sooner, quality.text)
                         : fmt::format("{:.2f}× {}, quality not shown equal ({}; margin {})",
                                       speedup, sooner, quality.text, margin_text(quality, margin));
    }
  }
  const std::string what = target ? "to " + target_text(section.options) : "";
  // A faster variant that is no win is named as what it is, after the answer.
  const std::string trade =
      refused && (!fastest || refused_speedup > fastest_speedup)
          ? fmt::format("{}{}: {} — not a win", fastest ? "; " : "", refused->variant, refused_why)
          : "";
  if (fastest)
    return (target ? fmt::format("fastest {} beyond noise: {}, {:.2f}× sooner than {}", what,
                                 fastest->variant, fastest_speedup, base.variant)
                   : fmt::format("fastest beyond noise: {}, {:.2f}× faster than {}",
                                 fastest->variant, fastest_speedup, base.variant)) +
           fmt::format(", {}, within the {} margin", fastest_quality.text,
                       margin_text(fastest_quality, margin)) +
           trade;
  if (refused)
    return fmt::format(
        "no variant is faster{} than {} beyond noise with its quality shown equal; {}",
        target ? " to target" : "", base.variant, trade);
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

// A tuned comparison (sweep.search) answers the study's metric first: each variant's figure of it
// on its confirmation runs, the median of what their own rows state — "by val_acc, the studies'
// metric, at each variant's best settings on fresh seeds: fp32 61.2%, bf16 60.8%; ". "" without
// studies or before any confirmation run completed.
std::string tuned_part(const ExperimentReport& section) {
  std::vector<std::string> figures;
  WatchedMetric metric = WatchedMetric::val_loss;
  for (const StudySection& study : section.studies) {
    const std::vector<double> values = study.confirmed_figures();
    if (values.empty()) continue;
    metric = study.study.metric;
    const double middle = median(values);
    figures.push_back(fmt::format("{} {}", study.study.key.study,
                                  figure_text(metric, middle, lower_is_better(metric) ? 4 : 1)));
  }
  if (figures.empty()) return "";
  return fmt::format(
      "by {}, the studies' metric, at each variant's best settings on fresh seeds: "
      "{}; ",
      metric_key(metric), join(figures));
}

// Each row's speed claim over the baseline (`key`: training time, or time-to-target), stored as the
// row's claim and figure `ratio_key` (its estimate, with its interval as the figure's range): the
// one number the verdict, the table, the bars, the CSV and the terminal show for it.
void speed_over_baseline(ExperimentReport& section, const VariantRow& baseline, const char* key,
                         const char* ratio_key, double level) {
  const bool to_target = std::string(key) == metric::kTimeToTarget;
  auto runs = [&](const VariantRow& row) { return to_target ? row.target_reached : row.completed; };
  for (auto& row : section.rows) {
    if (row.completed == 0 || baseline.completed == 0) continue;
    const auto claim = speed_claim(baseline, row, key, runs(row) >= 2 && runs(baseline) >= 2,
                                   runs(row), runs(baseline), level);
    if (!claim) continue;
    row.claims[ratio_key] = *claim;
    row.metrics[ratio_key] = claim->estimate;
    if (claim->tested) row.spread[ratio_key] = {claim->low, claim->high};
  }
}

// True when `row`'s `key` is peak memory of which the training state (parameters, gradients,
// optimizer state) is under a tenth: the runtime (LibTorch, allocator caches) decides the figure,
// not the technique, so it is not compared.
bool dominated_by_runtime(const VariantRow& row, const MetricInfo& info) {
  if (info.unit != MetricUnit::bytes || info.key.find("peak") == std::string::npos) return false;
  double state = 0;
  for (const char* key :
       {metric::kParameterBytes, metric::kGradientBytes, metric::kOptimizerStateBytes}) {
    auto it = row.metrics.find(key);
    if (it != row.metrics.end()) state += it->second;
  }
  return state < 0.1 * row.metrics.at(info.key);
}

// The best completed value of `key` across rows — only when it differs from the next best beyond
// the noise of their repeats, by the verdicts' test (Welch's t-test at 95%, on log time for times
// and speedups): one run of either, and nothing is marked.
std::optional<double> best_value(const ExperimentReport& section, const MetricInfo& info,
                                 double level) {
  if (info.better == Better::neither) return std::nullopt;
  std::vector<std::pair<double, const VariantRow*>> values;
  for (const auto& row : section.rows) {
    auto it = row.metrics.find(info.key);
    if (row.status != RunStatus::completed || it == row.metrics.end()) continue;
    if (dominated_by_runtime(row, info)) return std::nullopt;
    values.emplace_back(it->second, &row);
  }
  if (values.size() < 2) return std::nullopt;
  std::sort(values.begin(), values.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  if (info.better == Better::higher) std::reverse(values.begin(), values.end());
  // A speedup is the baseline's time over the row's: its runs are the row's times.
  const bool to_target = info.key == metric::kTargetSpeedup || info.key == metric::kTimeToTarget;
  const bool timed = to_target || info.key == metric::kSpeedup || info.key == metric::kTrainSeconds;
  const char* time_key = to_target ? metric::kTimeToTarget : metric::kTrainSeconds;
  const auto test =
      compare_runs(*values[1].second, *values[0].second, timed ? time_key : info.key, timed, level);
  if (!test || !test->significant()) return std::nullopt;
  return values[0].first;
}

// Each shown column's best value, marked on the rows that hold it (VariantRow::best).
void mark_the_best(ExperimentReport& section, double level) {
  for (const auto& key : section.options.metrics) {
    const MetricInfo* info = find_metric(key);
    if (info == nullptr) continue;
    const auto best = best_value(section, *info, level);
    if (!best) continue;
    for (auto& row : section.rows) {
      auto it = row.metrics.find(key);
      if (it != row.metrics.end() && it->second == *best) row.best.insert(key);
    }
  }
}

}  // namespace

bool is_speedup(const std::string& key) {
  return key == metric::kSpeedup || key == metric::kTargetSpeedup;
}

void compare_with_baseline(ExperimentReport& section) {
  const VariantRow* baseline = nullptr;
  for (const auto& row : section.rows)
    if (row.variant == section.baseline) baseline = &row;
  // Every variant is compared with the baseline: the family's tests are wrong together at most 5%
  // of the time (family_level).
  size_t compared = 0;
  for (const auto& row : section.rows)
    compared += row.variant != section.baseline && row.completed > 0;
  const double level = family_level(compared);
  if (baseline) {
    speed_over_baseline(section, *baseline, metric::kTrainSeconds, metric::kSpeedup, level);
    if (section.options.has_target())
      speed_over_baseline(section, *baseline, metric::kTimeToTarget, metric::kTargetSpeedup, level);
    for (auto& row : section.rows) row.verdict = verdict_of(row, *baseline, section.options, level);
    section.answer = tuned_part(section) + answer_of(section, *baseline, level);
  }
  mark_the_best(section, level);
}

}  // namespace trainyard
