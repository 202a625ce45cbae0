// The HTML report: one self-contained file (inline CSS and SVG; no scripts, fonts or network).
#include <algorithm>
#include <cmath>
#include <set>

#include <fmt/format.h>

#include "common/metrics.h"
#include "common/text.h"
#include "reports/report.h"

namespace trainyard {

namespace {

const char* const kStyle = R"css(
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; margin: 2rem auto; max-width: 72rem; color: #1d2330; padding: 0 1rem; }
h1 { font-size: 1.6rem; margin-bottom: .2rem; } h2 { margin-top: 2.5rem; border-bottom: 1px solid #d8dde6; padding-bottom: .3rem; }
.meta { color: #5b6475; font-size: .9rem; }
.note { background: #fff6dc; border-left: 3px solid #e0a800; padding: .4rem .7rem; }
table { border-collapse: collapse; margin: 1rem 0; font-variant-numeric: tabular-nums; }
th, td { padding: .35rem .7rem; border-bottom: 1px solid #e4e8ef; text-align: right; white-space: nowrap; }
th { background: #f3f5f9; font-weight: 600; } th:first-child, td:first-child { text-align: left; }
td.text { text-align: left; } td.best { font-weight: 700; color: #0b6e3a; }
tr.baseline td:first-child::after { content: " baseline"; font-size: .75rem; color: #5b6475; }
.status { font-size: .75rem; padding: .1rem .4rem; border-radius: .6rem; background: #eee; }
.status.failed { background: #fde2e1; color: #a11; } .status.interrupted, .status.skipped { background: #fff2cc; color: #7a5b00; }
.error { color: #a11; text-align: left; white-space: pre-wrap; font-family: ui-monospace, monospace; font-size: .8rem; }
.charts { display: flex; flex-wrap: wrap; gap: 2rem; } svg text { font: 12px system-ui, sans-serif; fill: #1d2330; }
details { margin: 1rem 0; } summary { cursor: pointer; color: #2451a6; }
)css";

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

// A value within this share of the next best is not marked best: one run per variant cannot tell
// a difference that small from run-to-run noise (timings on a shared machine, a few test samples).
constexpr double kNoise = 0.05;

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

// The best completed value of `key` across rows, for highlighting — only when it stands out from
// the next best beyond noise (kNoise), among at least two, on a figure the technique decides.
std::optional<double> best_value(const ExperimentReport& section, const MetricInfo& info) {
  if (info.better == Better::neither) return std::nullopt;
  std::vector<double> values;
  for (const auto& row : section.rows) {
    auto it = row.metrics.find(info.key);
    if (row.status != RunStatus::completed || it == row.metrics.end()) continue;
    if (dominated_by_runtime(row, info)) return std::nullopt;
    values.push_back(it->second);
  }
  if (values.size() < 2) return std::nullopt;
  std::sort(values.begin(), values.end());
  if (info.better == Better::higher) std::reverse(values.begin(), values.end());
  const double best = values[0], next = values[1];
  if (std::abs(best - next) <= kNoise * std::max(std::abs(best), std::abs(next)))
    return std::nullopt;
  return best;
}

std::string results_table(const ExperimentReport& section) {
  std::string html =
      "<table><thead><tr><th>variant</th><th>precision</th><th>devices</th><th>strategy</th>";
  for (const auto& key : section.options.metrics)
    html += "<th>" + html_escape(find_metric(key)->label) + "</th>";
  html += "</tr></thead><tbody>";
  const size_t columns = 4 + section.options.metrics.size();
  for (const auto& row : section.rows) {
    html += fmt::format(R"(<tr{}><td>{})",
                        row.variant == section.baseline ? R"( class="baseline")" : "",
                        html_escape(row.variant));
    if (row.run_id == 0)
      html += R"( <span class="status queued">not run</span>)";
    else if (row.status != RunStatus::completed)
      html += fmt::format(R"( <span class="status {0}">{0}</span>)", to_string(row.status));
    html += fmt::format(R"(</td><td class="text">{}</td><td>{}</td><td class="text">{}</td>)",
                        html_escape(row.precision), row.devices, html_escape(row.strategy));
    for (const auto& key : section.options.metrics) {
      const MetricInfo& info = *find_metric(key);
      auto it = row.metrics.find(key);
      if (it == row.metrics.end()) {
        html += "<td>—</td>";
        continue;
      }
      auto best = best_value(section, info);
      bool is_best = best && *best == it->second;
      html += fmt::format("<td{}>{}</td>", is_best ? R"( class="best")" : "",
                          html_escape(format_metric(info, it->second)));
    }
    html += "</tr>";
    if (!row.error.empty())
      html += fmt::format(R"(<tr><td colspan="{}" class="error">{}</td></tr>)", columns,
                          html_escape(row.error));
  }
  return html + "</tbody></table>";
}

// Runs of this experiment whose configuration is not what its file resolves to now (a smoke test,
// an edited file): listed apart, never in the table, with the keys in which they differ.
std::string other_runs(const ExperimentReport& section) {
  if (section.other_runs.empty()) return "";
  std::string html = fmt::format(
      R"(<h3>Runs of other configurations</h3><p class="meta">Not in the table above: their )"
      R"(configuration is not what <code>{}</code> resolves to now.</p><table><thead><tr>)"
      R"(<th>variant</th><th>run</th><th>status</th><th>ended</th><th>differs from the file in</th>)"
      R"(</tr></thead><tbody>)",
      html_escape(section.experiment.file));
  for (const auto& run : section.other_runs) {
    std::vector<std::string> lines;
    for (const auto& difference : run.differences) lines.push_back(html_escape(difference));
    html += fmt::format(
        R"(<tr><td class="text">{}</td><td>{}</td><td class="text">{}</td><td class="text">{}</td><td class="text">{}</td></tr>)",
        html_escape(run.variant), run.run_id, to_string(run.status), html_escape(run.ended_at),
        lines.empty() ? "nothing (the same settings, another hash)" : join(lines, "<br>"));
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
    for (const auto& [key, value] : row.attributes)
      if (std::none_of(columns.begin(), columns.end(),
                       [&](const auto& c) { return c.first == key; }))
        columns.emplace_back(key, key);
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
  for (const auto& section : report.experiments) {
    const auto& e = section.experiment;
    html +=
        fmt::format("<section><h2>{}</h2>",
                    html_escape(section.options.title.empty() ? e.name : section.options.title));
    if (!e.description.empty()) html += "<p>" + html_escape(e.description) + "</p>";
    html += fmt::format(
        "<p class=\"meta\">Experiment <code>{}</code> from <code>{}</code> · {} · speedups "
        "relative to <b>{}</b></p>",
        html_escape(e.name), html_escape(e.file), hardware_line(section),
        html_escape(section.baseline));
    if (!section.note.empty()) html += "<p class=\"note\">" + html_escape(section.note) + "</p>";
    if (section.rows.empty()) {
      html += "<p>No runs yet.</p>" + other_runs(section) + "</section>";
      continue;
    }
    html += results_table(section) + other_runs(section) + charts(section) + epoch_tables(section) +
            run_details(section) + "</section>";
  }
  return html + "</body></html>\n";
}

}  // namespace trainyard
