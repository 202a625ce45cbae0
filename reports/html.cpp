// The HTML report: one self-contained file (inline CSS and SVG; no scripts, fonts or network).
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <set>

#include <fmt/format.h>

#include "common/metrics.h"
#include "common/text.h"
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
.charts { display: flex; flex-wrap: wrap; gap: 2rem; } svg text { font: 12px system-ui, sans-serif; fill: #1d2330; }
svg { max-width: 100%; height: auto; }
details { margin: 1rem 0; } summary { cursor: pointer; color: #2451a6; }
.wide { overflow-x: auto; } .range { display: block; color: #5b6475; font-size: .75rem; }
.differs { text-align: left; white-space: normal; min-width: 10rem; max-width: 18rem; overflow-wrap: anywhere; font-family: ui-monospace, monospace; font-size: .75rem; color: #3d4658; }
nav ul { columns: 2; } .summary { color: #3d4658; }
@media print { body { margin: 0; max-width: none; font-size: 11px; } details { display: block; } details > * { display: block; } summary { display: none; } section { break-inside: avoid-page; } a { color: inherit; } }
@media (max-width: 40rem) { body { margin: 1rem auto; } nav ul { columns: 1; } th, td { padding: .25rem .4rem; } }
)css";

// Series colours (Okabe-Ito, readable by colour-blind readers and in grey print).
const char* const kColors[] = {"#0072B2", "#E69F00", "#009E73", "#D55E00",
                               "#CC79A7", "#56B4E9", "#F0E442", "#000000"};

struct Series {
  std::string label;
  std::vector<std::pair<double, double>> points;  // (x, y)
};

// A line chart of `series` (one colour each, a legend below), axes labelled at their ends.
std::string line_chart(const std::string& title, const std::string& x_label,
                       const std::string& y_label, const std::vector<Series>& series) {
  double x0 = 1e300, x1 = -1e300, y0 = 1e300, y1 = -1e300;
  size_t points = 0;
  for (const auto& s : series)
    for (const auto& [x, y] : s.points) {
      if (!std::isfinite(x) || !std::isfinite(y)) continue;
      x0 = std::min(x0, x), x1 = std::max(x1, x), y0 = std::min(y0, y), y1 = std::max(y1, y);
      ++points;
    }
  if (points == 0) return "";
  if (x1 == x0) x1 = x0 + 1;
  if (y1 == y0) {  // a flat line: a band around it
    const double pad = std::max(std::abs(y0) * 0.05, 1e-3);
    y0 -= pad, y1 += pad;
  }
  // Axis ends with as many digits as it takes to tell them apart.
  auto ends = [](double low, double high) {
    for (int digits = 3; digits < 10; ++digits) {
      std::string a = fmt::format("{:.{}g}", low, digits), b = fmt::format("{:.{}g}", high, digits);
      if (a != b) return std::pair{a, b};
    }
    return std::pair{fmt::format("{}", low), fmt::format("{}", high)};
  };
  const auto [x_low, x_high] = ends(x0, x1);
  const auto [y_low, y_high] = ends(y0, y1);
  const int left = 56, top = 28, plot_w = 300, plot_h = 170, legend_row = 16;
  const int height = top + plot_h + 34 + legend_row * static_cast<int>(series.size());
  const int width = left + plot_w + 16;
  auto px = [&](double x) { return left + plot_w * (x - x0) / (x1 - x0); };
  auto py = [&](double y) { return top + plot_h * (1 - (y - y0) / (y1 - y0)); };
  std::string svg = fmt::format(
      R"(<svg class="curve" xmlns="http://www.w3.org/2000/svg" width="{0}" height="{1}" viewBox="0 0 {0} {1}" role="img" aria-label="{2}">)"
      R"(<text x="0" y="16" font-weight="600">{2}</text>)"
      R"(<rect x="{3}" y="{4}" width="{5}" height="{6}" fill="none" stroke="#c9d0dc"/>)"
      R"(<text x="{3}" y="{7}">{8}</text><text x="{9}" y="{7}" text-anchor="end">{10}</text>)"
      R"(<text x="{11}" y="{7}" text-anchor="middle">{12}</text>)"
      R"(<text x="{13}" y="{14}" text-anchor="end">{15}</text><text x="{13}" y="{16}" text-anchor="end">{17}</text>)"
      R"(<text x="{13}" y="{18}" text-anchor="end">{19}</text>)",
      width, height, html_escape(title), left, top, plot_w, plot_h, top + plot_h + 14, x_low,
      left + plot_w, x_high, left + plot_w / 2, html_escape(x_label), left - 4, top + plot_h, y_low,
      top + 10, y_high, top + plot_h / 2, html_escape(y_label));
  for (size_t i = 0; i < series.size(); ++i) {
    const char* color = kColors[i % std::size(kColors)];
    std::string path;
    for (const auto& [x, y] : series[i].points) {
      if (!std::isfinite(x) || !std::isfinite(y)) continue;
      path += fmt::format("{}{:.1f},{:.1f}", path.empty() ? "M" : " L", px(x), py(y));
    }
    svg += fmt::format(
        R"(<path d="{0}" fill="none" stroke="{1}" stroke-width="2"/>)"
        R"(<rect x="{2}" y="{3}" width="12" height="4" fill="{1}"/><text x="{4}" y="{5}">{6}</text>)",
        path, color, left, top + plot_h + 26 + legend_row * static_cast<int>(i), left + 18,
        top + plot_h + 32 + legend_row * static_cast<int>(i), html_escape(series[i].label));
    for (const auto& [x, y] : series[i].points)  // the points themselves, for one-epoch runs
      if (std::isfinite(x) && std::isfinite(y))
        svg += fmt::format(R"(<circle cx="{:.1f}" cy="{:.1f}" r="2.5" fill="{}"/>)", px(x), py(y),
                           color);
  }
  return svg + "</svg>";
}

// A horizontal bar chart: one bar per (label, value), annotated with `text`.
struct Bar {
  std::string label;
  double value;
  std::string text;
};

std::string bar_chart(const std::string& title, const std::vector<Bar>& bars) {
  if (bars.empty()) return "";
  const int label_width = 170, bar_width = 300, row = 26, top = 28;
  const int width = label_width + bar_width + 110,
            height = top + row * static_cast<int>(bars.size()) + 8;
  double max = 0;
  for (const auto& b : bars) max = std::max(max, b.value);
  std::string svg = fmt::format(
      R"(<svg xmlns="http://www.w3.org/2000/svg" width="{0}" height="{1}" viewBox="0 0 {0} {1}" role="img" aria-label="{2}">)"
      R"(<text x="0" y="16" font-weight="600">{2}</text>)",
      width, height, html_escape(title));
  for (size_t i = 0; i < bars.size(); ++i) {
    const int y = top + row * static_cast<int>(i);
    const double w = max > 0 ? bar_width * bars[i].value / max : 0;
    svg +=
        fmt::format(R"(<text x="{0}" y="{1}" text-anchor="end">{2}</text>)"
                    R"(<rect x="{3}" y="{4}" width="{5:.1f}" height="{6}" rx="3" fill="#4f7cd6"/>)"
                    R"(<text x="{7:.1f}" y="{1}">{8}</text>)",
                    label_width - 8, y + 15, html_escape(bars[i].label), label_width, y + 3, w,
                    row - 8, label_width + w + 6, html_escape(bars[i].text));
  }
  return svg + "</svg>";
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

// The best completed value of `key` across rows, for highlighting — only when it differs from the
// next best beyond the noise of their repeats, by the verdicts' test (reports/statistics.h: Welch's
// t-test at 95%, on log time for times and speedups): one run of either, and nothing is marked.
std::optional<double> best_value(const ExperimentReport& section, const MetricInfo& info) {
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
  const bool timed = info.key == metric::kSpeedup || info.key == metric::kTrainSeconds;
  const std::string key = timed ? metric::kTrainSeconds : info.key;
  auto samples = [&](const VariantRow& row) {
    auto it = row.samples.find(key);
    std::vector<double> out = it == row.samples.end() ? std::vector<double>{} : it->second;
    if (timed)
      for (double& v : out) v = std::log(std::max(v, 1e-12));
    return out;
  };
  const auto test = welch_t_test(samples(*values[1].second), samples(*values[0].second));
  if (!test || !test->significant()) return std::nullopt;
  return values[0].first;
}

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

std::string results_table(const Report& report, const ExperimentReport& section) {
  const bool repeats = any_repeats(section);
  std::string html = R"(<div class="wide"><table class="results"><thead><tr><th>variant</th>)";
  if (repeats) html += "<th>n</th>";
  html +=
      "<th>precision</th><th>devices</th><th>strategy</th><th>differs from the baseline in</th>";
  for (const auto& key : section.options.metrics)
    html += "<th>" + html_escape(find_metric(key)->label) + "</th>";
  html += "<th>files</th></tr></thead><tbody>";
  const size_t columns = 6 + (repeats ? 1 : 0) + section.options.metrics.size();
  for (const auto& row : section.rows) {
    html += fmt::format(R"(<tr{}><td>{}{})",
                        row.variant == section.baseline ? R"( class="baseline")" : "",
                        html_escape(row.variant), status_badge(row));
    if (repeats) html += fmt::format("</td><td>{}/{}", row.completed, row.planned);
    html += fmt::format(R"(</td><td class="text">{}</td><td>{}</td><td class="text">{}</td>)",
                        html_escape(row.precision), row.devices, html_escape(row.strategy));
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
      auto best = best_value(section, info);
      bool is_best = best && *best == it->second;
      std::string range;  // the repeats' min-max under the median
      if (auto spread = row.spread.find(key); spread != row.spread.end())
        range = fmt::format(R"(<span class="range">{} – {}</span>)",
                            html_escape(format_metric(info, spread->second.min)),
                            html_escape(format_metric(info, spread->second.max)));
      html += fmt::format("<td{}>{}{}</td>", is_best ? R"( class="best")" : "",
                          html_escape(format_metric(info, it->second)), range);
    }
    html += R"(<td class="text">)";
    if (!row.config_path.empty())
      html += fmt::format(R"(<a href="{}">config</a> · <a href="{}">log</a>)",
                          html_escape(link_path(report, row.config_path)),
                          html_escape(link_path(report, row.log_path)));
    if (row.resumes > 0)  // it survived interruptions: its log says where it continued from
      html += fmt::format(R"(<br><span class="range">continued {}</span>)",
                          plural(row.resumes, "time"));
    html += "</td></tr>";
    if (!row.error.empty())
      html += fmt::format(R"(<tr><td colspan="{}" class="error">{}</td></tr>)", columns,
                          html_escape(row.error));
  }
  return html + "</tbody></table></div>";
}

// Runs of this experiment whose configuration is not what its file resolves to now (a smoke test,
// an edited file): listed apart, never in the table, with the keys in which they differ.
std::string other_runs(const ExperimentReport& section) {
  if (section.other_runs.empty()) return "";
  std::string html = fmt::format(
      R"(<h3>Runs of other configurations</h3><p class="meta">Not in the table above: their )"
      R"(configuration is not what <code>{}</code> resolves to now.</p><table><thead><tr>)"
      R"(<th>variant</th><th>run</th><th>status</th><th>ended</th><th>training time</th>)"
      R"(<th>test accuracy</th><th>speedup</th><th>differs from the file in</th>)"
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
        html_escape(other_run_figure(run, metric::kTestAcc)),
        run.speedup > 0 ? fmt::format("{:.2f}x", run.speedup) : "—",
        lines.empty() ? "nothing (the same settings, another hash)" : join(lines, "<br>"));
    if (!run.error.empty())
      html +=
          fmt::format(R"(<tr><td colspan="8" class="error">{}</td></tr>)", html_escape(run.error));
  }
  return html + "</tbody></table>";
}

std::string charts(const ExperimentReport& section) {
  std::vector<Bar> time, accuracy;
  for (const auto& row : section.rows) {
    if (row.status != RunStatus::completed) continue;
    auto seconds = row.metrics.find(metric::kTrainSeconds);
    if (seconds != row.metrics.end()) {
      std::string text = format_duration(seconds->second);
      auto speedup = row.metrics.find(metric::kSpeedup);
      if (speedup != row.metrics.end()) text += fmt::format(" ({:.2f}x)", speedup->second);
      time.push_back({row.variant, seconds->second, text});
    }
    auto acc = row.metrics.find(metric::kTestAcc);
    if (acc != row.metrics.end())
      accuracy.push_back({row.variant, acc->second, fmt::format("{:.1f}%", 100 * acc->second)});
  }
  return R"(<div class="charts">)" + bar_chart("Training time (lower is better)", time) +
         bar_chart("Test accuracy", accuracy) + "</div>";
}

// Curves per epoch for every variant: train and validation loss and accuracy, and validation loss
// against training time (a faster technique reaches the same loss earlier).
std::string curves(const ExperimentReport& section) {
  auto per_epoch = [&](const char* key) {
    std::vector<Series> out;
    for (const auto& row : section.rows) {
      Series s{row.variant, {}};
      for (const auto& epoch : row.epochs)
        if (auto it = epoch.values.find(key); it != epoch.values.end())
          s.points.emplace_back(static_cast<double>(epoch.epoch), it->second);
      if (!s.points.empty()) out.push_back(std::move(s));
    }
    return out;
  };
  std::vector<Series> by_time;
  for (const auto& row : section.rows) {
    Series s{row.variant, {}};
    double elapsed = 0;
    for (const auto& epoch : row.epochs) {
      auto seconds = epoch.values.find(metric::kEpochSeconds);
      auto loss = epoch.values.find(metric::kValLoss);
      if (seconds == epoch.values.end() || loss == epoch.values.end()) continue;
      elapsed += seconds->second;
      s.points.emplace_back(elapsed, loss->second);
    }
    if (!s.points.empty()) by_time.push_back(std::move(s));
  }
  std::string html =
      line_chart("Training loss", "epoch", "loss", per_epoch(metric::kTrainLoss)) +
      line_chart("Validation loss", "epoch", "loss", per_epoch(metric::kValLoss)) +
      line_chart("Training accuracy", "epoch", "accuracy", per_epoch(metric::kTrainAcc)) +
      line_chart("Validation accuracy", "epoch", "accuracy", per_epoch(metric::kValAcc)) +
      line_chart("Validation loss against training time", "seconds", "loss", by_time);
  return html.empty() ? "" : R"(<h3>Curves</h3><div class="charts">)" + html + "</div>";
}

std::string epoch_tables(const ExperimentReport& section) {
  const std::vector<std::string> keys = metric_keys(MetricScope::epoch);
  bool any = false;
  for (const auto& row : section.rows) any = any || !row.epochs.empty();
  if (!any) return "";
  std::string html = "<details><summary>Per-epoch metrics</summary>";
  for (const auto& row : section.rows) {
    if (row.epochs.empty()) continue;
    html += fmt::format("<h4>{}</h4><table><thead><tr><th>epoch</th>", html_escape(row.variant));
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
      {"param_dtype", "parameters"},    {"compute_dtype", "compute"},
      {"grad_dtype", "gradients"},      {"reduce_dtype", "gradient reduction"},
      {"loss_scaling", "loss scaling"}, {"matmul_precision", "float32 matmuls"},
      {"cuda_graphs", "CUDA graphs"},   {"weights_path", "weights"},
      {"state_path", "training state"}};
  std::vector<std::pair<std::string, std::string>> columns;
  for (const auto& [key, label] : kLabels) {
    for (const auto& row : section.rows)
      if (row.attributes.count(key)) {
        columns.emplace_back(key, label);
        break;
      }
  }
  for (const auto& row : section.rows)  // anything else a run recorded, under its own key
    for (const auto& attribute : row.attributes) {
      const std::string& key = attribute.first;  // a lambda may not capture a structured binding
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

std::string summary_line(const ExperimentReport& section) {
  int completed = 0, failed = 0, not_finished = 0;
  for (const auto& row : section.rows) {
    if (row.completed > 0)
      ++completed;
    else if (row.status == RunStatus::failed)
      ++failed;
    else
      ++not_finished;
  }
  std::string text = fmt::format("{} of {} completed", completed,
                                 plural(static_cast<int64_t>(section.rows.size()), "variant"));
  if (failed > 0) text += fmt::format(", {} failed", failed);
  if (not_finished > 0) text += fmt::format(", {} not finished", not_finished);
  if (!section.answer.empty()) text += "; " + section.answer;
  return text;
}

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
      html += "<p>No runs yet.</p>" + other_runs(section) + "</section>";
      continue;
    }
    html += results_table(report, section) + other_runs(section) + charts(section) +
            curves(section) + epoch_tables(section) + run_details(section) +
            environment_table(section) + "</section>";
  }
  return html + "</body></html>\n";
}

}  // namespace trainyard
