// The report's numbers come from the database: latest completed run per variant, speedup over the
// baseline, escaping of everything that came from YAML.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <regex>
#include <set>
#include <tuple>

#include <fmt/format.h>

#include "common/text.h"
#include "reports/report.h"
#include "tests/test_support.h"
#include "trainyard/config_tree.h"

namespace trainyard {
namespace {

class ReportTest : public ::testing::Test {
 protected:
  void SetUp() override {
    experiment = store.upsert_experiment("vit", "vit.yaml", "ViT <b>study</b>",
                                         "baseline: fp32\ntitle: ViT & CIFAR\n");
  }
  int64_t add_run(const std::string& variant, int64_t position, RunStatus status, double seconds,
                  double acc) {
    return add_run_of(variant, position, status, seconds, acc, "{}",
                      variant + std::to_string(seconds));
  }
  int64_t add_run_of(const std::string& variant, int64_t position, RunStatus status, double seconds,
                     double acc, const std::string& config_yaml, const std::string& hash,
                     int64_t repeat = 0) {
    int64_t id = store.queue_run(experiment, {.variant = variant,
                                              .position = position,
                                              .config_yaml = config_yaml,
                                              .config_hash = hash,
                                              .precision = "32-true",
                                              .strategy = "single",
                                              .repeat = repeat});
    store.start_run(id,
                    {.git_revision = "rev", .torch_version = "2.11.0", .device_name = "Test CPU"});
    if (status == RunStatus::completed)
      store.complete_run(
          id, {{"train_seconds", seconds}, {"test_acc", acc}, {"peak_memory_bytes", 1 << 20}});
    else
      store.end_run(id, status, "it <broke>");
    return id;
  }

  testing::TempDir dir;
  Store store{(dir.path() / "r.db").string()};
  int64_t experiment = 0;
};

// An empty value reads as "" in a difference, not as nothing after the colon.
TEST_F(ReportTest, AnEmptyValueInADifferenceIsShownQuoted) {
  add_run_of("fp32", 0, RunStatus::completed, 40, 0.5, "model: {weights: ''}\n", "h-old");
  CurrentExperiments current = [](const ExperimentRecord&) {
    return CurrentExperiment{.variants = {{"fp32", "h-new", "model: {weights: w.safetensors}\n"}}};
  };
  const Report report = build_report(store, "", current);
  const auto& section = report.experiments[0];
  ASSERT_EQ(section.other_runs.size(), 1u);
  EXPECT_EQ(section.other_runs[0].differences,
            (std::vector<std::string>{"model.weights: \"\" (the file: w.safetensors)"}));
}

// The issue's trial: a smoke test's runs (train.epochs: 1 on the command line) are not the
// file's, so the table says "not run" — and the runs listed apart show their figures, the speedup
// over the baseline changed the same way, and a failed one its error and failure class.
TEST_F(ReportTest, RunsOfOtherConfigurationsKeepTheirFigures) {
  add_run_of("fp32", 0, RunStatus::completed, 40, 0.5, "train: {epochs: 1}\n", "f1");
  add_run_of("bf16", 1, RunStatus::completed, 10, 0.25,
             "train: {epochs: 1}\nruntime: {precision: bf16-mixed}\n", "b1");
  const int64_t oom = add_run_of("fsdp", 2, RunStatus::failed, 0, 0,
                                 "train: {epochs: 1}\nruntime: {strategy: fsdp}\n", "s1");
  store.end_run(oom, RunStatus::failed, "CUDA out of memory. Tried to allocate 2.00 GiB",
                FailureClass::out_of_memory);
  CurrentExperiments current = [](const ExperimentRecord&) {
    return CurrentExperiment{
        .variants = {{"fp32", "f3", "train: {epochs: 3}\n"},
                     {"bf16", "b3", "train: {epochs: 3}\nruntime: {precision: bf16-mixed}\n"},
                     {"fsdp", "s3", "train: {epochs: 3}\nruntime: {strategy: fsdp}\n"}}};
  };
  const Report report = build_report(store, "", current);
  const auto& section = report.experiments[0];
  ASSERT_EQ(section.other_runs.size(), 3u);
  EXPECT_DOUBLE_EQ(section.other_runs[0].metrics.at("train_seconds"), 40);
  EXPECT_EQ(section.other_runs[0].speedup, 0);  // the baseline itself
  EXPECT_DOUBLE_EQ(section.other_runs[1].speedup, 4.0);
  EXPECT_EQ(other_run_status(section.other_runs[2]), "failed (out-of-memory)");

  const std::string markdown = render_markdown(report);
  EXPECT_NE(markdown.find("- bf16 (run 2, completed, 10.0s, test accuracy 25.0%, 4.00x): "
                          "train.epochs: 1 (the file: 3)"),
            std::string::npos)
      << markdown;
  EXPECT_NE(markdown.find("- fsdp (run 3, failed (out-of-memory)): train.epochs: 1 (the file: 3) "
                          "— CUDA out of memory. Tried to allocate 2.00 GiB"),
            std::string::npos)
      << markdown;
  const std::string html = render_html(report);
  EXPECT_NE(html.find("<td>4.00x</td>"), std::string::npos);
  EXPECT_NE(html.find("CUDA out of memory. Tried to allocate 2.00 GiB"), std::string::npos);
  EXPECT_NE(html.find("failed (out-of-memory)"), std::string::npos);
}

// With the file's current configurations, a row is the run of exactly that configuration — not the
// newer smoke test — and a variant nothing ran yet shows as not run; other configurations are
// listed apart with the keys in which they differ.
TEST_F(ReportTest, RowsAreTheRunsOfTheConfigurationTheFileResolvesToNow) {
  const int64_t real =
      add_run_of("fp32", 0, RunStatus::completed, 100, 0.9, "train: {epochs: 3}\n", "h3");
  const int64_t smoke =
      add_run_of("fp32", 0, RunStatus::completed, 40, 0.5, "train: {epochs: 1}\n", "h1");
  const int64_t gone = add_run_of("old", 2, RunStatus::completed, 50, 0.5, "{}", "h-old");
  CurrentExperiments current = [](const ExperimentRecord&) {
    return CurrentExperiment{
        .variants = {{"fp32", "h3", "train: {epochs: 3}\n"}, {"bf16", "hb", "{}"}}};
  };
  const Report section_report = build_report(store, "", current);
  const auto& section = section_report.experiments[0];
  ASSERT_EQ(section.rows.size(), 2u);
  EXPECT_EQ(section.rows[0].run_id, real);
  EXPECT_EQ(section.rows[1].variant, "bf16");
  EXPECT_EQ(section.rows[1].run_id, 0);
  EXPECT_EQ(section.rows[1].error, "not run yet with this configuration");
  ASSERT_EQ(section.other_runs.size(), 2u);
  EXPECT_EQ(section.other_runs[0].run_id, smoke);
  EXPECT_EQ(section.other_runs[0].differences,
            (std::vector<std::string>{"train.epochs: 1 (the file: 3)"}));
  EXPECT_EQ(section.other_runs[1].run_id, gone);
  EXPECT_EQ(section.other_runs[1].differences[0], "the file has no variant of this name any more");
  EXPECT_TRUE(section.note.empty());
  EXPECT_NE(render_markdown(build_report(store, "", current)).find("not run"), std::string::npos);

  // A file that cannot be read now: the newest runs, and a note that says so.
  CurrentExperiments unreadable = [](const ExperimentRecord&) {
    return CurrentExperiment{.problem = "the experiment file is gone"};
  };
  const Report fallback_report = build_report(store, "", unreadable);
  const auto& fallback = fallback_report.experiments[0];
  EXPECT_EQ(fallback.rows[0].run_id, smoke);
  EXPECT_NE(fallback.note.find("vit.yaml: the experiment file is gone"), std::string::npos);
  EXPECT_NE(render_html(build_report(store, "", unreadable)).find("the experiment file is gone"),
            std::string::npos);
}

// A value is marked best only when the verdicts' test (Welch's t-test at 95%) says it differs from
// the next best beyond the noise of their repeats: never on one run each, never on a spread as wide
// as 0.15x-6.76x around the baseline (a new user saw that marked best), and never on peak memory
// that the runtime, not the training state, decides.
TEST_F(ReportTest, BestIsMarkedOnlyBeyondTheNoiseOfTheRepeats) {
  auto best_cells = [&](const CurrentExperiment& now) {
    const std::string page =
        render_html(build_report(store, "", [&](const ExperimentRecord&) { return now; }));
    int count = 0;
    for (size_t at = page.find(R"(<td class="best">)"); at != std::string::npos;
         at = page.find(R"(<td class="best">)", at + 1))
      ++count;
    return count;
  };
  CurrentExperiment now;
  int64_t position = 0;
  auto add = [&](const std::string& variant, const std::vector<double>& seconds,
                 const std::vector<double>& accuracies) {
    for (size_t r = 0; r < seconds.size(); ++r) {
      const std::string yaml =
          fmt::format("runtime: {{precision: {}}}\ntrain: {{seed: {}}}\n", variant, 123 + r);
      const std::string hash = variant + std::to_string(r);
      now.variants.push_back({variant, hash, yaml, static_cast<int64_t>(r)});
      add_run_of(variant, position, RunStatus::completed, seconds[r], accuracies[r], yaml, hash,
                 static_cast<int64_t>(r));
    }
    ++position;
  };
  add("fp32", {100, 102, 98}, {0.90, 0.91, 0.89});
  add("ddp", {40, 41, 39}, {0.90, 0.92, 0.89});
  EXPECT_EQ(best_cells(now), 2);  // time and speedup; accuracy is within noise
  // A variant whose three runs took 0.15x-6.76x the baseline's time: its median (70 s) is next to
  // ddp's, and nobody can say ddp is faster than it beyond noise — nothing is marked.
  add("wide", {400, 9, 70}, {0.90, 0.90, 0.91});
  EXPECT_EQ(best_cells(now), 0);
  const Report report = build_report(store, "", [&](const ExperimentRecord&) { return now; });
  EXPECT_EQ(report.experiments.at(0).rows.at(2).verdict.rfind("time within noise (", 0), 0u)
      << report.experiments.at(0).rows.at(2).verdict;
  // A slowdown reads as one, its interval too ("2.00× slower (1.9x–2.1×, ...)").
  add("slow", {200, 204, 196}, {0.90, 0.91, 0.89});
  const std::string slow = build_report(store, "", [&](const ExperimentRecord&) { return now; })
                               .experiments.at(0)
                               .rows.at(3)
                               .verdict;
  EXPECT_EQ(slow.rfind("2.00× slower (1.", 0), 0u) << slow;
  // A run that trained nothing (0 s) leaves no ratio to test: no NaN, the untested ratio instead.
  add("empty", {0, 50, 50}, {0.90, 0.91, 0.89});
  const std::string empty = build_report(store, "", [&](const ExperimentRecord&) { return now; })
                                .experiments.at(0)
                                .rows.at(4)
                                .verdict;
  EXPECT_EQ(empty.find("nan"), std::string::npos) << empty;
}

// One run each: 2.5x and +5 points, but the spread is unknown — nothing is marked best, and the
// verdict says so instead of claiming anything about noise.
TEST_F(ReportTest, OneRunEachMarksNothingBestAndSaysTheSpreadIsUnknown) {
  add_run("fp32", 0, RunStatus::completed, 100, 0.90);
  add_run("ddp", 1, RunStatus::completed, 40, 0.95);
  const Report report = build_report(store);
  EXPECT_EQ(render_html(report).find(R"(<td class="best">)"), std::string::npos);
  const auto& section = report.experiments.at(0);
  EXPECT_EQ(section.rows.at(1).verdict,
            "one run each: spread unknown — set sweep.repeats; 2.50× faster, test accuracy +5.0 "
            "pt, peak memory +0%");
  EXPECT_EQ(section.answer, "speedups untested: fewer than two runs a variant — set sweep.repeats");
}

// A tie at the shown precision claims no direction: "as fast (1.00×)", not "1.00× slower"; a
// difference that rounds to zero reads +0.0, not -0.0.
TEST_F(ReportTest, TiesAndDifferencesThatRoundToZeroClaimNoDirection) {
  add_run("fp32", 0, RunStatus::completed, 100, 0.90);
  add_run("bf16", 1, RunStatus::completed, 100.2, 0.8999);
  const Report report = build_report(store);
  EXPECT_EQ(report.experiments.at(0).rows.at(1).verdict,
            "one run each: spread unknown — set sweep.repeats; as fast (1.00×), test accuracy +0.0 "
            "pt, peak memory +0%");
}

// A small difference the repeats' test finds beyond noise keeps its direction: a speedup that
// rounds to 1.00 is shown to three decimals, an accuracy change that rounds to zero keeps its sign.
TEST_F(ReportTest, ASmallDifferenceBeyondNoiseKeepsItsDirection) {
  CurrentExperiment now;
  const std::vector<std::tuple<std::string, std::vector<double>, double>> runs = {
      {"fp32", {100.0, 100.01, 99.99, 100.02, 99.98}, 0.9000},
      {"slow", {100.4, 100.41, 100.39, 100.42, 100.38}, 0.8996}};
  int64_t position = 0;
  for (const auto& [variant, seconds, acc] : runs) {
    for (size_t r = 0; r < seconds.size(); ++r) {
      const std::string yaml =
          fmt::format("runtime: {{precision: {}}}\ntrain: {{seed: {}}}\n", variant, 123 + r);
      const std::string hash = variant + std::to_string(r);
      now.variants.push_back({variant, hash, yaml, static_cast<int64_t>(r)});
      add_run_of(variant, position, RunStatus::completed, seconds[r],
                 acc + 0.00001 * static_cast<double>(r), yaml, hash, static_cast<int64_t>(r));
    }
    ++position;
  }
  const Report report = build_report(store, "", [&](const ExperimentRecord&) { return now; });
  const std::string& verdict = report.experiments.at(0).rows.at(1).verdict;
  EXPECT_EQ(verdict.rfind("1.004× slower (1.00–1.00×, n=5/5), test accuracy -0.0 pt (", 0), 0u)
      << verdict;
}

// A baseline that failed says so on its own line, as every other row says what became of it.
// One variant is no comparison: its answer does not read "no variant is faster than default".
TEST_F(ReportTest, OneVariantHasNothingToCompare) {
  add_run("fp32", 0, RunStatus::completed, 40, 0.5);
  const Report report = build_report(store);
  EXPECT_EQ(report.experiments.at(0).answer,
            "one variant: nothing to compare it with (sweep.variants adds others)");
}

TEST_F(ReportTest, ABaselineThatFailedSaysSo) {
  add_run("fp32", 0, RunStatus::failed, 0, 0);
  add_run("bf16", 1, RunStatus::completed, 50, 0.9);
  const Report report = build_report(store);
  const auto& rows = report.experiments.at(0).rows;
  EXPECT_EQ(rows.at(0).verdict.rfind("baseline, failed (", 0), 0u) << rows.at(0).verdict;
  EXPECT_NE(rows.at(0).verdict.find("it <broke>"), std::string::npos) << rows.at(0).verdict;
  EXPECT_EQ(rows.at(1).verdict, "the baseline did not complete: nothing to compare");
}

// "Differs from the baseline in": the keys whose values differ and those only one side has, as the
// dry run lists them — the options a swapped-in component (ddp against single) leaves at its
// defaults too, marked as its defaults (which the report knows from the registry).
TEST_F(ReportTest, ASwappedComponentDiffersInItsNameItsOptionsAndTheDefaultsThatNowApply) {
  const std::string base_yaml =
      "model: {name: vit, depth: 2}\nruntime: {strategy: {name: single}, devices: 1}\n";
  const std::string ddp_yaml =
      "model: {name: vit, depth: 4}\nruntime: {strategy: {name: ddp, bucket_mb: 50.0, "
      "backend: auto}, devices: 2, threads: 1}\n";
  add_run_of("fp32", 0, RunStatus::completed, 100, 0.9, base_yaml, "h-base");
  add_run_of("ddp", 1, RunStatus::completed, 60, 0.9, ddp_yaml, "h-ddp");
  auto current = [&](OptionDefault option_default) {
    return [&, option_default](const ExperimentRecord&) {
      return CurrentExperiment{
          .variants = {{"fp32", "h-base", base_yaml}, {"ddp", "h-ddp", ddp_yaml}},
          .option_default = option_default};
    };
  };
  // ddp's declared defaults, as the registry gives them.
  const OptionDefault ddp_defaults = [](const std::string& section, const std::string& name,
                                        const std::string& option) -> std::optional<std::string> {
    if (section != "runtime.strategy" || name != "ddp") return std::nullopt;
    if (option == "bucket_mb") return "25.0";
    if (option == "backend") return "auto";
    return std::nullopt;
  };
  const Report with_defaults = build_report(store, "", current(ddp_defaults));
  EXPECT_EQ(
      with_defaults.experiments.at(0).rows.at(1).differs,
      (std::vector<std::string>{"model.depth: 4 (baseline: 2)", "runtime.devices: 2 (baseline: 1)",
                                "runtime.strategy.backend: auto, ddp's default (baseline: not set)",
                                "runtime.strategy.bucket_mb: 50.0 (baseline: not set)",
                                "runtime.strategy.name: ddp (baseline: single)",
                                "runtime.threads: 1 (baseline: not set)"}));
  const Report without = build_report(store, "", current({}));
  EXPECT_EQ(
      without.experiments.at(0).rows.at(1).differs,
      (std::vector<std::string>{"model.depth: 4 (baseline: 2)", "runtime.devices: 2 (baseline: 1)",
                                "runtime.strategy.backend: auto (baseline: not set)",
                                "runtime.strategy.bucket_mb: 50.0 (baseline: not set)",
                                "runtime.strategy.name: ddp (baseline: single)",
                                "runtime.threads: 1 (baseline: not set)"}));
}

TEST_F(ReportTest, SpeedupIsBaselineTimeOverVariantTime) {
  add_run("fp32", 0, RunStatus::completed, 1122, 0.954);  // 18.7 min
  add_run("bf16", 1, RunStatus::completed, 384, 0.952);   // 6.4 min
  add_run("ddp", 2, RunStatus::completed, 132, 0.957);    // 2.2 min
  Report report = build_report(store);
  ASSERT_EQ(report.experiments.size(), 1u);
  const auto& section = report.experiments[0];
  EXPECT_EQ(section.baseline, "fp32");
  ASSERT_EQ(section.rows.size(), 3u);
  EXPECT_DOUBLE_EQ(section.rows[0].metrics.at("speedup"), 1.0);
  EXPECT_NEAR(section.rows[1].metrics.at("speedup"), 2.921875, 1e-9);
  EXPECT_NEAR(section.rows[2].metrics.at("speedup"), 8.5, 1e-9);
  EXPECT_EQ(section.rows[2].device_name, "Test CPU");
}

TEST_F(ReportTest, LatestCompletedRunWinsAndFailedRowsShowTheirStatus) {
  add_run("fp32", 0, RunStatus::completed, 100, 0.5);
  add_run("fp32", 0, RunStatus::completed, 80, 0.6);  // a rerun: this one counts
  add_run("fp32", 0, RunStatus::failed, 0, 0);        // a later failure does not hide it
  add_run("bf16", 1, RunStatus::failed, 0, 0);
  const Report section_report = build_report(store);
  const auto& section = section_report.experiments[0];
  ASSERT_EQ(section.rows.size(), 2u);
  EXPECT_DOUBLE_EQ(section.rows[0].metrics.at("train_seconds"), 80);
  EXPECT_EQ(section.rows[1].status, RunStatus::failed);
  EXPECT_EQ(section.rows[1].metrics.count("speedup"), 0u);
  EXPECT_EQ(section.rows[1].verdict.rfind("failed (", 0), 0u) << section.rows[1].verdict;
}

TEST_F(ReportTest, HtmlIsSelfContainedAndEscaped) {
  add_run("fp32", 0, RunStatus::completed, 100, 0.5);
  add_run("<script>alert(1)</script>", 1, RunStatus::failed, 0, 0);
  std::string html = render_html(build_report(store));
  EXPECT_EQ(html.find("<script"), std::string::npos);
  EXPECT_NE(html.find("&lt;script&gt;alert(1)&lt;/script&gt;"), std::string::npos);
  EXPECT_NE(html.find("ViT &amp; CIFAR"), std::string::npos);
  EXPECT_NE(html.find("ViT &lt;b&gt;study&lt;/b&gt;"), std::string::npos);
  EXPECT_NE(html.find("it &lt;broke&gt;"), std::string::npos);
  EXPECT_NE(html.find("<svg"), std::string::npos);
  EXPECT_EQ(html.find("http://"),
            html.find("http://www.w3.org/2000/svg"));  // no external resources
  EXPECT_EQ(html.find("https://"), std::string::npos);
}

// What a run recorded of itself (dtypes, CUDA graphs, paths) is in the report, one column per kind.
TEST_F(ReportTest, HtmlShowsEachRunsRecordedDetails) {
  int64_t fp32 = add_run("fp32", 0, RunStatus::completed, 100, 0.5);
  int64_t graphs = add_run("graphs", 1, RunStatus::completed, 50, 0.5);
  store.record_attributes(fp32, {{"compute_dtype", "Float"}, {"loss_scaling", "none"}});
  store.record_attributes(graphs, {{"compute_dtype", "BFloat16"},
                                   {"cuda_graphs", "captured; 28 of 32 steps <replayed>"}});
  std::string html = render_html(build_report(store));
  const size_t details = html.find("<summary>Run details</summary>");
  ASSERT_NE(details, std::string::npos);
  for (const char* text : {"<th>compute</th>", "<th>loss scaling</th>", "<th>CUDA graphs</th>",
                           "BFloat16", "captured; 28 of 32 steps &lt;replayed&gt;"})
    EXPECT_NE(html.find(text, details), std::string::npos) << text;
  EXPECT_EQ(html.find("<th>gradients</th>"), std::string::npos);  // no run recorded it: no column
}

TEST_F(ReportTest, MarkdownAndCsvCarryTheSameNumbers) {
  add_run("fp32", 0, RunStatus::completed, 120, 0.9);
  add_run("bf16", 1, RunStatus::completed, 60, 0.91);
  Report report = build_report(store);
  std::string md = render_markdown(report);
  EXPECT_NE(md.find("| bf16 | completed | 1/1 | 32-true | 1 | single | 1m 00s | 2.00x | 91.0% |"),
            std::string::npos)
      << md;
  std::string csv = render_csv(report);
  EXPECT_NE(csv.find("vit,bf16,"), std::string::npos);
  EXPECT_NE(csv.find(",60,"), std::string::npos);
}

// A machine that slows steadily through the night — each run 3% slower than the one before — and
// three variants that are the same. Run grouped (each variant's repeats back to back) and compared
// unpaired, the later variants look slower beyond noise; run in rounds (sweep.order: interleaved,
// each run's round recorded) and compared round by round, nothing is claimed. A variant that truly
// trains twice as fast is still found, through the same drift.
TEST_F(ReportTest, RepeatsInRoundsCannotBeFooledByDrift) {
  const std::vector<std::string> variants = {"a", "b", "c"};
  const int64_t repeats = 3;
  // `c_batch`: the batch c's runs trained in (a rerun of c alone is another batch).
  auto batch = [&](const std::string& name, bool interleaved, double c_speedup,
                   const std::string& c_batch = "b1") {
    const int64_t id = store.upsert_experiment(name, name + ".yaml", "", "baseline: a\n");
    std::vector<std::pair<size_t, int64_t>> order;  // (variant, repeat) as the batch trains them
    for (int64_t r = 0; r < repeats; ++r)
      for (size_t k = 0; k < variants.size(); ++k)
        order.emplace_back(interleaved ? (k + static_cast<size_t>(r)) % variants.size() : k, r);
    if (!interleaved)
      std::sort(order.begin(), order.end());  // grouped: a's repeats, then b's, then c's
    double drift = 1;
    for (const auto& [v, r] : order) {
      const std::string hash = fmt::format("{}-{}-{}", name, variants[v], r);
      const int64_t run = store.queue_run(id, {.variant = variants[v],
                                               .position = static_cast<int64_t>(v),
                                               .config_yaml = "train: {seed: 1}\n",
                                               .config_hash = hash,
                                               .precision = "32-true",
                                               .strategy = "single",
                                               .repeat = r});
      store.start_run(run, {.torch_version = "2.11.0", .device_name = "Test CPU"});
      // A little noise of its own, so that no two runs take exactly the same time.
      const double noise =
          1 + 0.002 * static_cast<double>((3 * r + 5 * static_cast<int64_t>(v)) % 4);
      store.complete_run(run, {{"train_seconds", 100 * drift * noise / (v == 2 ? c_speedup : 1)},
                               {"test_acc", 0.9}});
      if (interleaved)
        store.record_attributes(run,
                                {{"round", fmt::format("{} {}", v == 2 ? c_batch : "b1", r + 1)}});
      drift *= 1.03;
    }
  };
  batch("grouped", false, 1);
  batch("interleaved", true, 1);
  batch("faster", true, 2);
  batch("rerun", true, 1, "b2");
  const Report report = build_report(store, "", [&](const ExperimentRecord& e) {
    CurrentExperiment now;
    for (const auto& variant : variants)
      for (int64_t r = 0; r < repeats; ++r)
        now.variants.push_back(
            {variant, fmt::format("{}-{}-{}", e.name, variant, r), "train: {seed: 1}\n", r});
    return now;
  });
  auto section = [&](const std::string& name) -> const ExperimentReport& {
    for (const auto& s : report.experiments)
      if (s.experiment.name == name) return s;
    throw std::runtime_error("no section " + name);
  };
  const ExperimentReport& grouped = section("grouped");
  EXPECT_TRUE(grouped.rows[2].claims.at("speedup").beyond_noise) << grouped.rows[2].verdict;
  EXPECT_NE(grouped.rows[2].verdict.find("slower ("), std::string::npos) << grouped.rows[2].verdict;
  const ExperimentReport& interleaved = section("interleaved");
  for (const VariantRow* row : {&interleaved.rows[1], &interleaved.rows[2]}) {
    EXPECT_TRUE(row->claims.at("speedup").paired) << row->verdict;
    EXPECT_FALSE(row->claims.at("speedup").beyond_noise) << row->verdict;
    EXPECT_NE(row->verdict.find("time within noise"), std::string::npos) << row->verdict;
    EXPECT_NE(row->verdict.find("n=3/3, paired by round, 97.5% each"), std::string::npos)
        << row->verdict;
  }
  EXPECT_EQ(interleaved.answer, "no variant is faster than a beyond noise");
  const ExperimentReport& faster = section("faster");
  EXPECT_TRUE(faster.rows[2].claims.at("speedup").beyond_noise) << faster.rows[2].verdict;
  EXPECT_NEAR(faster.rows[2].claims.at("speedup").estimate, 2, 0.05);
  EXPECT_EQ(faster.answer.rfind("fastest beyond noise: c, ", 0), 0u) << faster.answer;
  // Rounds of another batch (c run again alone) do not pair with the baseline's.
  const ExperimentReport& rerun = section("rerun");
  EXPECT_TRUE(rerun.rows[1].claims.at("speedup").paired);
  EXPECT_FALSE(rerun.rows[2].claims.at("speedup").paired);
}

// sweep.repeats: a row is the median of its completed repeats with their min and max; the speedup
// is the ratio of the medians, its range from the extremes; each variant's verdict and the
// experiment's answer; a repeat that failed is said; Markdown and CSV carry the same numbers.
// One number per claim: a database where the table's ratio of medians (100/80 = 1.25x, range
// 100/90-400/50) and the verdict's ratio of geometric means (158.74/71.14 = 2.23x) used to
// disagree. The speedup is decided once: every rendering — the verdict, the HTML table and bars,
// Markdown, CSV, the terminal — shows the same estimate and the same 95% interval.
TEST_F(ReportTest, EveryRenderingShowsOneNumberForAClaim) {
  CurrentExperiment now;
  const std::vector<std::pair<std::string, std::vector<double>>> timings = {
      {"fp32", {100, 100, 400}}, {"fast", {50, 80, 90}}};
  int64_t position = 0;
  for (const auto& [variant, seconds] : timings) {
    for (size_t r = 0; r < seconds.size(); ++r) {
      const std::string yaml = fmt::format("train: {{seed: {}}}\nname: {}\n", r, variant);
      const std::string hash = variant + std::to_string(r);
      now.variants.push_back({variant, hash, yaml, static_cast<int64_t>(r)});
      add_run_of(variant, position, RunStatus::completed, seconds[r], 0.9, yaml, hash,
                 static_cast<int64_t>(r));
    }
    ++position;
  }
  const Report report = build_report(store, "", [&](const ExperimentRecord&) { return now; });
  const VariantRow& fast = report.experiments.at(0).rows.at(1);
  const Claim& claim = fast.claims.at("speedup");
  // The estimate, worked out here: the ratio of the times' geometric means.
  EXPECT_NEAR(claim.estimate, std::cbrt(100.0 * 100 * 400) / std::cbrt(50.0 * 80 * 90), 1e-9);
  ASSERT_TRUE(claim.tested);
  EXPECT_LT(claim.low, claim.estimate);
  EXPECT_GT(claim.high, claim.estimate);
  EXPECT_EQ(fast.metrics.at("speedup"), claim.estimate);
  EXPECT_EQ(fast.spread.at("speedup").min, claim.low);
  EXPECT_EQ(fast.spread.at("speedup").max, claim.high);
  const std::string estimate = fmt::format("{:.2f}", claim.estimate);  // "2.23"
  const std::string interval = fmt::format("{:.2f}–{:.2f}×", claim.low, claim.high);
  const std::string table = fmt::format("{:.2f}x ({:.2f}x – {:.2f}x)", claim.estimate, claim.low,
                                        claim.high);  // Markdown's cell
  EXPECT_NE(fast.verdict.find("(" + estimate + "×, " + interval), std::string::npos)
      << fast.verdict;
  const std::string markdown = render_markdown(report);
  EXPECT_NE(markdown.find(table), std::string::npos) << markdown;
  EXPECT_NE(markdown.find(interval), std::string::npos) << markdown;
  const std::string csv = render_csv(report);
  EXPECT_NE(csv.find(",speedup,speedup_low,speedup_high,"), std::string::npos) << csv;
  EXPECT_NE(csv.find(fmt::format(",{},{},{},", claim.estimate, claim.low, claim.high)),
            std::string::npos)
      << csv;
  const std::string html = render_html(report);
  EXPECT_NE(html.find(estimate + "x<span class=\"range\">" +
                      fmt::format("{:.2f}x – {:.2f}x", claim.low, claim.high)),
            std::string::npos);
  EXPECT_NE(html.find("(" + estimate + "x)</text>"), std::string::npos);  // its training-time bar
  EXPECT_NE(html.find(interval), std::string::npos);                      // the verdict
  EXPECT_NE(render_answers(report, 0).find(interval), std::string::npos);
  // The ratio of medians appears nowhere as the speedup.
  for (const std::string* page : {&markdown, &html})
    EXPECT_EQ(page->find("1.25x"), std::string::npos);
}

// The answer weighs quality: a variant that trains faster beyond noise but loses accuracy beyond
// noise is never "the fastest"; the answer names what it traded, with the loss's interval.
TEST_F(ReportTest, TheAnswerNeverCrownsAVariantThatLostQuality) {
  CurrentExperiment now;
  const std::vector<std::tuple<std::string, std::vector<double>, std::vector<double>>> runs = {
      {"fp32", {100, 101, 99}, {0.900, 0.901, 0.899}},
      {"bf16", {83, 84, 82}, {0.900, 0.9005, 0.8995}},
      {"bs128", {71, 71.5, 70.5}, {0.40, 0.41, 0.39}}};
  int64_t position = 0;
  for (const auto& [variant, seconds, accuracy] : runs) {
    for (size_t r = 0; r < seconds.size(); ++r) {
      const std::string hash = variant + std::to_string(r);
      const std::string yaml = fmt::format("train: {{seed: {}}}\n", r);
      now.variants.push_back({variant, hash, yaml, static_cast<int64_t>(r)});
      add_run_of(variant, position, RunStatus::completed, seconds[r], accuracy[r], yaml, hash,
                 static_cast<int64_t>(r));
    }
    ++position;
  }
  Report report = build_report(store, "", [&](const ExperimentRecord&) { return now; });
  EXPECT_EQ(report.experiments.at(0).answer,
            "fastest beyond noise: bf16, 1.20× faster than fp32, test accuracy +0.0 pt (-0.3 to "
            "+0.3), within the 1 pt margin; bs128: 1.41× faster but test accuracy -50.0 pt (-53.5 "
            "to -46.5) — not a win");
  // Without the variant that kept its accuracy, none is a win.
  now.variants.erase(now.variants.begin() + 3, now.variants.begin() + 6);
  report = build_report(store, "", [&](const ExperimentRecord&) { return now; });
  EXPECT_EQ(
      report.experiments.at(0).answer,
      "no variant is faster than fp32 beyond noise with its quality shown equal; bs128: 1.41× "
      "faster but test accuracy -50.0 pt (-52.5 to -47.5) — not a win");
}

// A winner must rule out a quality loss (non-inferiority): faster beyond noise is not enough when
// the accuracy interval reaches below -report.quality_margin, as it does at three repeats when
// every run of the faster variant is 16 to 45 points below its paired baseline run (the issue's
// bs64). A variant truly as accurate and faster is still crowned, with its quality interval
// beside the speed; one flagged "did not learn" never is.
TEST_F(ReportTest, AWinnerIsShownNotWorseThanTheBaselineByMoreThanTheMargin) {
  struct Runs {
    std::string variant;
    std::vector<double> seconds, accuracy;  // a negative accuracy: a language model's test loss
  };
  auto report_of = [&](const std::string& name, const std::vector<Runs>& variants,
                       const std::string& options, const std::string& unlearned = "") {
    const int64_t id = store.upsert_experiment(name, name + ".yaml", "", options);
    CurrentExperiment now;  // the report's options: those the experiment recorded
    for (size_t v = 0; v < variants.size(); ++v)
      for (size_t r = 0; r < variants[v].seconds.size(); ++r) {
        const std::string hash = fmt::format("{}-{}-{}", name, variants[v].variant, r);
        const int64_t run = store.queue_run(id, {.variant = variants[v].variant,
                                                 .position = static_cast<int64_t>(v),
                                                 .config_yaml = "train: {seed: 1}\n",
                                                 .config_hash = hash,
                                                 .precision = "32-true",
                                                 .strategy = "single",
                                                 .repeat = static_cast<int64_t>(r)});
        store.start_run(run, {.torch_version = "2.11.0", .device_name = "Test CPU"});
        const double quality = variants[v].accuracy[r];
        std::map<std::string, double> finals = {{"train_seconds", variants[v].seconds[r]}};
        if (quality > 0) finals["test_acc"] = quality;
        if (quality < 0) {  // a language model: its test loss, and the perplexity it is
          finals["test_loss"] = -quality;
          finals["test_ppl"] = std::exp(-quality);
        }
        store.complete_run(run, finals);
        std::map<std::string, std::string> attributes = {{"round", fmt::format("b1 {}", r + 1)}};
        if (variants[v].variant == unlearned && r == 1)  // one run of three
          attributes["learning"] = "did not learn: the training loss fell only 0.4%";
        store.record_attributes(run, attributes);
        now.variants.push_back(
            {variants[v].variant, hash, "train: {seed: 1}\n", static_cast<int64_t>(r)});
      }
    const Report report = build_report(store, name, [&](const ExperimentRecord&) { return now; });
    return report.experiments.at(0);
  };
  const Runs baseline{"bs32", {100, 103, 98}, {0.906, 0.93, 0.89}};
  // 2.04x faster beyond noise; 62.9% against 90.6%: 27.7, 45 and 16 points below, pair by pair.
  const Runs bs64{"bs64", {49, 50.5, 48}, {0.629, 0.48, 0.73}};
  const ExperimentReport lossy = report_of("lossy", {baseline, bs64}, "baseline: bs32\n");
  ASSERT_EQ(lossy.rows.size(), 2u);
  EXPECT_TRUE(lossy.rows[1].claims.at("speedup").beyond_noise) << lossy.rows[1].verdict;
  // Paired by round at 95%: -29.6 pt (-65.8 to +6.7), within noise, so no loss is "beyond
  // noise" — but neither is the quality shown equal.
  EXPECT_EQ(lossy.answer.rfind("no variant is faster than bs32 beyond noise with its quality shown "
                               "equal; bs64: 2.04× faster, quality not shown equal (test accuracy "
                               "-29.6 pt (-65.8 to +6.7); margin 1 pt) — not a win",
                               0),
            0u)
      << lossy.answer;
  // The verdict prints the quality interval beside the speed.
  EXPECT_NE(lossy.rows[1].verdict.find("test accuracy -29.6 pt (-65.8 to +6.7, within noise)"),
            std::string::npos)
      << lossy.rows[1].verdict;

  // Truly as accurate (every pair within 0.2 pt) and faster: crowned, the interval beside it.
  const Runs bf16{"bf16", {60, 61.5, 59}, {0.907, 0.929, 0.891}};
  const ExperimentReport equal = report_of("equal", {baseline, bf16}, "baseline: bs32\n");
  EXPECT_EQ(equal.answer.rfind("fastest beyond noise: bf16, 1.67× faster than bs32, test accuracy "
                               "+0.0 pt (",
                               0),
            0u)
      << equal.answer;
  EXPECT_NE(equal.answer.find("), within the 1 pt margin"), std::string::npos) << equal.answer;
  // A margin of 0.05 pt is not met by the same runs: not crowned.
  const ExperimentReport strict =
      report_of("strict", {baseline, bf16}, "baseline: bs32\nquality_margin: 0.0005\n");
  EXPECT_EQ(strict.answer.rfind("no variant is faster than bs32 beyond noise with its quality", 0),
            0u)
      << strict.answer;
  // A language model: its test perplexity is the quality, as a ratio. 1.5% higher in every pair:
  // beyond noise, no win; equal: crowned within the 1% margin.
  const Runs lm_base{"fp32", {100, 103, 98}, {-3.0, -3.02, -2.99}};
  const Runs lm_worse{"bf16", {60, 61.5, 59}, {-3.015, -3.035, -3.005}};
  const ExperimentReport worse = report_of("lm-worse", {lm_base, lm_worse}, "baseline: fp32\n");
  EXPECT_EQ(worse.answer,
            "no variant is faster than fp32 beyond noise with its quality shown equal; bf16: "
            "1.67× faster but test perplexity +1.5% (+1.5 to +1.5) — not a win")
      << worse.answer;
  const Runs lm_same{"bf16", {60, 61.5, 59}, {-3.0, -3.0201, -2.99}};
  const ExperimentReport same = report_of("lm-same", {lm_base, lm_same}, "baseline: fp32\n");
  EXPECT_EQ(same.answer.rfind("fastest beyond noise: bf16, 1.67× faster than fp32, test "
                              "perplexity +0.0% (",
                              0),
            0u)
      << same.answer;
  EXPECT_NE(same.answer.find("), within the 1% margin"), std::string::npos) << same.answer;
  // Without a test figure, quality cannot be shown: no winner.
  const Runs untested_base{"fp32", {100, 103, 98}, {0, 0, 0}};
  const Runs untested{"bf16", {60, 61.5, 59}, {0, 0, 0}};
  EXPECT_NE(report_of("no-test", {untested_base, untested}, "baseline: fp32\n")
                .answer.find("quality not shown equal (no test figure to show its quality by"),
            std::string::npos);
  // A baseline flagged "did not learn": nothing is crowned against it — and where nothing is
  // faster beyond noise, the answer says only that (an A/A batch of tiny runs at chance).
  EXPECT_EQ(report_of("unlearned-base", {baseline, bf16}, "baseline: bs32\n", "bs32").answer,
            "no variant is faster than bs32 beyond noise with its quality shown equal; bf16: "
            "1.67× faster than a baseline that did not learn: the training loss fell only 0.4% — "
            "not a win");
  EXPECT_EQ(report_of("unlearned-aa", {baseline, Runs{"again", {99, 104, 97}, baseline.accuracy}},
                      "baseline: bs32\n", "bs32")
                .answer,
            "no variant is faster than bs32 beyond noise");
  // One run of it flagged "did not learn": never crowned, whatever its figures.
  const ExperimentReport unlearned =
      report_of("unlearned", {baseline, bf16}, "baseline: bs32\n", "bf16");
  EXPECT_EQ(unlearned.answer,
            "no variant is faster than bs32 beyond noise with its quality shown equal; bf16: "
            "1.67× faster but did not learn: the training loss fell only 0.4% — not a win");
}

// One figure per trial: a completed trial stands on the figure of the epoch whose weights its run
// tested, as its own row does — named where it is not the rung's last epoch's — and the study's
// figure for its best settings stands beside what those settings scored on fresh seeds (the
// winner's curse, measured); the tuned comparison's answer leads with the study's metric.
TEST_F(ReportTest, AStudysFigureIsItsRunsOwnAndItsConfirmationsStandBesideIt) {
  auto run_with = [&](const std::string& variant, const std::string& hash, int64_t repeat,
                      const std::vector<double>& curve, std::optional<int64_t> best_epoch) {
    const int64_t id = store.queue_run(experiment, {.variant = variant,
                                                    .position = 0,
                                                    .config_yaml = "train: {seed: 1}\n",
                                                    .config_hash = hash,
                                                    .precision = "32-true",
                                                    .strategy = "single",
                                                    .repeat = repeat});
    store.start_run(id, {.torch_version = "2.11.0", .device_name = "Test CPU"});
    for (size_t e = 0; e < curve.size(); ++e)
      store.record_epoch(id, static_cast<int64_t>(e + 1), {{"val_acc", curve[e]}});
    std::map<std::string, double> finals = {{"train_seconds", 10}, {"test_acc", 0.6}};
    if (best_epoch) finals["best_epoch"] = static_cast<double>(*best_epoch);
    store.complete_run(id, finals);
    return id;
  };
  // The trial's last epoch scored 47%; the weights its run tested, epoch 2's, 79%.
  const int64_t trial = run_with("fp32 trial 0", "t0", 0, {0.5, 0.79, 0.47}, 2);
  EXPECT_DOUBLE_EQ(kept_figure(store, trial, "val_acc"), 0.79);
  EXPECT_EQ(kept_epoch(store, trial), 2);
  // A run that recorded no kept epoch stands on its last.
  EXPECT_DOUBLE_EQ(kept_figure(store, run_with("old", "o0", 0, {0.4, 0.45}, {}), "val_acc"), 0.45);
  const StudyKey key{"vit", "fp32", "h"};
  store.record_study_trial(key, {.trial = 0,
                                 .values = "[0.001]",
                                 .settings = "lr=0.001",
                                 .config_hash = "t0",
                                 .run_id = trial,
                                 .epochs = 3,
                                 .figure = 0.79});
  store.record_study_outcome(
      key, {.best_trial = 0, .figure = 0.79, .values = "[0.001]", .settings = "lr=0.001"});
  CurrentExperiment now;
  now.studies = {
      {.key = key, .method = "random", .metric = WatchedMetric::val_acc, .confirm_repeats = 3}};
  const std::vector<std::pair<double, int64_t>> confirmations = {{0.61, 3}, {0.59, 2}, {0.63, 3}};
  for (size_t r = 0; r < confirmations.size(); ++r) {
    const auto [figure, epoch] = confirmations[r];
    std::vector<double> curve = {0.3, 0.3, 0.3};
    curve[static_cast<size_t>(epoch - 1)] = figure;
    const std::string hash = "c" + std::to_string(r);
    run_with("fp32", hash, static_cast<int64_t>(r), curve, epoch);
    now.variants.push_back({"fp32", hash, "train: {seed: 1}\n", static_cast<int64_t>(r)});
  }
  const Report report = build_report(store, "vit", [&](const ExperimentRecord&) { return now; });
  const ExperimentReport& section = report.experiments.at(0);
  ASSERT_EQ(section.studies.size(), 1u);
  EXPECT_EQ(section.studies[0].confirmations, (std::vector<double>{0.61, 0.59, 0.63}));
  const std::string markdown = render_markdown(report);
  EXPECT_NE(markdown.find("| 1 | 0 | lr=0.001 | 3 | 79.00% (epoch 2's weights, which its run "
                          "tested) |"),
            std::string::npos)
      << markdown;
  EXPECT_NE(markdown.find("on fresh seeds (3 runs): val_acc 61.00% (median; 59.00%–63.00%), "
                          "-18.00 pt from the study's 79.00% (the winner's curse"),
            std::string::npos)
      << markdown;
  EXPECT_EQ(section.answer.rfind("by val_acc, the studies' metric, at each variant's best settings "
                                 "on fresh seeds: fp32 61.0%; ",
                                 0),
            0u)
      << section.answer;
  EXPECT_NE(render_html(report).find("-18.00 pt from the study&#39;s 79.00%"), std::string::npos);
}

TEST_F(ReportTest, RepeatsShowTheirMedianSpreadAndVerdictsBeyondNoise) {
  CurrentExperiment now;
  const std::vector<std::pair<std::string, std::vector<double>>> timings = {
      {"fp32", {100, 120, 110}}, {"bf16", {50, 60, 55}}, {"fsdp", {25, 0, 30}}};
  int64_t position = 0;
  for (const auto& [variant, seconds] : timings) {
    for (size_t r = 0; r < seconds.size(); ++r) {
      const std::string yaml =
          fmt::format("runtime: {{precision: {}}}\ntrain: {{seed: {}}}\n", variant, 123 + r);
      const std::string hash = variant + std::to_string(r);
      now.variants.push_back({variant, hash, yaml, static_cast<int64_t>(r)});
      // fsdp's second repeat failed (0 s stands for it).
      add_run_of(variant, position, seconds[r] > 0 ? RunStatus::completed : RunStatus::failed,
                 seconds[r], 0.9, yaml, hash, static_cast<int64_t>(r));
    }
    ++position;
  }
  const Report report = build_report(store, "", [&](const ExperimentRecord&) { return now; });
  const auto& section = report.experiments.at(0);
  ASSERT_EQ(section.rows.size(), 3u);
  const VariantRow& bf16 = section.rows[1];
  EXPECT_EQ(bf16.completed, 3);
  EXPECT_EQ(bf16.planned, 3);
  EXPECT_DOUBLE_EQ(bf16.metrics.at("train_seconds"), 55);
  EXPECT_DOUBLE_EQ(bf16.spread.at("train_seconds").min, 50);
  EXPECT_DOUBLE_EQ(bf16.spread.at("train_seconds").max, 60);
  // The speedup is the verdict's claim, one number everywhere: the ratio of geometric means (2.0:
  // every bf16 time is half an fp32 one), with its interval — at 97.5%: two variants share the
  // experiment's 95% (Bonferroni) — (scipy: 1.5417-2.5945), where the table used to show the ratio
  // of medians with the extremes' ratios (1.67-2.40).
  EXPECT_NEAR(bf16.metrics.at("speedup"), 2.0, 1e-12);
  EXPECT_NEAR(bf16.spread.at("speedup").min, 1.5416999658, 1e-6);
  EXPECT_NEAR(bf16.spread.at("speedup").max, 2.5945385539, 1e-6);
  EXPECT_EQ(bf16.claims.at("speedup").low, bf16.spread.at("speedup").min);
  EXPECT_EQ(bf16.differs, std::vector<std::string>{"runtime.precision: bf16 (baseline: fp32)"});
  const VariantRow& fsdp = section.rows[2];
  EXPECT_EQ(fsdp.completed, 2);
  EXPECT_DOUBLE_EQ(fsdp.metrics.at("train_seconds"), 27.5);  // the median of two
  EXPECT_NE(fsdp.error.find("2 of 3 completed; repeat 2"), std::string::npos) << fsdp.error;
  // The verdicts: Welch's t-test on log time at 97.5% (scipy gives 1.54-2.59x for bf16,
  // 1.74-9.21x for fsdp's two runs, p = 0.011).
  EXPECT_EQ(section.rows[0].verdict, "baseline");
  EXPECT_EQ(
      bf16.verdict.rfind("2.00× faster (1.54–2.59×, n=3/3, 97.5% each), test accuracy +0.0 pt", 0),
      0u)
      << bf16.verdict;
  EXPECT_NE(fsdp.verdict.find("(1.74–9.21×, n=2/3, 97.5% each)"), std::string::npos)
      << fsdp.verdict;
  EXPECT_NE(fsdp.verdict.find("peak memory +0%"), std::string::npos) << fsdp.verdict;
  // The verdict's speedup: the ratio of geometric means (109.70 s over 27.39 s).
  EXPECT_EQ(section.answer,
            "fastest beyond noise: fsdp, 4.01× faster than fp32, test accuracy +0.0 pt (+0.0 to "
            "+0.0), within the 1 pt margin");

  const std::string md = render_markdown(report);
  EXPECT_NE(md.find("| 3/3 |"), std::string::npos) << md;
  EXPECT_NE(md.find("2.00x (1.54x – 2.59x)"), std::string::npos) << md;
  EXPECT_NE(md.find("3 of 3 variants completed; fastest beyond noise: fsdp"), std::string::npos)
      << md;
  EXPECT_NE(md.find("- **bf16** — 2.00× faster (1.54–2.59×, n=3/3, 97.5% each)"), std::string::npos)
      << md;
  const std::string csv = render_csv(report);
  EXPECT_NE(csv.find(",55,50,60,"), std::string::npos) << csv;
  EXPECT_NE(csv.find(",verdict\n"), std::string::npos) << csv;
  EXPECT_NE(csv.find(",\"2.00× faster (1.54–2.59×, n=3/3, 97.5% each)"), std::string::npos) << csv;
  const std::string html = render_html(report);
  EXPECT_NE(html.find("1.54x – 2.59x"), std::string::npos);
  EXPECT_NE(html.find("<th>n</th>"), std::string::npos);
}

// The answer with a target and prices, on a database of known figures written with the store's own
// API: every time-to-target, speedup, interval and cost below is worked out here from the runs'
// records (the intervals by scipy.stats.ttest_ind(log b, log a, equal_var=False)
// .confidence_interval(0.95), exp'd and swapped into speedups), not read back from the report.
TEST_F(ReportTest, TheAnswerWithATargetAndPricesIsWorkedOutFromTheRecords) {
  const int64_t answer =
      store.upsert_experiment("answer", "answer.yaml", "",
                              "baseline: fp32\ntarget: {metric: val_acc, value: 0.8}\n"
                              "price_per_device_hour: {cpu: 36, H100: 9, default: 1}\n");
  struct Run {
    double train_seconds;
    std::vector<std::pair<double, double>> validations;  // (elapsed seconds, val_acc)
  };
  struct Variant {
    std::string name, device, device_type, ranks;  // ranks "": a run recorded before `ranks`
    int64_t devices;
    std::vector<Run> runs;
    bool epochs_only = false;  // recorded before step records: its epochs' times add up
  };
  const std::vector<Variant> variants = {
      {"fp32",
       "Test CPU",
       "cpu",
       "1",
       1,
       {{100, {{30, 0.5}, {60, 0.79}, {90, 0.81}, {100, 0.85}}},  // reaches at 90 s
        {110, {{33, 0.6}, {66, 0.8}, {99, 0.9}}},                 // at 66 s: 0.8 is reached
        {120, {{40, 0.7}, {80, 0.82}, {120, 0.9}}}}},             // at 80 s
      {"bf16",
       "NVIDIA H100 80GB HBM3",
       "cuda",
       "4",
       4,
       {{50, {{20, 0.81}, {50, 0.9}}}, {55, {{15, 0.7}, {30, 0.85}}}, {60, {{25, 0.83}}}}},
      {"slow",
       "Mystery GPU",
       "",
       "",
       2,
       {{200, {{100, 0.7}, {150, 0.8}}}, {220, {{110, 0.7}, {220, 0.79}}}}},  // one reaches
      {"never", "Test CPU", "cpu", "1", 1, {{90, {{90, 0.5}}}, {96, {{96, 0.5}}}}},
      {"epochs-only",
       "Test CPU",
       "cpu",
       "1",
       1,
       {{85, {{40, 0.7}, {80, 0.85}}}, {90, {{45, 0.81}}}},
       /*epochs_only=*/true},
  };
  CurrentExperiment now;
  int64_t position = 0;
  for (const auto& v : variants) {
    for (size_t r = 0; r < v.runs.size(); ++r) {
      const std::string yaml = fmt::format("variant: {}\ntrain: {{seed: {}}}\n", v.name, r);
      const std::string hash = v.name + std::to_string(r);
      now.variants.push_back({v.name, hash, yaml, static_cast<int64_t>(r)});
      const int64_t id = store.queue_run(answer, {.variant = v.name,
                                                  .position = position,
                                                  .config_yaml = yaml,
                                                  .config_hash = hash,
                                                  .precision = "32-true",
                                                  .strategy = "single",
                                                  .devices = v.devices,
                                                  .repeat = static_cast<int64_t>(r)});
      store.start_run(id, {.device_name = v.device});
      if (!v.ranks.empty())
        store.record_attributes(id, {{"ranks", v.ranks}, {"device_type", v.device_type}});
      const Run& run = v.runs[r];
      double before = 0;
      for (size_t i = 0; i < run.validations.size(); ++i) {
        const auto [elapsed, acc] = run.validations[i];
        if (v.epochs_only) {
          store.record_epoch(id, static_cast<int64_t>(i + 1),
                             {{"val_acc", acc}, {"epoch_seconds", elapsed - before}});
          before = elapsed;
        } else {
          store.record_step(id, static_cast<int64_t>(10 * (i + 1)),
                            {{"val_acc", acc}, {"val_seconds", 1}, {"elapsed_seconds", elapsed}});
        }
      }
      store.complete_run(id, {{"train_seconds", run.train_seconds},
                              {"test_acc", 0.9},
                              {"peak_memory_bytes", 1 << 20}});
    }
    ++position;
  }
  const Report report = build_report(store, "answer", [&](const ExperimentRecord&) { return now; });
  const auto& section = report.experiments.at(0);
  ASSERT_EQ(section.rows.size(), 5u);
  const VariantRow &fp32 = section.rows[0], &bf16 = section.rows[1], &slow = section.rows[2],
                   &never = section.rows[3], &epochs_only = section.rows[4];

  // Time-to-target: each run's first validation at or above 0.8, validation included.
  EXPECT_EQ(fp32.samples.at("time_to_target"), (std::vector<double>{90, 66, 80}));
  EXPECT_DOUBLE_EQ(fp32.metrics.at("time_to_target"), 80);
  EXPECT_DOUBLE_EQ(fp32.spread.at("time_to_target").min, 66);
  EXPECT_DOUBLE_EQ(fp32.spread.at("time_to_target").max, 90);
  EXPECT_EQ(bf16.samples.at("time_to_target"), (std::vector<double>{20, 30, 25}));
  // The verdict's claim (scipy below), where the table used to show 80/25 and 66/30-90/20. Four
  // variants against the baseline: each interval at 1 - 0.05/4 = 98.75% (Bonferroni).
  EXPECT_NEAR(bf16.metrics.at("target_speedup"), 3.1641840, 1e-6);
  EXPECT_NEAR(bf16.spread.at("target_speedup").min, 1.6255961, 1e-6);
  EXPECT_NEAR(bf16.spread.at("target_speedup").max, 6.1590086, 1e-6);
  EXPECT_EQ(slow.target_reached, 1);
  EXPECT_DOUBLE_EQ(slow.metrics.at("time_to_target"), 150);
  EXPECT_EQ(never.target_reached, 0);
  EXPECT_FALSE(never.metrics.count("time_to_target"));
  EXPECT_EQ(epochs_only.samples.at("time_to_target"), (std::vector<double>{80, 45}));

  // Cost: training time x ranks x the device's price per hour. fp32 on the CPU at 36 an hour, one
  // rank; bf16 on 4 H100s at 9; slow, recorded before `ranks`, on its 2 devices at the default 1.
  auto cost = [](double seconds, double ranks, double price) {
    return seconds * ranks / 3600 * price;
  };
  EXPECT_DOUBLE_EQ(fp32.metrics.at("cost"), cost(110, 1, 36));
  EXPECT_DOUBLE_EQ(fp32.metrics.at("cost_to_target"), cost(80, 1, 36));
  EXPECT_DOUBLE_EQ(fp32.metrics.at("device_hours"), 110.0 / 3600);
  EXPECT_DOUBLE_EQ(bf16.metrics.at("cost"), cost(55, 4, 9));
  EXPECT_DOUBLE_EQ(bf16.metrics.at("cost_to_target"), cost(25, 4, 9));
  EXPECT_DOUBLE_EQ(bf16.metrics.at("device_hours"), 55.0 * 4 / 3600);
  EXPECT_DOUBLE_EQ(slow.metrics.at("cost"), cost(210, 2, 1));
  EXPECT_DOUBLE_EQ(slow.metrics.at("cost_to_target"), cost(150, 2, 1));

  // The verdicts, at 98.75%. bf16: 2.00x (scipy 1.4505-2.7577) and 3.16x to target
  // (1.6256-6.1590); its cost
  // 0.55 is 50% under fp32's 1.10, to target 0.25 is 68.75% under 0.80.
  EXPECT_EQ(fp32.verdict,
            "baseline, reaches val_acc ≥ 80.0% in 1m 20s (3 of 3 runs), cost 1.10 a run");
  EXPECT_EQ(
      bf16.verdict,
      "2.00× faster (1.45–2.76×, n=3/3, 98.8% each), to target 3.16× faster (1.63–6.16×, "
      "n=3/3, 98.8% each), test accuracy +0.0 pt (+0.0 to +0.0, within noise), peak memory +0%, "
      "cost 0.55 "
      "(-50%), cost to target 0.25 (-69%)");
  // slow: 1/0.5230 = 1.91x slower (scipy's 0.3486-0.7846 read as slowdowns); one run reached the
  // target, so that speedup is untested: 150 s over the geometric mean of 90, 66 and 80 s (78.07).
  // Cost 0.1167 (-89%), to target 0.0833 (-90%).
  EXPECT_EQ(
      slow.verdict,
      "1.91× slower (1.27–2.87×, n=2/3, 98.8% each), to target 1.92× slower, reached in 1 of "
      "2 runs, "
      "test accuracy +0.0 pt (+0.0 to +0.0, within noise), peak memory +0%, cost 0.12 (-89%), "
      "cost to "
      "target 0.08 (-90%)");
  EXPECT_NE(never.verdict.find(", did not reach val_acc ≥ 80.0%, "), std::string::npos)
      << never.verdict;
  EXPECT_NE(never.verdict.find("cost 0.93 (-15%)"), std::string::npos) << never.verdict;
  // From the epochs' times: 62.5 s; scipy: 1.3006x, 0.0003-5196.6.
  EXPECT_NE(epochs_only.verdict.find(
                "to target time within noise (1.30×, 0.00–5196.60×, n=2/3, 98.8% each)"),
            std::string::npos)
      << epochs_only.verdict;
  EXPECT_EQ(section.answer,
            "fastest to val_acc ≥ 80.0% beyond noise: bf16, 3.16× sooner than fp32, test accuracy "
            "+0.0 pt (+0.0 to +0.0), within the 1 pt margin");

  // The columns join every format; the charts the page.
  const std::string md = render_markdown(report);
  EXPECT_NE(md.find(" time to target | speedup to target |"), std::string::npos) << md;
  EXPECT_NE(md.find(" cost | cost to target |"), std::string::npos) << md;
  EXPECT_NE(md.find("| 25.0s (20.0s – 30.0s) | 3.16x (1.63x – 6.16x) |"), std::string::npos) << md;
  const std::string csv = render_csv(report);
  EXPECT_NE(csv.find(",time_to_target,time_to_target_min,time_to_target_max,"), std::string::npos);
  EXPECT_NE(csv.find(",25,20,30,"), std::string::npos) << csv;
  const std::string html = render_html(report);
  EXPECT_NE(html.find(R"(<svg class="pareto")"), std::string::npos);
  EXPECT_NE(html.find("not reached, not shown: never"), std::string::npos);
  EXPECT_NE(html.find(">not reached</text>"), std::string::npos);  // its time-to-target bar
  EXPECT_NE(html.find("Time to val_acc ≥ 80%"), std::string::npos);

  // In the terminal: at 60 columns no line is longer, and a verdict goes on indented under itself.
  const std::string text = render_answers(report, 60);
  EXPECT_EQ(text.rfind("answer: 5 of 5 variants completed; fastest to val_acc", 0), 0u) << text;
  size_t continued = 0;
  for (const std::string& line : split(text, '\n')) {
    size_t characters = 0;
    for (unsigned char c : line) characters += (c & 0xC0) != 0x80;
    EXPECT_LE(characters, 60u) << line;
    continued += line.rfind("      ", 0) == 0;
  }
  EXPECT_GT(continued, 5u) << text;
  EXPECT_NE(render_answers(report, 0).find(
                "\n  bf16 — 2.00× faster (1.45–2.76×, n=3/3, 98.8% each), to target"),
            std::string::npos);
}

// report.price_per_device_hour: a key names the devices whose name holds it, the longest wins;
// `cpu` is the runs on the CPU, `default` the rest; one number prices every device.
TEST(ReportOptionsTest, PricesMatchDevicesByName) {
  ReportOptions options;
  options.prices = {{"H100", 2.5}, {"H100 NVL", 3}, {"cpu", 0.05}, {"default", 1}};
  EXPECT_EQ(options.price_for("NVIDIA H100 80GB HBM3", "cuda"), 2.5);
  EXPECT_EQ(options.price_for("NVIDIA H100 NVL", "cuda"), 3);
  EXPECT_EQ(options.price_for("Intel(R) Xeon(R)", "cpu"), 0.05);
  EXPECT_EQ(options.price_for("NVIDIA A100", "cuda"), 1);
  options.prices.erase("default");
  EXPECT_EQ(options.price_for("NVIDIA A100", "cuda"), std::nullopt);
  options.prices = {{"", 2}};
  EXPECT_EQ(options.price_for("anything", ""), 2);
}

TEST(ReportOptionsTest, BadTargetsAndPricesAreNamedWhereTheyAreWritten) {
  auto problems = [](const std::string& yaml) {
    ConfigTree tree;
    flatten_into(tree, YAML::Load(yaml), "exp.yaml");
    Diagnostics diagnostics;
    const ReportOptions options = decode_report_options(tree.subtree("report"), {}, diagnostics);
    return diagnostics.empty() ? std::string() : diagnostics.format();
  };
  EXPECT_EQ(problems("report: {target: {metric: val_acc, value: 0.9}, price_per_device_hour: 2}"),
            "");
  EXPECT_NE(problems("report: {target: {value: 0.9}}").find("needs 'report.target.metric'"),
            std::string::npos);
  EXPECT_NE(problems("report: {target: {metric: val_acc, value: 90}}").find("write a fraction"),
            std::string::npos);
  EXPECT_NE(problems("report: {target: {metric: test_acc, value: 0.9}}").find("one of"),
            std::string::npos);
  const std::string price = problems("report:\n  price_per_device_hour: {H100: cheap}\n");
  EXPECT_NE(price.find("exp.yaml:2:"), std::string::npos) << price;
  EXPECT_NE(price.find("'report.price_per_device_hour.H100' must be a number ≥ 0"),
            std::string::npos)
      << price;
  EXPECT_NE(problems("report: {price_per_device_hour: -1}").find("must be a number ≥ 0"),
            std::string::npos);
  // What the store keeps reads back the same.
  ConfigTree tree;
  flatten_into(tree,
               YAML::Load("report: {target: {metric: val_loss, value: 0.3}, "
                          "price_per_device_hour: {H100: 2.5, cpu: 0.05}}"),
               "exp.yaml");
  Diagnostics diagnostics;
  const ReportOptions options = decode_report_options(tree.subtree("report"), {}, diagnostics);
  ConfigTree again;
  flatten_into(again, YAML::Load(encode_report_options(options)), "stored");
  const ReportOptions read = decode_report_options(again, {}, diagnostics);
  EXPECT_TRUE(diagnostics.empty()) << diagnostics.format();
  EXPECT_EQ(read.prices, options.prices);
  EXPECT_EQ(read.target_metric, "val_loss");
  EXPECT_DOUBLE_EQ(read.target_value, 0.3);
}

// Names from YAML show literally in Markdown: a '|' does not end the cell, HTML is not passed
// through, '*' marks nothing up, and a newline does not end the row.
// The Pareto chart's labels stay inside its plot area, however the markers crowd an edge: never
// over the axes' tick labels or titles. Eight long names, four of them at nearly the fastest time.
TEST_F(ReportTest, ParetoLabelsStayInsideThePlotArea) {
  CurrentExperiment now;
  std::mt19937 random(7);
  for (int v = 0; v < 8; ++v) {
    const std::string variant = fmt::format("a-variant-with-a-long-name-{}", v);
    const double seconds = v < 4 ? 10 + 0.2 * v : 10 + static_cast<double>(random() % 100);
    const double accuracy = 0.5 + 0.05 * static_cast<double>(random() % 10);
    now.variants.push_back({variant, variant, "{}", 0});
    add_run_of(variant, v, RunStatus::completed, seconds, accuracy, "{}", variant);
  }
  const std::string html =
      render_html(build_report(store, "", [&](const ExperimentRecord&) { return now; }));
  const size_t begin = html.find(R"(<svg class="pareto")");
  ASSERT_NE(begin, std::string::npos);
  const std::string svg = html.substr(begin, html.find("</svg>", begin) - begin);
  // The plot area (charts.cpp: left 64, top 30, 420 x 240) and a label's box as the chart sizes
  // it: 7 px a character, 14 px high, its baseline 3 px above the box's bottom.
  const std::regex label(
      R"re(<text x="([0-9.]+)" y="([0-9.]+)"(?: fill="[^"]*")?>(a-variant[^<]*)</text>)re");
  int labels = 0;
  for (std::sregex_iterator it(svg.begin(), svg.end(), label), end; it != end; ++it, ++labels) {
    const double x = std::stod((*it)[1]), y = std::stod((*it)[2]);
    const double width = 7.0 * static_cast<double>((*it)[3].length());
    EXPECT_GE(x, 64 - 0.05) << (*it)[3];
    EXPECT_LE(x + width, 64 + 420 + 0.05) << (*it)[3];
    EXPECT_GE(y + 3 - 14, 30 - 0.05) << (*it)[3];
    EXPECT_LE(y + 3, 30 + 240 + 0.05) << (*it)[3];
  }
  EXPECT_EQ(labels, 8) << svg;
}

TEST_F(ReportTest, MarkdownShowsNamesLiterally) {
  add_run("a|b <i>x</i> *y*", 0, RunStatus::completed, 10, 0.5);
  add_run("fp32", 1, RunStatus::failed, 0, 0);
  const std::string md = render_markdown(build_report(store));
  EXPECT_NE(md.find("| a\\|b &lt;i>x&lt;/i> \\*y\\* | completed |"), std::string::npos) << md;
  EXPECT_NE(md.find("- **a\\|b &lt;i>x&lt;/i> \\*y\\*** — "), std::string::npos) << md;
  EXPECT_EQ(md.find("<i>"), std::string::npos) << md;
  EXPECT_NE(md.find("- fp32: it &lt;broke>"), std::string::npos) << md;
}

TEST_F(ReportTest, UnknownExperimentIsAUserError) {
  EXPECT_THROW(build_report(store, "vti"), UserError);
  try {
    build_report(store, "vti");
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("did you mean 'vit'"), std::string::npos);
  }
}

TEST(HtmlEscapeTest, EscapesEverySpecialCharacter) {
  EXPECT_EQ(html_escape(R"(<a href="x">'&'</a>)"),
            "&lt;a href=&quot;x&quot;&gt;&#39;&amp;&#39;&lt;/a&gt;");
  // Terminal colours and a right-to-left override ("Trojan Source") are replaced; text stays.
  EXPECT_EQ(html_escape("\x1b[31mred\t\xe2\x80\xae"
                        "abc\xc3\xa9\n"),
            "\xef\xbf\xbd[31mred\t\xef\xbf\xbd"
            "abc\xc3\xa9\n");
}

}  // namespace
}  // namespace trainyard

namespace trainyard {
namespace {

// Strings from YAML, logs, file names and errors, made of hostile fragments at random, in every
// place a report shows them (experiment name, description and title, variants, errors, attributes,
// curve labels, links): the HTML has no tag, attribute or comment the report does not make itself,
// no hostile fragment raw, and no control or bidi-override character.
TEST(ReportEscapingProperty, RandomHostileStringsNeverBecomeMarkup) {
  const std::vector<std::string> fragments = {"</script>",
                                              "<script>alert(1)</script>",
                                              "\" onmouseover=\"x()",
                                              "' onclick='y()'",
                                              "<img src=x onerror=z()>",
                                              "<!--",
                                              "-->",
                                              "]]>",
                                              "<![CDATA[",
                                              "&amp;",
                                              "&#60;",
                                              "<svg/onload=w>",
                                              "</textarea>",
                                              "\xe2\x80\xae",
                                              "\xe2\x81\xa6",
                                              "\x01",
                                              "\x1b[31m",
                                              "\x7f",
                                              "\t",
                                              "\n",
                                              "\xc3\xa9",
                                              "\xe6\x9d\xb1\xe4\xba\xac",
                                              "javascript:",
                                              "{0}",
                                              "%s",
                                              "\\",
                                              "`",
                                              "a",
                                              "Z",
                                              "7"};
  // The tags, attributes and comments of `html`, as a browser's tokenizer would see them.
  auto tags_and_attributes = [](const std::string& html) {
    std::set<std::string> names;
    auto is_name = [](char c) {
      return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == ':' || c == '_';
    };
    for (size_t i = html.find('<'); i != std::string::npos; i = html.find('<', i + 1)) {
      if (html.compare(i, 4, "<!--") == 0) {
        names.insert("comment");
        continue;
      }
      size_t k = i + 1;
      if (k < html.size() && html[k] == '/') ++k;
      const size_t name_begin = k;
      while (k < html.size() && is_name(html[k])) ++k;
      if (k == name_begin) continue;  // not a tag
      names.insert("tag " + html.substr(name_begin, k - name_begin));
      while (k < html.size() && html[k] != '>') {
        if (!is_name(html[k])) {
          ++k;
          continue;
        }
        const size_t a = k;
        while (k < html.size() && is_name(html[k])) ++k;
        names.insert("attribute " + html.substr(a, k - a));
        if (k < html.size() && html[k] == '=') {
          ++k;
          if (k < html.size() && (html[k] == '"' || html[k] == '\'')) {
            k = html.find(html[k], k + 1);  // the value, whatever it holds
            if (k == std::string::npos) return names;
            ++k;
          } else {
            while (k < html.size() && html[k] != ' ' && html[k] != '>') ++k;
          }
        }
      }
      i = k;
    }
    return names;
  };
  auto add_experiment = [](Store& store, const std::vector<std::string>& s) {
    const int64_t experiment =
        store.upsert_experiment(s[0], s[1] + ".yaml", s[2],
                                "baseline: " + std::string("base") + "\ntitle: '" + "t" + "'\n");
    for (int v = 0; v < 3; ++v) {
      const std::string variant = v == 0 ? "base" : s[3 + v];
      const int64_t id = store.queue_run(experiment, {.variant = variant,
                                                      .position = v,
                                                      .config_yaml = "a: " + std::to_string(v),
                                                      .config_hash = "h" + std::to_string(v),
                                                      .precision = "32-true",
                                                      .strategy = "single"});
      store.start_run(
          id, {.git_revision = s[6], .device_name = s[7], .log_path = "/x/" + s[8] + ".log"});
      store.record_attributes(id, {{"end_reason", s[9]}, {s[10], s[11]}});
      store.record_epoch(id, 1, {{"train_loss", 1.0}, {"val_loss", 0.9}, {"val_acc", 0.5}});
      store.record_epoch(id, 2, {{"train_loss", 0.5}, {"val_loss", 0.6}, {"val_acc", 0.6}});
      if (v == 2)
        store.end_run(id, RunStatus::failed, s[12], FailureClass::crashed);
      else
        store.complete_run(id, {{"train_seconds", 10.0 + v}, {"test_acc", 0.5}});
    }
  };
  std::set<std::string> allowed;
  {
    testing::TempDir dir;
    Store store((dir.path() / "r.db").string());
    std::vector<std::string> plain;
    for (int i = 0; i < 13; ++i) plain.push_back("plain" + std::to_string(i));
    add_experiment(store, plain);
    allowed = tags_and_attributes(render_html(build_report(store)));
  }
  std::mt19937 random(20261201);
  for (int trial = 0; trial < 60; ++trial) {
    std::vector<std::string> strings;
    for (int i = 0; i < 13; ++i) {
      std::string s = "s" + std::to_string(i);  // never empty, and distinct
      for (int n = 1 + random() % 5; n > 0; --n) s += fragments[random() % fragments.size()];
      strings.push_back(s);
    }
    testing::TempDir dir;
    Store store((dir.path() / "r.db").string());
    add_experiment(store, strings);
    const std::string html = render_html(build_report(store));
    for (const std::string& found : tags_and_attributes(html))
      EXPECT_TRUE(allowed.count(found)) << found << " from one of:\n"
                                        << ::testing::PrintToString(strings);
    for (const std::string& fragment : fragments) {
      if (fragment.find_first_of("<>\"'") == std::string::npos) continue;
      for (const std::string& s : strings)
        if (s.find(fragment) != std::string::npos) {
          EXPECT_EQ(html.find(fragment), std::string::npos) << fragment;
        }
    }
    for (unsigned char c : html)
      EXPECT_TRUE(c >= 0x20 || c == '\n' || c == '\t' || c == '\r') << static_cast<int>(c);
    EXPECT_EQ(html.find('\x7f'), std::string::npos);
    EXPECT_EQ(html.find("\xe2\x80\xae"), std::string::npos);  // U+202E RIGHT-TO-LEFT OVERRIDE
    EXPECT_EQ(html.find("\xe2\x81\xa6"), std::string::npos);  // U+2066 LEFT-TO-RIGHT ISOLATE
    if (HasFailure()) break;
  }
}

}  // namespace
}  // namespace trainyard
