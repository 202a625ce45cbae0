// The HTML report: one self-contained file (inline CSS and SVG; no scripts, fonts or network).
// It renders what the report decided (reports/comparison.cpp: verdicts, intervals, each column's
// best) and lays out the charts (reports/charts.h); it decides nothing itself.
#include <algorithm>
#include <array>
#include <cmath>
#include <filesystem>
#include <numeric>
#include <optional>
#include <set>

#include <fmt/format.h>

#include "common/metrics.h"
#include "common/text.h"
#include "reports/charts.h"
#include "reports/report.h"
#include "reports/statistics.h"

namespace trainyard {

namespace {

const char* const kStyle = R"css(
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; margin: 2rem auto; max-width: 86rem; color: #1d2330; padding: 0 1rem; }
h1 { font-size: 1.6rem; margin-bottom: .2rem; } h2 { margin-top: 2.5rem; border-bottom: 1px solid #d8dde6; padding-bottom: .3rem; }
.meta { color: #5b6475; font-size: .9rem; }
.note { background: #fff6dc; border-left: 3px solid #e0a800; padding: .4rem .7rem; }
ul.verdicts { padding-left: 1.2rem; } ul.verdicts li { margin: .15rem 0; overflow-wrap: anywhere; }
table { border-collapse: collapse; margin: 1rem 0; font-variant-numeric: tabular-nums; font-size: .95em; }
th, td { padding: .3rem .5rem; border-bottom: 1px solid #e4e8ef; text-align: right; white-space: nowrap; }
th { background: #f3f5f9; font-weight: 600; white-space: normal; vertical-align: bottom; } th:first-child, td:first-child { text-align: left; }
td.text { text-align: left; } td.best { font-weight: 700; color: #0b6e3a; }
tr.baseline td:first-child::after { content: " baseline"; font-size: .75rem; color: #5b6475; }
.status { font-size: .75rem; padding: .1rem .4rem; border-radius: .6rem; background: #eee; white-space: nowrap; display: inline-block; }
table.results td:first-child { white-space: normal; min-width: 6rem; }
.status.failed { background: #fde2e1; color: #a11; } .status.interrupted, .status.skipped { background: #fff2cc; color: #7a5b00; }
.error { color: #a11; text-align: left; white-space: pre-wrap; overflow-wrap: anywhere; font-family: ui-monospace, monospace; font-size: .8rem; }
.charts { display: flex; flex-wrap: wrap; gap: 2rem; align-items: flex-start; } svg text { font: 12px system-ui, sans-serif; fill: #1d2330; } svg text.tick { font-size: 11px; fill: #5b6475; }
td.files { font-size: .8rem; } h4 .meta { font-weight: 400; }
div.classes { display: flex; flex-wrap: wrap; gap: 1.5rem; align-items: flex-start; }
pre.sample { white-space: pre-wrap; background: #f6f7f9; padding: .5rem .7rem; margin: .3rem 0; font-size: .85rem; }
svg { max-width: 100%; height: auto; }
details { margin: 1rem 0; } summary { cursor: pointer; color: #2451a6; }
.wide { overflow-x: auto; } .range { display: block; color: #5b6475; font-size: .75rem; white-space: normal; }
.differs { text-align: left; white-space: normal; min-width: 10rem; max-width: 18rem; overflow-wrap: anywhere; font-family: ui-monospace, monospace; font-size: .75rem; color: #3d4658; }
nav ul { columns: 2; } nav li { break-inside: avoid-column; } .summary { color: #3d4658; }
@page { size: A4; margin: 12mm; }
@media print { details::details-content { display: block; content-visibility: visible; } }
@media print { body { margin: 0; padding: 0; max-width: none; font-size: 9px; } h1 { font-size: 16px; } h2 { font-size: 13px; margin-top: 1.2rem; } .meta, .summary { font-size: 1em; } table { font-size: 8px; } th, td { padding: .1rem .2rem; white-space: normal; } .range, .differs, .status, .error { font-size: 7px; } .differs { min-width: 8em; max-width: 12em; } table.results td:first-child { min-width: 0; } .files { display: none; } .wide { overflow: visible; } details { display: block; } details > summary { display: none; } svg, tr { break-inside: avoid; } .charts { gap: .5rem; } a { color: inherit; } }
@media (max-width: 40rem) { body { margin: 1rem auto; } nav ul { columns: 1; } th, td { padding: .25rem .4rem; } }
)css";

// A path as the report links it: relative to the report's folder when it has one.
std::string link_path(const Report& report, const std::string& path) {
  if (report.output_dir.empty()) return path;
  std::error_code ec;
  const auto relative = std::filesystem::relative(path, report.output_dir, ec);
  return ec || relative.empty() ? path : relative.string();
}

// "failed (crashed)", "interrupted", "not started": how a run that did not complete ended.
std::string status_badge(const VariantRow& row) {
  if (row.run_id == 0) return R"( <span class="status queued">not run</span>)";
  if (row.status == RunStatus::completed) return "";
  if (row.failure == FailureClass::not_started)
    return R"( <span class="status interrupted">not started</span>)";
  const bool named = row.failure != FailureClass::none && row.failure != FailureClass::interrupted;
  return fmt::format(R"( <span class="status {0}">{0}{1}</span>)", to_string(row.status),
                     named ? fmt::format(" ({})", to_string(row.failure)) : "");
}

bool any_repeats(const ExperimentReport& section) {
  return std::any_of(section.rows.begin(), section.rows.end(),
                     [](const VariantRow& row) { return row.planned > 1; });
}

// A figure in a table cell: its number and unit never split over two lines.
std::string unbroken(const std::string& text) {
  std::string out;
  for (char c : html_escape(text)) out += c == ' ' ? std::string("&nbsp;") : std::string(1, c);
  return out;
}

// The precision, devices and strategy of every row: one column each where the rows differ in it,
// else one line above the table (the table keeps its width for the figures).
struct SetupColumns {
  bool precision = false, devices = false, strategy = false;
  std::string shared{};  // "precision 32-true · 1 device · strategy single"
};

SetupColumns setup_columns(const ExperimentReport& section) {
  SetupColumns columns;
  std::vector<std::string> shared;
  const VariantRow* first = nullptr;
  for (const auto& row : section.rows)
    if (row.run_id != 0) {
      first = first ? first : &row;
      columns.precision = columns.precision || row.precision != first->precision;
      columns.devices = columns.devices || row.devices != first->devices;
      columns.strategy = columns.strategy || row.strategy != first->strategy;
    }
  if (!first) return {true, true, true};
  if (!columns.precision) shared.push_back("precision " + first->precision);
  if (!columns.devices) shared.push_back(plural(first->devices, "device"));
  if (!columns.strategy) shared.push_back("strategy " + first->strategy);
  if (!shared.empty()) columns.shared = "Every variant: " + join(shared, " · ");
  return columns;
}

std::string results_table(const Report& report, const ExperimentReport& section) {
  const bool repeats = any_repeats(section);
  const SetupColumns setup = setup_columns(section);
  std::string html =
      setup.shared.empty() ? "" : R"(<p class="meta">)" + html_escape(setup.shared) + "</p>";
  html += R"(<div class="wide"><table class="results"><thead><tr><th>variant</th>)";
  if (repeats) html += "<th>n</th>";
  if (setup.precision) html += "<th>precision</th>";
  if (setup.devices) html += "<th>devices</th>";
  if (setup.strategy) html += "<th>strategy</th>";
  html += "<th>differs from the baseline in</th>";
  for (const auto& key : section.options.metrics)
    html += "<th>" + html_escape(find_metric(key)->label) + "</th>";
  html += R"(<th class="files">files</th></tr></thead><tbody>)";
  const size_t columns = 3 + (repeats ? 1 : 0) + (setup.precision ? 1 : 0) +
                         (setup.devices ? 1 : 0) + (setup.strategy ? 1 : 0) +
                         section.options.metrics.size();
  for (const auto& row : section.rows) {
    html += fmt::format(R"(<tr{}><td>{}{})",
                        row.variant == section.baseline ? R"( class="baseline")" : "",
                        html_escape(row.variant), status_badge(row));
    if (repeats) html += fmt::format("</td><td>{}/{}", row.completed, row.planned);
    html += "</td>";
    if (setup.precision) html += R"(<td class="text">)" + html_escape(row.precision) + "</td>";
    if (setup.devices) html += fmt::format("<td>{}</td>", row.devices);
    if (setup.strategy) html += R"(<td class="text">)" + html_escape(row.strategy) + "</td>";
    std::vector<std::string> differs;
    for (const auto& difference : row.differs) differs.push_back(html_escape(difference));
    html +=
        R"(<td class="differs">)" +
        (row.variant == section.baseline ? std::string("(the baseline)") : join(differs, "<br>")) +
        "</td>";
    for (const auto& key : section.options.metrics) {
      const MetricInfo& info = *find_metric(key);
      auto it = row.metrics.find(key);
      if (it == row.metrics.end()) {
        html += "<td>—</td>";
        continue;
      }
      const bool is_best = row.best.count(key) > 0;
      std::string range;  // the repeats' min-max under the median
      if (auto spread = row.spread.find(key); spread != row.spread.end())
        range = fmt::format(R"(<span class="range">{} – {}</span>)",
                            unbroken(format_metric(info, spread->second.min)),
                            unbroken(format_metric(info, spread->second.max)));
      html += fmt::format("<td{}>{}{}</td>", is_best ? R"( class="best")" : "",
                          unbroken(format_metric(info, it->second)), range);
    }
    html += R"(<td class="text files">)";
    std::vector<std::string> files;  // every repeat's, not only the shown one's
    for (const auto& run : row.repeats) {
      if (run.config_path.empty()) continue;
      files.push_back(fmt::format(R"({}<a href="{}">config</a> · <a href="{}">log</a>)",
                                  row.repeats.size() > 1 ? fmt::format("run {}: ", run.run_id) : "",
                                  html_escape(link_path(report, run.config_path)),
                                  html_escape(link_path(report, run.log_path))));
    }
    html += join(files, "<br>");
    if (row.resumes > 0)  // it survived interruptions: its log says where it continued from
      html += fmt::format(R"(<br><span class="range">continued {}</span>)",
                          plural(row.resumes, "time"));
    html += "</td></tr>";
    if (!row.error.empty())
      html += fmt::format(R"(<tr><td colspan="{}" class="error">{}</td></tr>)", columns,
                          html_escape(row.error));
  }
  return html + "</tbody></table></div><p class=\"meta\">" + html_escape(kTableLegend) + "</p>";
}

// Runs of this experiment whose configuration is not what its file resolves to now (a smoke test,
// an edited file): listed apart, never in the table, with the keys in which they differ.
// A language model's samples: what each variant writes from a document's start.
std::string samples_html(const ExperimentReport& section) {
  if (section.samples.empty() && section.sample_notes.empty()) return "";
  std::string html =
      R"(<h3>Samples</h3><p class="meta">What each variant writes: 48 tokens from a document's )"
      R"(start, temperature 0.8, top-k 40, seeds 1 and 2, by its first run that kept its weights )"
      R"((<code>trainyard sample RUN</code> writes more).</p>)";
  for (const VariantSample& sample : section.samples) {
    html += fmt::format(R"(<h4>{} <span class="meta">run {}</span></h4>)",
                        html_escape(sample.variant), sample.run_id);
    for (const std::string& text : sample.texts)
      html += R"(<pre class="sample">)" + html_escape(text) + "</pre>";
  }
  for (const std::string& note : section.sample_notes)
    html += R"(<p class="meta">No sample: )" + html_escape(note) + "</p>";
  return html;
}

// A classifier's test split class by class, per variant: its confusion matrix as a heat map and
// each class's precision, recall and F1 (every class up to 20; beyond, the ten of lowest F1).
std::string classes_html(const ExperimentReport& section) {
  if (std::all_of(section.rows.begin(), section.rows.end(),
                  [](const VariantRow& row) { return row.confusion.empty(); }))
    return "";
  std::string html =
      R"(<h3>Classes</h3><p class="meta">The test split class by class, each variant's completed )"
      R"(runs pooled. In the heat map rows are the labels and columns the predictions; a cell's )"
      R"(shade is its share of the row, so the diagonal reads each class's recall. Precision, )"
      R"(recall and F1 as scikit-learn defines them; macro-F1 is the mean F1 over the classes, )"
      R"(each counting alike however rare.</p>)";
  for (const VariantRow& row : section.rows) {
    const ConfusionMatrix& matrix = row.confusion;
    if (matrix.empty()) continue;
    const auto recorded = row.attributes.find("dataset_classes");
    const std::vector<std::string> names = class_names(
        recorded == row.attributes.end() ? std::string() : recorded->second, matrix.classes());
    html += fmt::format(
        R"(<h4>{} <span class="meta">{} pooled, {} test samples: accuracy {:.1f}%, macro-F1 )"
        R"({:.1f}%</span></h4><div class="classes">)",
        html_escape(row.variant), plural(row.confusion_runs, "run"), matrix.total(),
        100 * matrix.accuracy(), 100 * matrix.macro_f1());
    if (matrix.has_cells()) html += confusion_heat_map("Confusion matrix", matrix, names);
    std::vector<int64_t> shown(static_cast<size_t>(matrix.classes()));
    std::iota(shown.begin(), shown.end(), 0);
    std::string caption;
    if (matrix.classes() > 20) {  // the classes it serves worst, of those the split has
      std::erase_if(shown, [&](int64_t c) { return !matrix.occurs(c); });
      std::stable_sort(shown.begin(), shown.end(), [&](int64_t a, int64_t b) {
        return matrix.figures(a).f1 < matrix.figures(b).f1;
      });
      if (shown.size() > 10) shown.resize(10);
      caption = fmt::format(
          "<caption>The {} classes of lowest F1, of {}{}</caption>", shown.size(), matrix.classes(),
          matrix.has_cells() ? "" : " (the matrix's cells are kept up to 100 classes)");
    }
    html += "<table>" + caption +
            "<thead><tr><th>class</th><th>precision</th><th>recall</th><th>F1</th>"
            "<th>support</th></tr></thead><tbody>";
    for (int64_t c : shown) {
      const ClassFigures f = matrix.figures(c);
      html += fmt::format(
          R"(<tr><td class="text">{}</td><td>{:.1f}%</td><td>{:.1f}%</td><td>{:.1f}%</td>)"
          R"(<td>{}</td></tr>)",
          html_escape(names[static_cast<size_t>(c)]), 100 * f.precision, 100 * f.recall, 100 * f.f1,
          f.support);
    }
    html += "</tbody></table></div>";
  }
  return html;
}

std::string other_runs(const ExperimentReport& section) {
  if (section.other_runs.empty()) return "";
  std::string html = fmt::format(
      R"(<h3>Runs of other configurations</h3><p class="meta">Not in the table above: their )"
      R"(configuration is not what <code>{}</code> resolves to now.</p><table><thead><tr>)"
      R"(<th>variant</th><th>run</th><th>status</th><th>ended</th><th>training time</th>)"
      R"(<th>test accuracy (or perplexity)</th><th>speedup</th><th>differs from the file in</th>)"
      R"(</tr></thead><tbody>)",
      html_escape(section.experiment.file));
  for (const auto& run : section.other_runs) {
    std::vector<std::string> lines;
    for (const auto& difference : run.differences) lines.push_back(html_escape(difference));
    html += fmt::format(
        R"(<tr><td class="text">{}</td><td>{}</td><td class="text">{}</td><td class="text">{}</td>)"
        R"(<td>{}</td><td>{}</td><td>{}</td><td class="text">{}</td></tr>)",
        html_escape(run.variant), run.run_id, html_escape(other_run_status(run)),
        html_escape(run.ended_at), html_escape(other_run_figure(run, metric::kTrainSeconds)),
        html_escape(other_run_quality(run, /*name=*/false)),
        run.speedup > 0 ? fmt::format("{:.2f}x", run.speedup) : "—",
        lines.empty() ? "nothing (the same settings, another hash)" : join(lines, "<br>"));
    if (!run.error.empty())
      html +=
          fmt::format(R"(<tr><td colspan="8" class="error">{}</td></tr>)", html_escape(run.error));
  }
  return html + "</tbody></table>";
}

// The runs a variant's curves are drawn from: its completed ones, else (a failed variant) all.
std::vector<const RepeatRun*> curve_runs(const VariantRow& row) {
  std::vector<const RepeatRun*> runs;
  for (const auto& run : row.repeats)
    if (run.status == RunStatus::completed) runs.push_back(&run);
  if (runs.empty())
    for (const auto& run : row.repeats) runs.push_back(&run);
  return runs;
}

// One variant's curve from its runs' points (each run's (x, y) in order): at each position every
// run has, the median x and y, and with several runs a band from the least y to the greatest.
Series median_curve(const std::string& label, const char* color,
                    const std::vector<std::vector<std::pair<double, double>>>& runs) {
  Series s{label, color, {}};
  size_t length = SIZE_MAX;
  size_t with_points = 0;
  for (const auto& run : runs)
    if (!run.empty()) length = std::min(length, run.size()), ++with_points;
  if (with_points == 0) return s;
  for (size_t i = 0; i < length; ++i) {
    std::vector<double> xs, ys;
    for (const auto& run : runs)
      if (!run.empty()) xs.push_back(run[i].first), ys.push_back(run[i].second);
    const double x = median(xs), y = median(ys);
    s.points.emplace_back(x, y);
    if (with_points > 1)
      s.band.push_back(
          {x, *std::min_element(ys.begin(), ys.end()), *std::max_element(ys.begin(), ys.end())});
  }
  return s;
}

// A chart's series: for each variant, `points_of` each of its runs, as a median curve.
template <class PointsOf>
std::vector<Series> variant_curves(const ExperimentReport& section, PointsOf points_of) {
  std::vector<Series> out;
  for (const auto& row : section.rows) {
    std::vector<std::vector<std::pair<double, double>>> runs;
    for (const RepeatRun* run : curve_runs(row)) runs.push_back(points_of(*run));
    Series s = median_curve(row.variant, variant_color(section, row.variant), runs);
    if (!s.points.empty()) out.push_back(std::move(s));
  }
  return out;
}

// The target line of a chart of `key`, when report.target is on that figure.
std::optional<Reference> target_line(const ExperimentReport& section, const std::string& key) {
  if (section.options.target_metric != key) return std::nullopt;
  const double y = charted(key, section.options.target_value);
  return Reference{y, "target " + tick_label(y) + (key == metric::kValLoss ? "" : "%")};
}

// Each validation of a run (reports/report.h's validations): (training time so far, its `key`).
std::vector<std::pair<double, double>> validations_over_time(const RepeatRun& run,
                                                             const std::string& key) {
  std::vector<std::pair<double, double>> out;
  for (const Validation& validation : validations(run))
    if (auto value = validation.values.find(key); value != validation.values.end())
      out.emplace_back(validation.elapsed, charted(key, value->second));
  return out;
}

// Bars of training time, time-to-target (with report.target) and test accuracy, a bar per
// variant in its colour: the median of its completed runs.
std::string charts(const ExperimentReport& section) {
  std::vector<Bar> time, to_target, accuracy, perplexity, cost;
  for (const auto& row : section.rows) {
    if (row.completed == 0) continue;
    const char* color = variant_color(section, row.variant);
    auto figure = [&](const char* key) -> std::optional<double> {
      auto it = row.metrics.find(key);
      return it == row.metrics.end() ? std::nullopt : std::optional<double>(it->second);
    };
    auto ratio = [&](const char* key) {
      auto r = figure(key);
      return r ? fmt::format(" ({:.2f}x)", *r) : std::string();
    };
    if (auto seconds = figure(metric::kTrainSeconds))
      time.push_back(
          {row.variant, *seconds, format_duration(*seconds) + ratio(metric::kSpeedup), color});
    if (section.options.has_target()) {
      if (auto seconds = figure(metric::kTimeToTarget))
        to_target.push_back(
            {row.variant, *seconds,
             format_duration(*seconds) + ratio(metric::kTargetSpeedup) +
                 (row.target_reached < row.completed
                      ? fmt::format(", {}/{} runs", row.target_reached, row.completed)
                      : ""),
             color});
      else
        to_target.push_back({row.variant, 0, "not reached", color});
    }
    if (auto acc = figure(metric::kTestAcc))
      accuracy.push_back({row.variant, *acc, fmt::format("{:.1f}%", 100 * *acc), color});
    if (auto ppl = figure(metric::kTestPerplexity))  // a language model's
      perplexity.push_back({row.variant, *ppl, fmt::format("{:.2f}", *ppl), color});
    if (auto money = figure(metric::kCost))
      cost.push_back({row.variant, *money,
                      format_metric(*find_metric(metric::kCost), *money) + " a run", color});
  }
  const std::string target =
      section.options.has_target()
          ? bar_chart(
                fmt::format("Time to {} {} {} (lower is better)", section.options.target_metric,
                            lower_is_better(section.options.target()) ? "≤" : "≥",
                            tick_label(charted(section.options.target_metric,
                                               section.options.target_value)) +
                                (lower_is_better(section.options.target()) ? "" : "%")),
                to_target)
          : "";
  return R"(<div class="charts">)" + bar_chart("Training time (lower is better)", time) + target +
         bar_chart("Test accuracy", accuracy) +
         bar_chart("Test perplexity (lower is better)", perplexity) +
         bar_chart("Cost (lower is better)", cost) + "</div>";
}

// Curves for every variant, each from its runs (the median, a band with repeats): training loss by
// optimizer step (at train.log_every), per epoch the losses and accuracies, and validation against
// training time — where a faster technique reaches the same quality earlier — with the target.
std::string curves(const ExperimentReport& section) {
  auto per_epoch = [&](const char* key) {
    return variant_curves(section, [&](const RepeatRun& run) {
      std::vector<std::pair<double, double>> points;
      for (const auto& epoch : run.epochs)
        if (auto it = epoch.values.find(key); it != epoch.values.end())
          points.emplace_back(static_cast<double>(epoch.epoch), charted(key, it->second));
      return points;
    });
  };
  auto per_step = variant_curves(section, [](const RepeatRun& run) {
    std::vector<std::pair<double, double>> points;
    for (const auto& step : run.steps)
      if (auto it = step.values.find(metric::kTrainLoss); it != step.values.end())
        points.emplace_back(static_cast<double>(step.step), it->second);
    return points;
  });
  // Beside the steps' losses, each epoch's mean (the per-epoch chart's point) at its last step.
  for (auto& s : per_step)
    for (const auto& row : section.rows) {
      auto steps = row.metrics.find(metric::kSteps);
      if (row.variant != s.label || steps == row.metrics.end() || row.epochs.empty()) continue;
      const double per_epoch = steps->second / static_cast<double>(row.epochs.size());
      for (const auto& epoch : row.epochs)
        if (auto loss = epoch.values.find(metric::kTrainLoss); loss != epoch.values.end())
          s.marks.emplace_back(per_epoch * static_cast<double>(epoch.epoch), loss->second);
    }
  const std::string watched =
      section.options.has_target() ? section.options.target_metric : std::string(metric::kValLoss);
  const auto over_time = variant_curves(
      section, [&](const RepeatRun& run) { return validations_over_time(run, watched); });
  std::string html =
      line_chart("Training loss by optimizer step", "optimizer step", "training loss", per_step) +
      line_chart("Training loss per epoch", "epoch", "training loss (epoch mean)",
                 per_epoch(metric::kTrainLoss)) +
      line_chart("Validation loss", "epoch", "validation loss", per_epoch(metric::kValLoss),
                 target_line(section, metric::kValLoss)) +
      line_chart("Training accuracy", "epoch", axis_title(metric::kTrainAcc),
                 per_epoch(metric::kTrainAcc)) +
      line_chart("Validation accuracy", "epoch", axis_title(metric::kValAcc),
                 per_epoch(metric::kValAcc), target_line(section, metric::kValAcc)) +
      line_chart("Validation perplexity", "epoch", axis_title(metric::kValPerplexity),
                 per_epoch(metric::kValPerplexity)) +
      line_chart(fmt::format("{} against training time", find_metric(watched)->label),
                 "training time (s, validation included)", axis_title(watched), over_time,
                 target_line(section, watched));
  return html.empty() ? "" : R"(<h3>Curves</h3><div class="charts">)" + html + "</div>";
}

// What validating cost each variant: validations a run, their time, and its share of the training
// time (train.val_every_steps buys time-to-target's resolution with it). The median over runs.
std::string validation_costs(const ExperimentReport& section) {
  std::string rows;
  bool inside_epochs = false;
  for (const auto& row : section.rows) {
    std::vector<double> counts, seconds, shares;
    for (const RepeatRun* run : curve_runs(row)) {
      if (run->status != RunStatus::completed) continue;
      double count = 0, total = 0, elapsed = 0;
      for (const auto& step : run->steps)
        if (auto it = step.values.find(metric::kValSeconds); it != step.values.end()) {
          ++count, total += it->second;
          elapsed = std::max(elapsed, step.values.count(metric::kElapsedSeconds)
                                          ? step.values.at(metric::kElapsedSeconds)
                                          : 0.0);
        }
      if (count == 0) continue;
      inside_epochs = inside_epochs || count > static_cast<double>(run->epochs.size());
      counts.push_back(count), seconds.push_back(total);
      if (elapsed > 0) shares.push_back(total / elapsed);
    }
    if (counts.empty()) continue;
    rows += fmt::format(R"(<tr><td>{}</td><td>{:.0f}</td><td>{}</td><td>{}</td></tr>)",
                        html_escape(row.variant), median(counts), format_duration(median(seconds)),
                        shares.empty() ? "—" : fmt::format("{:.1f}%", 100 * median(shares)));
  }
  if (rows.empty() || (!inside_epochs && !section.options.has_target())) return "";
  return "<details><summary>Validation's cost</summary><p class=\"meta\">Validation is training "
         "time (MLPerf's rule): time-to-target includes it. Medians over each variant's completed "
         "runs.</p><table><thead><tr><th>variant</th><th>validations a run</th><th>their "
         "time</th><th>of the training time</th></tr></thead><tbody>" +
         rows + "</tbody></table></details>";
}

// The per-epoch figures of each variant: its run's, or with repeats the median of its completed
// runs' — said in the heading, so a row never mixes runs unlabelled.
std::string epoch_tables(const ExperimentReport& section) {
  // The figures some epoch has: a classifier's accuracy, or a language model's perplexity.
  std::vector<std::string> keys;
  for (const auto& key : metric_keys(MetricScope::epoch)) {
    bool recorded = false;
    for (const auto& row : section.rows)
      for (const auto& epoch : row.epochs) recorded = recorded || epoch.values.count(key);
    if (recorded) keys.push_back(key);
  }
  if (keys.empty()) return "";
  std::string html = "<details><summary>Per-epoch metrics</summary>";
  for (const auto& row : section.rows) {
    if (row.epochs.empty()) continue;
    std::vector<std::string> completed;
    for (const auto& run : row.repeats)
      if (run.status == RunStatus::completed) completed.push_back(std::to_string(run.run_id));
    const std::string source = row.completed > 1 ? fmt::format("median of {} runs (runs {})",
                                                               row.completed, join(completed, ", "))
                                                 : fmt::format("run {}", row.run_id);
    html += fmt::format(
        "<h4>{} <span class=\"meta\">— {}</span></h4><table><thead><tr>"
        "<th>epoch</th>",
        html_escape(row.variant), html_escape(source));
    for (const auto& key : keys) html += "<th>" + html_escape(find_metric(key)->label) + "</th>";
    html += "</tr></thead><tbody>";
    for (const auto& epoch : row.epochs) {
      html += fmt::format("<tr><td>{}</td>", epoch.epoch);
      for (const auto& key : keys) {
        auto it = epoch.values.find(key);
        html +=
            "<td>" +
            (it == epoch.values.end() ? std::string("—")
                                      : html_escape(format_metric(*find_metric(key), it->second))) +
            "</td>";
      }
      html += "</tr>";
    }
    html += "</tbody></table>";
  }
  return html + "</details>";
}

// Each run's own record of what it did — the dtypes its precision used, loss scaling, whether CUDA
// graphs were captured, where it saved weights — one column per thing any run recorded.
std::string run_details(const ExperimentReport& section) {
  static const std::vector<std::pair<std::string, std::string>> kLabels = {
      {"param_dtype", "parameters"},           {"compute_dtype", "compute"},
      {"forward_dtype", "model output"},       {"grad_dtype", "gradients"},
      {"reduce_dtype", "gradient reduction"},  {"loss_scaling", "loss scaling"},
      {"matmul_precision", "float32 matmuls"}, {"cuda_graphs", "CUDA graphs"},
      {"micro_batch", "micro-batch"},          {"weights_path", "weights"},
      {"state_path", "training state"}};
  std::vector<std::pair<std::string, std::string>> columns;
  for (const auto& [key, label] : kLabels) {
    for (const auto& row : section.rows)
      if (row.attributes.count(key)) {
        columns.emplace_back(key, label);
        break;
      }
  }
  // Shown elsewhere: the task by the section's columns, a run's round of its batch by its
  // verdict's "paired by round".
  // The test's confusion matrix by the Classes section.
  static const std::set<std::string> kShownElsewhere = {"task", "round", "test_confusion"};
  for (const auto& row : section.rows)  // anything else a run recorded, under its own key
    for (const auto& attribute : row.attributes) {
      const std::string& key = attribute.first;  // a lambda may not capture a structured binding
      if (kShownElsewhere.count(key)) continue;
      if (std::none_of(columns.begin(), columns.end(),
                       [&](const auto& c) { return c.first == key; }))
        columns.emplace_back(key, key);
    }
  if (columns.empty()) return "";
  std::string html = "<details><summary>Run details</summary><table><thead><tr><th>variant</th>";
  for (const auto& column : columns) html += "<th>" + html_escape(column.second) + "</th>";
  html += "</tr></thead><tbody>";
  for (const auto& row : section.rows) {
    html += "<tr><td>" + html_escape(row.variant) + "</td>";
    for (const auto& column : columns) {
      auto it = row.attributes.find(column.first);
      html += R"(<td class="text">)" +
              (it == row.attributes.end() ? std::string("—") : html_escape(it->second)) + "</td>";
    }
    html += "</tr>";
  }
  return html + "</tbody></table></details>";
}

// Where the runs ran: one row per distinct device, host, LibTorch and source revision.
std::string environment_table(const ExperimentReport& section) {
  std::set<std::vector<std::string>> seen;
  for (const auto& row : section.rows)
    if (row.run_id != 0)
      seen.insert({row.device_name, row.host, row.torch_version, row.git_revision});
  if (seen.empty()) return "";
  std::string html =
      "<details><summary>Hardware and software</summary><table><thead><tr><th>device</th>"
      "<th>host</th><th>LibTorch</th><th>source revision</th></tr></thead><tbody>";
  for (const auto& fields : seen) {
    html += "<tr>";
    for (const auto& field : fields)
      html += R"(<td class="text">)" + (field.empty() ? "—" : html_escape(field)) + "</td>";
    html += "</tr>";
  }
  return html + "</tbody></table></details>";
}

std::string hardware_line(const ExperimentReport& section) {
  std::set<std::string> devices, versions;
  for (const auto& row : section.rows) {
    if (!row.device_name.empty()) devices.insert(row.device_name);
    if (!row.torch_version.empty()) versions.insert(row.torch_version);
  }
  return fmt::format(
      "Hardware: {} · LibTorch {}",
      devices.empty() ? "—" : html_escape(join({devices.begin(), devices.end()}, "; ")),
      versions.empty() ? "—" : html_escape(join({versions.begin(), versions.end()}, ", ")));
}

}  // namespace

namespace {

// Each variant's answer in one line, at the top of its experiment (reports/statistics.h says how
// "within noise" is decided).
std::string verdicts(const ExperimentReport& section) {
  std::string html = "<ul class=\"verdicts\">";
  bool any = false;
  for (const auto& row : section.rows) {
    if (row.verdict.empty()) continue;
    any = true;
    html +=
        fmt::format("<li><b>{}</b> — {}</li>", html_escape(row.variant), html_escape(row.verdict));
  }
  return any ? html + "</ul>" : "";
}

// The index at the top: every experiment of the report with its one-line summary.
std::string index(const Report& report) {
  std::string html = "<nav><h2>Experiments</h2><ul>";
  for (size_t i = 0; i < report.experiments.size(); ++i) {
    const auto& section = report.experiments[i];
    html += fmt::format(R"(<li><a href="#experiment-{}">{}</a> — {}</li>)", i + 1,
                        html_escape(section.options.title.empty() ? section.experiment.name
                                                                  : section.options.title),
                        html_escape(summary_line(section)));
  }
  return html + "</ul></nav>";
}

}  // namespace

std::string render_html(const Report& report) {
  std::string html = fmt::format(
      "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
      "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
      "<title>Trainyard report</title><style>{}</style></head><body>"
      "<h1>Trainyard report</h1><p class=\"meta\">Generated {} · {} experiment{}</p>",
      kStyle, report.generated_at, report.experiments.size(),
      report.experiments.size() == 1 ? "" : "s");
  if (report.experiments.empty())
    html += "<p>No experiments yet: run <code>trainyard run FILE</code> first.</p>";
  else
    html += index(report);
  for (size_t i = 0; i < report.experiments.size(); ++i) {
    const auto& section = report.experiments[i];
    const auto& e = section.experiment;
    html +=
        fmt::format(R"(<section id="experiment-{}"><h2>{}</h2>)", i + 1,
                    html_escape(section.options.title.empty() ? e.name : section.options.title));
    if (!e.description.empty()) html += "<p>" + html_escape(e.description) + "</p>";
    html += fmt::format(
        "<p class=\"meta\">Experiment <code>{}</code> from <code>{}</code> · {} · speedups "
        "relative to <b>{}</b></p>",
        html_escape(e.name), html_escape(e.file), hardware_line(section),
        html_escape(section.baseline));
    if (!section.note.empty()) html += "<p class=\"note\">" + html_escape(section.note) + "</p>";
    html += "<p class=\"summary\">" + html_escape(summary_line(section)) + "</p>";
    html += verdicts(section);
    if (section.rows.empty()) {
      html += "<p>No runs yet.</p>" + studies_html(section) + other_runs(section) + "</section>";
      continue;
    }
    html += results_table(report, section) + studies_html(section) + other_runs(section) +
            charts(section) + pareto_chart(section) + curves(section) + classes_html(section) +
            samples_html(section) + validation_costs(section) + epoch_tables(section) +
            run_details(section) + environment_table(section) + "</section>";
  }
  return html + "</body></html>\n";
}

}  // namespace trainyard
