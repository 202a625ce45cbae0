// The morning report of a real batch — repeated, failed and resumed runs, a target and prices —
// rendered by headless Chromium (Debian's chromium, which scripts/setup.sh installs): it loads
// without a console message, its charts are in the DOM, nothing scrolls sideways at 1400 px nor in
// its print layout at an A4 page's width, no two labels of a chart overlap, and a screenshot and
// the printed PDF are kept with the test's output (build/test-output/report.png, report.pdf).
#include <signal.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <regex>
#include <thread>

#include <gtest/gtest.h>

#include "db/store.h"
#include "tests/cli_support.h"

namespace trainyard {
namespace {

namespace fs = std::filesystem;
using testing::Result;
using testing::shell;
using testing::trainyard;

size_t count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

// At `width` px the page does not scroll sideways, nor does any table in its box, and no two
// labels of a chart overlap: a copy of the report with a script that measures (the report itself
// has none) is dumped at that width. The overlaps it finds are named, chart and labels.
void expect_it_fits(const std::string& chromium, const fs::path& html, std::string page,
                    const std::string& name, int width) {
  const std::string measuring =
      "<script>let worst = document.documentElement.scrollWidth - "
      "document.documentElement.clientWidth; for (const box of "
      "document.querySelectorAll('.wide')) worst = Math.max(worst, box.scrollWidth - "
      "box.clientWidth); document.body.dataset.overflow = worst; const overlaps = []; "
      "for (const svg of document.querySelectorAll('svg')) { const boxes = "
      "[...svg.querySelectorAll('text')].map(t => [t.textContent, t.getBoundingClientRect()]); "
      "for (let i = 0; i < boxes.length; ++i) for (let j = i + 1; j < boxes.length; ++j) { "
      "const [a, r] = boxes[i], [b, s] = boxes[j]; if (r.left < s.right - 1 && s.left < r.right - "
      "1 "
      "&& r.top < s.bottom - 1 && s.top < r.bottom - 1) "
      "overlaps.push(svg.getAttribute('aria-label') "
      "+ ': ' + a + ' / ' + b); } } document.body.dataset.overlaps = overlaps.length; "
      "document.body.dataset.overlapping = overlaps.join(' | ');</script></body>";
  page.replace(page.rfind("</body>"), 7, measuring);
  const fs::path measured = html.parent_path() / name;
  std::ofstream(measured) << page;
  Result dump = shell(chromium + " --window-size=" + std::to_string(width) +
                      ",1000 --dump-dom file://" + measured.string());
  EXPECT_EQ(dump.exit_code, 0) << dump.output;
  std::smatch found;
  const std::regex overflow(R"re(data-overflow="(-?[0-9]+)")re");
  const std::regex overlaps(R"re(data-overlaps="([0-9]+)" data-overlapping="([^"]*)")re");
  if (!std::regex_search(dump.output, found, overflow)) {
    ADD_FAILURE() << dump.output.substr(0, 400);
    return;
  }
  EXPECT_LE(std::stoi(found[1].str()), 0) << "pixels of sideways scrolling at " << width << " px";
  ASSERT_TRUE(std::regex_search(dump.output, found, overlaps)) << dump.output.substr(0, 400);
  EXPECT_EQ(found[1].str(), "0") << "overlapping labels: " << found[2].str();
}

// Chromium as root needs --no-sandbox; --dump-dom prints the DOM once the page has loaded, and
// logging to stderr shows the page's console messages ("CONSOLE(...)").
std::string chromium_in(const fs::path& dir) {
  return "timeout 120 chromium --headless=new --no-sandbox --disable-gpu --no-first-run "
         "--user-data-dir=" +
         (dir / "chromium").string();
}

class ReportBrowserTest : public testing::CliTest {};

TEST_F(ReportBrowserTest, TheReportOfARealBatchRendersInChromium) {
  ASSERT_EQ(shell("command -v chromium").exit_code, 0)
      << "chromium is missing: scripts/setup.sh installs it (Debian's chromium)";
  const std::string broken = testing::failing_data_set(dir);
  const std::string file = dir.write("morning.yaml", R"(
name: morning
description: fp32 against bf16-mixed, twice each; one variant with broken data
model: {name: vit, image_size: 16, patch_size: 4, depth: 1, width: 16, heads: 2, mlp_dim: 32, num_classes: 4, dropout: 0.1}
dataset: {name: synthetic-images, train_size: 2048, val_size: 64, test_size: 64, num_classes: 4}
train: {epochs: 3, batch_size: 16, log_every: 16, val_every_steps: 64, checkpoint_every_steps: 10}
runtime: {accelerator: cpu, threads: 1}
sweep:
  repeats: 2
  variants:
    - name: fp32
    - {name: bf16, set: {runtime.precision: bf16-mixed}}
    - {name: broken, set: )" + broken + R"(}
report:
  target: {metric: val_acc, value: 0.3}
  price_per_device_hour: {cpu: 0.1}
)");
  // The first run is killed mid-epoch and continued by the second batch: a resumed run.
  pid_t controller = testing::start_run(file, db());
  testing::KillOnExit guard{controller};
  const fs::path logs = dir.path() / "runs" / "logs";
  for (int i = 0; i < 1200; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(25));
    const auto [epoch, batch] = testing::checkpoint_position(logs);
    if (epoch == 1 && batch > 0) break;
  }
  kill(controller, SIGKILL);
  testing::exit_code_of(controller);
  Result batch = trainyard("run " + file + " --db " + db());
  EXPECT_EQ(batch.exit_code, 1) << batch.output;  // the broken variant failed
  {
    Store store(db());
    ASSERT_EQ(store.runs("morning").size(), 6u);
    EXPECT_EQ(store.runs("morning")[0].resumes, 1);
  }

  const fs::path html = dir.path() / "report" / "report.html";
  Result report = trainyard("report --db " + db() + " -o " + html.string());
  ASSERT_EQ(report.exit_code, 0) << report.output;

  const std::string chromium = chromium_in(dir.path());
  Result dom = shell(chromium + " --enable-logging=stderr --v=0 --dump-dom file://" +
                     html.string() + " 2>" + (dir.path() / "console.txt").string());
  ASSERT_EQ(dom.exit_code, 0) << dom.output;
  const std::string console = testing::read_file(dir.path() / "console.txt");
  EXPECT_EQ(console.find("CONSOLE"), std::string::npos) << console;
  // Loss by step; loss and accuracy per epoch, training and validation; accuracy over time.
  EXPECT_EQ(count(dom.output, R"(<svg class="curve")"), 6u);
  EXPECT_GE(count(dom.output, "<path d=\"M"), 12u);            // a line per variant and chart
  EXPECT_GE(count(dom.output, R"(<path class="band")"), 12u);  // the repeats' min-max
  EXPECT_EQ(count(dom.output, R"(<svg class="pareto")"), 1u);
  EXPECT_NE(dom.output.find("target 30%"), std::string::npos);  // the target's line
  EXPECT_NE(dom.output.find("Validation's cost"), std::string::npos);
  EXPECT_NE(dom.output.find("failed (bad-input)"), std::string::npos);
  EXPECT_NE(dom.output.find("<td>2/2</td>"), std::string::npos);  // n of the repeated variants
  EXPECT_NE(dom.output.find("continued 1 time"), std::string::npos);
  EXPECT_NE(dom.output.find("runtime.precision: bf16-mixed"), std::string::npos);
  // The run files are linked relative to the report, and exist there.
  const std::regex link(R"(href="(\.\./runs/logs/[^"]+\.log)\")");
  std::smatch match;
  ASSERT_TRUE(std::regex_search(dom.output, match, link));
  EXPECT_TRUE(fs::exists(html.parent_path() / match[1].str())) << match[1].str();

  const std::string page = testing::read_file(html);
  expect_it_fits(chromium, html, page, "measured.html", 1400);
  // Printed: the print rules (forced on screen here) at an A4 page's width between its 12 mm
  // margins, 186 mm = 703 CSS px; and the PDF Chromium prints is A4.
  expect_it_fits(chromium, html, std::regex_replace(page, std::regex("@media print"), "@media all"),
                 "printed.html", 703);
  const fs::path output = fs::path(TRAINYARD_TEST_OUTPUT_DIR);
  fs::create_directories(output);
  const fs::path pdf = output / "report.pdf";
  fs::remove(pdf);
  Result printed = shell(chromium + " --no-pdf-header-footer --print-to-pdf=" + pdf.string() +
                         " file://" + html.string());
  ASSERT_EQ(printed.exit_code, 0) << printed.output;
  const std::string pdf_bytes = testing::read_file(pdf);
  EXPECT_EQ(pdf_bytes.rfind("%PDF", 0), 0u);
  EXPECT_NE(pdf_bytes.find("/MediaBox [0 0 594.95996 841.91998]"), std::string::npos)
      << "not an A4 page";
  const fs::path screenshot = output / "report.png";
  fs::remove(screenshot);
  Result shot = shell(chromium + " --window-size=1400,2600 --screenshot=" + screenshot.string() +
                      " file://" + html.string());
  ASSERT_EQ(shot.exit_code, 0) << shot.output;
  ASSERT_TRUE(fs::exists(screenshot));
  EXPECT_GT(fs::file_size(screenshot), 20000u);  // a rendered page, not a blank one
}

// A study's section (sweep.search): its table, decisions, parallel coordinates and curves load
// without a console message, fit at 1400 px and printed, and draw a line per trial.
TEST_F(ReportBrowserTest, AStudysSectionRendersInChromium) {
  const std::string file = dir.write("tuned.yaml", R"(
name: tuned
model: {name: vit, image_size: 8, patch_size: 4, depth: 1, width: 16, heads: 2, mlp_dim: 32, num_classes: 4}
dataset: {name: synthetic-images, train_size: 64, val_size: 32, test_size: 32, num_classes: 4, image_size: 8}
train: {epochs: 3, batch_size: 16, log_every: 100, optimizer: {name: adamw, lr: 1.0e-3}}
runtime: {accelerator: cpu, threads: 1, data_workers: 0}
sweep:
  search:
    method: random
    trials: 7
    space:
      train.optimizer.lr: {log_uniform: [1.0e-4, 1.0e-1]}
      train.optimizer.weight_decay: {uniform: [0.0, 0.2]}
      train.batch_size: {choice: [8, 16]}
    schedule: {name: successive-halving, grace_epochs: 1, reduction: 2}
    confirm_repeats: 1
)");
  Result run = trainyard("run " + file + " --db " + db());
  ASSERT_EQ(run.exit_code, 0) << run.output;
  const fs::path html = dir.path() / "report" / "tuned.html";
  ASSERT_EQ(trainyard("report --db " + db() + " -o " + html.string()).exit_code, 0);
  const std::string chromium = chromium_in(dir.path());
  Result dom = shell(chromium + " --enable-logging=stderr --v=0 --dump-dom file://" +
                     html.string() + " 2>" + (dir.path() / "console.txt").string());
  ASSERT_EQ(dom.exit_code, 0) << dom.output;
  const std::string console = testing::read_file(dir.path() / "console.txt");
  EXPECT_EQ(console.find("CONSOLE"), std::string::npos) << console;
  EXPECT_NE(dom.output.find("<h3>Study: default (7 random trials, by val_loss)</h3>"),
            std::string::npos);
  EXPECT_EQ(count(dom.output, R"(<svg class="chart parallel")"), 1u);
  const size_t parallel = dom.output.find(R"(<svg class="chart parallel")");
  const std::string chart =
      dom.output.substr(parallel, dom.output.find("</svg>", parallel) - parallel);
  EXPECT_EQ(count(chart, "<path d=\"M"), 7u) << "a line per trial";
  EXPECT_EQ(count(dom.output, R"(<tr class="best">)"), 1u);
  EXPECT_EQ(count(dom.output, "<li>rung "), 2u);  // rungs at epochs 1 and 2, then 3
  EXPECT_GE(count(dom.output, ">paused<"), 5u);
  const std::string page = testing::read_file(html);
  expect_it_fits(chromium, html, page, "measured.html", 1400);
  expect_it_fits(chromium, html, std::regex_replace(page, std::regex("@media print"), "@media all"),
                 "printed.html", 703);
}

}  // namespace
}  // namespace trainyard
