// The report's numbers come from the database: latest completed run per variant, speedup over the
// baseline, escaping of everything that came from YAML.
#include <gtest/gtest.h>

#include "reports/report.h"
#include "tests/test_support.h"

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
    int64_t id = store.queue_run(
        experiment,
        {variant, position, "{}", variant + std::to_string(seconds), "32-true", "single", 1});
    store.start_run(id, {"rev", "2.11.0", "Test CPU", ""});
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
  const auto& section = build_report(store).experiments[0];
  ASSERT_EQ(section.rows.size(), 2u);
  EXPECT_DOUBLE_EQ(section.rows[0].metrics.at("train_seconds"), 80);
  EXPECT_EQ(section.rows[1].status, RunStatus::failed);
  EXPECT_EQ(section.rows[1].metrics.count("speedup"), 0u);
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
  EXPECT_NE(md.find("| bf16 | completed | 32-true | 1 | single | 1m 00s | 2.00x | 91.0% |"),
            std::string::npos)
      << md;
  std::string csv = render_csv(report);
  EXPECT_NE(csv.find("vit,bf16,"), std::string::npos);
  EXPECT_NE(csv.find(",60,"), std::string::npos);
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
}

}  // namespace
}  // namespace trainyard
