// The HTML report: one self-contained file (inline CSS and SVG; no scripts, fonts or network).
#include <algorithm>
#include <array>
#include <cmath>
#include <filesystem>
#include <optional>
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
.charts { display: flex; flex-wrap: wrap; gap: 2rem; align-items: flex-start; } svg text { font: 12px system-ui, sans-serif; fill: #1d2330; } svg text.tick { font-size: 11px; fill: #5b6475; }
td.files { font-size: .8rem; } h4 .meta { font-weight: 400; }
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

// Series colours (Okabe-Ito, readable by colour-blind readers and in grey print), one per variant
// by its place in the experiment: the same variant has the same colour in every chart.
const char* const kColors[] = {"#0072B2", "#E69F00", "#009E73", "#D55E00",
                               "#CC79A7", "#56B4E9", "#000000", "#8C6D31"};
const char* const kGrey = "#aab1bd";

const char* variant_color(const ExperimentReport& section, const std::string& variant) {
  for (size_t i = 0; i < section.rows.size(); ++i)
    if (section.rows[i].variant == variant) return kColors[i % std::size(kColors)];
  return kGrey;
}

// Text in a chart: ~7 px a character at 12 px, which the layout reserves; longer names are cut.
constexpr double kCharWidth = 7;
std::string fit(const std::string& text, size_t characters) {
  if (text.size() <= characters) return text;
  size_t cut = characters - 1;
  while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80) --cut;  // UTF-8
  return text.substr(0, cut) + "…";
}

// Round tick values (1, 2 or 5 × 10^k apart), about `count` of them, inside [low, high]; whole
// numbers only on an axis of counts (epochs, steps).
std::vector<double> ticks(double low, double high, bool whole = false, int count = 5) {
  if (!std::isfinite(low) || !std::isfinite(high) || !(high > low)) return {};
  const double raw = std::max((high - low) / count, whole ? 1.0 : 0.0);
  const double magnitude = std::pow(10.0, std::floor(std::log10(raw)));
  double step = 10 * magnitude;
  for (double m : {1.0, 2.0, 5.0})
    if (m * magnitude >= raw) {
      step = m * magnitude;
      break;
    }
  std::vector<double> out;
  // A step below the values' resolution would not move `t`: at most a few dozen ticks.
  for (double t = std::ceil(low / step) * step; t <= high + step * 1e-9 && out.size() < 50;
       t += step) {
    out.push_back(std::abs(t) < step * 1e-9 ? 0 : t);
    if (t + step == t) break;
  }
  return out;
}

std::string tick_label(double value) { return fmt::format("{:.4g}", value); }

// A plot area with axes: ticks with labels and grid lines, the axes' titles (with their units).
struct Plot {
  double x0, x1, y0, y1;                               // the data's domain
  bool whole_x = false;                                // x counts: whole ticks
  int left = 64, top = 30, width = 330, height = 190;  // the plot area, in px
  double px(double x) const { return left + width * (x - x0) / (x1 - x0); }
  double py(double y) const { return top + height * (1 - (y - y0) / (y1 - y0)); }
  int bottom() const { return top + height; }
};

// Pads a domain so a flat series or a single point still has one.
void widen(double& low, double& high, double pad_share) {
  // Equal, or apart by a few units in the last place (medians of nearly equal figures).
  if (high - low <= 1e-9 * std::max(std::abs(low), std::abs(high))) {
    const double pad = std::max(std::abs(low) * 0.05, 1e-3);
    low -= pad, high += pad;
  } else {
    const double pad = (high - low) * pad_share;
    low -= pad, high += pad;
  }
}

std::string axes(const Plot& plot, const std::string& x_title, const std::string& y_title) {
  std::string svg =
      fmt::format(R"(<rect x="{}" y="{}" width="{}" height="{}" fill="none" stroke="#c9d0dc"/>)",
                  plot.left, plot.top, plot.width, plot.height);
  for (double t : ticks(plot.x0, plot.x1, plot.whole_x))
    svg += fmt::format(R"(<line x1="{0:.1f}" y1="{1}" x2="{0:.1f}" y2="{2}" stroke="#eef1f5"/>)"
                       R"(<line x1="{0:.1f}" y1="{2}" x2="{0:.1f}" y2="{3}" stroke="#8a93a3"/>)"
                       R"(<text class="tick" x="{0:.1f}" y="{4}" text-anchor="middle">{5}</text>)",
                       plot.px(t), plot.top, plot.bottom(), plot.bottom() + 4, plot.bottom() + 16,
                       tick_label(t));
  for (double t : ticks(plot.y0, plot.y1))
    svg += fmt::format(R"(<line x1="{0}" y1="{2:.1f}" x2="{1}" y2="{2:.1f}" stroke="#eef1f5"/>)"
                       R"(<line x1="{3}" y1="{2:.1f}" x2="{0}" y2="{2:.1f}" stroke="#8a93a3"/>)"
                       R"(<text class="tick" x="{4}" y="{5:.1f}" text-anchor="end">{6}</text>)",
                       plot.left, plot.left + plot.width, plot.py(t), plot.left - 4, plot.left - 6,
                       plot.py(t) + 4, tick_label(t));
  svg += fmt::format(
      R"(<text x="{}" y="{}" text-anchor="middle">{}</text>)"
      R"svg(<text x="14" y="{}" text-anchor="middle" transform="rotate(-90 14 {})">{}</text>)svg",
      plot.left + plot.width / 2, plot.bottom() + 32, html_escape(x_title),
      plot.top + plot.height / 2, plot.top + plot.height / 2, html_escape(y_title));
  return svg;
}

std::string svg_open(const std::string& css_class, int width, int height,
                     const std::string& title) {
  return fmt::format(
      R"(<svg class="{0}" xmlns="http://www.w3.org/2000/svg" width="{1}" height="{2}" viewBox="0 0 {1} {2}" role="img" aria-label="{3}">)"
      R"(<text x="0" y="16" font-weight="600">{3}</text>)",
      css_class, width, height, html_escape(title));
}

struct Series {
  std::string label;
  const char* color;
  std::vector<std::pair<double, double>> points;   // (x, y): the line, the median with repeats
  std::vector<std::array<double, 3>> band{};       // (x, min, max) over the repeats
  std::vector<std::pair<double, double>> marks{};  // points of another kind: hollow circles
};

// A horizontal reference line across a chart (report.target), labelled.
struct Reference {
  double y;
  std::string label;
};

// A line chart of `series` (each its variant's colour; a band from the repeats' min to max
// behind the median line), with tick-labelled axes and a legend below.
std::string line_chart(const std::string& title, const std::string& x_title,
                       const std::string& y_title, const std::vector<Series>& series,
                       const std::optional<Reference>& reference = std::nullopt) {
  double x0 = 1e300, x1 = -1e300, y0 = 1e300, y1 = -1e300;
  auto take = [&](double x, double y) {
    if (!std::isfinite(x) || !std::isfinite(y)) return false;
    x0 = std::min(x0, x), x1 = std::max(x1, x), y0 = std::min(y0, y), y1 = std::max(y1, y);
    return true;
  };
  size_t points = 0;
  for (const auto& s : series) {
    for (const auto& [x, y] : s.points) points += take(x, y) ? 1 : 0;
    for (const auto& [x, y] : s.marks) take(x, y);
    for (const auto& [x, low, high] : s.band) take(x, low), take(x, high);
  }
  if (points == 0) return "";
  if (reference && std::isfinite(reference->y))
    y0 = std::min(y0, reference->y), y1 = std::max(y1, reference->y);
  bool whole = true;  // every x a whole number: epochs, steps
  for (const auto& s : series)
    for (const auto& point : s.points) whole = whole && point.first == std::floor(point.first);
  widen(x0, x1, 0.0);
  widen(y0, y1, 0.04);
  Plot plot{x0, x1, y0, y1, whole};
  const int legend_row = 16;
  const bool banded =
      std::any_of(series.begin(), series.end(), [](const Series& s) { return s.band.size() >= 2; });
  const bool marked =
      std::any_of(series.begin(), series.end(), [](const Series& s) { return !s.marks.empty(); });
  const int height = plot.bottom() + 44 + legend_row * static_cast<int>(series.size()) +
                     (banded ? legend_row : 0) + (marked ? legend_row : 0);
  const int width = plot.left + plot.width + 16;
  const size_t legend_chars = static_cast<size_t>((plot.width - 18) / kCharWidth);
  std::string svg = svg_open("curve", width, height, title) + axes(plot, x_title, y_title);
  for (const auto& s : series) {  // bands first: every line stays visible over them
    if (s.band.size() < 2) continue;
    std::string upper, lower;
    for (const auto& [x, low, high] : s.band) {
      upper +=
          fmt::format("{}{:.1f},{:.1f}", upper.empty() ? "M" : " L", plot.px(x), plot.py(high));
      lower = fmt::format(" L{:.1f},{:.1f}", plot.px(x), plot.py(low)) + lower;
    }
    svg += fmt::format(
        R"(<path class="band" d="{}{} Z" fill="{}" fill-opacity="0.18" stroke="none"/>)", upper,
        lower, s.color);
  }
  if (reference && std::isfinite(reference->y))
    svg += fmt::format(
        R"(<line x1="{0}" y1="{2:.1f}" x2="{1}" y2="{2:.1f}" stroke="#5b6475" stroke-dasharray="5 4"/>)"
        R"(<text class="tick" x="{1}" y="{3:.1f}" text-anchor="end">{4}</text>)",
        plot.left, plot.left + plot.width, plot.py(reference->y),
        plot.py(reference->y) + (plot.py(reference->y) < plot.top + 14 ? 13 : -4),
        html_escape(reference->label));
  for (size_t i = 0; i < series.size(); ++i) {
    const Series& s = series[i];
    std::string path;
    for (const auto& [x, y] : s.points) {
      if (!std::isfinite(x) || !std::isfinite(y)) continue;
      path += fmt::format("{}{:.1f},{:.1f}", path.empty() ? "M" : " L", plot.px(x), plot.py(y));
    }
    const int row_y = plot.bottom() + 48 + legend_row * static_cast<int>(i);
    svg += fmt::format(
        R"(<path d="{0}" fill="none" stroke="{1}" stroke-width="2"/>)"
        R"(<rect x="{2}" y="{3}" width="12" height="4" fill="{1}"/><text x="{4}" y="{5}">{6}</text>)",
        path, s.color, plot.left, row_y - 6, plot.left + 18, row_y,
        html_escape(fit(s.label, legend_chars)));
    for (const auto& [x, y] : s.marks)
      if (std::isfinite(x) && std::isfinite(y))
        svg += fmt::format(
            R"(<circle cx="{:.1f}" cy="{:.1f}" r="4" fill="white" stroke="{}" stroke-width="2"/>)",
            plot.px(x), plot.py(y), s.color);
    if (s.points.size() <= 12)  // the points themselves, where they are few (one-epoch runs)
      for (const auto& [x, y] : s.points)
        if (std::isfinite(x) && std::isfinite(y))
          svg += fmt::format(R"(<circle cx="{:.1f}" cy="{:.1f}" r="2.5" fill="{}"/>)", plot.px(x),
                             plot.py(y), s.color);
  }
  std::vector<std::string> notes;
  if (banded) notes.push_back("lines: the median of a variant's runs; bands: their min–max");
  if (std::any_of(series.begin(), series.end(), [](const Series& s) { return !s.marks.empty(); }))
    notes.push_back("circles: each epoch's mean, at its last step");
  for (size_t i = 0; i < notes.size(); ++i)
    svg += fmt::format(R"(<text class="tick" x="{}" y="{}">{}</text>)", plot.left,
                       plot.bottom() + 48 + legend_row * static_cast<int>(series.size() + i),
                       html_escape(notes[i]));
  return svg + "</svg>";
}

// A horizontal bar chart: one bar per (label, value) in its variant's colour, annotated with `text`
// (a bar of value 0 with its text only: "not reached").
struct Bar {
  std::string label;
  double value;
  std::string text;
  const char* color;
};

std::string bar_chart(const std::string& title, const std::vector<Bar>& bars) {
  if (bars.empty()) return "";
  const int label_width = 170, bar_width = 280, row = 26, top = 28, text_width = 150;
  const int width = label_width + bar_width + text_width,
            height = top + row * static_cast<int>(bars.size()) + 8;
  double max = 0;
  for (const auto& b : bars)
    if (std::isfinite(b.value)) max = std::max(max, b.value);
  std::string svg = svg_open("bars", width, height, title);
  const size_t label_chars = static_cast<size_t>((label_width - 10) / kCharWidth);
  for (size_t i = 0; i < bars.size(); ++i) {
    const int y = top + row * static_cast<int>(i);
    const double w =
        max > 0 && std::isfinite(max) && bars[i].value > 0 ? bar_width * bars[i].value / max : 0;
    svg += fmt::format(R"(<text x="{0}" y="{1}" text-anchor="end"><title>{2}</title>{3}</text>)"
                       R"(<rect x="{4}" y="{5}" width="{6:.1f}" height="{7}" rx="3" fill="{8}"/>)"
                       R"(<text x="{9:.1f}" y="{1}">{10}</text>)",
                       label_width - 8, y + 15, html_escape(bars[i].label),
                       html_escape(fit(bars[i].label, label_chars)), label_width, y + 3, w, row - 8,
                       bars[i].color, label_width + w + 6, html_escape(bars[i].text));
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
  const bool to_target = info.key == metric::kTargetSpeedup || info.key == metric::kTimeToTarget;
  const bool timed = to_target || info.key == metric::kSpeedup || info.key == metric::kTrainSeconds;
  const std::string key = to_target ? metric::kTimeToTarget
                          : timed   ? metric::kTrainSeconds
                                    : info.key;
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
      auto best = best_value(section, info);
      bool is_best = best && *best == it->second;
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

// A figure as a chart draws it: accuracy in percent, as the tables show it.
double charted(const std::string& key, double value) {
  const MetricInfo* info = find_metric(key);
  return info && info->unit == MetricUnit::fraction ? 100 * value : value;
}
std::string axis_title(const std::string& key) {
  const MetricInfo* info = find_metric(key);
  const std::string label = info ? info->label : key;
  return info && info->unit == MetricUnit::fraction ? label + " (%)" : label;
}

// The target line of a chart of `key`, when report.target is on that figure.
std::optional<Reference> target_line(const ExperimentReport& section, const std::string& key) {
  if (section.options.target_metric != key) return std::nullopt;
  const double y = charted(key, section.options.target_value);
  return Reference{y, "target " + tick_label(y) + (key == metric::kValAcc ? "%" : "")};
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
                            section.options.target_metric == "val_loss" ? "≤" : "≥",
                            tick_label(charted(section.options.target_metric,
                                               section.options.target_value)) +
                                (section.options.target_metric == "val_acc" ? "%" : "")),
                to_target)
          : "";
  return R"(<div class="charts">)" + bar_chart("Training time (lower is better)", time) + target +
         bar_chart("Test accuracy", accuracy) +
         bar_chart("Test perplexity (lower is better)", perplexity) +
         bar_chart("Cost (lower is better)", cost) + "</div>";
}

// Where a variant sits among the others: training time (time-to-target with report.target)
// against test accuracy, the marker's area its peak memory. The frontier joins the variants no
// other beats on both; the others are grey. Static SVG: it prints as it shows.
std::string pareto_chart(const ExperimentReport& section) {
  const bool target = section.options.has_target();
  const char* time_key = target ? metric::kTimeToTarget : metric::kTrainSeconds;
  bool gpu = false;
  for (const auto& row : section.rows) gpu = gpu || row.metrics.count(metric::kCudaPeakAllocated);
  const char* memory_key = gpu ? metric::kCudaPeakAllocated : metric::kPeakMemory;
  // The quality axis: test accuracy, or a language model's test perplexity (lower is better: the
  // frontier then keeps the variants with a lower perplexity than every faster one).
  const bool language_model = section.language_model;
  const char* quality_key = language_model ? metric::kTestPerplexity : metric::kTestAcc;
  const double better = language_model ? -1 : 1;  // quality x better: higher is better
  struct Point {
    const VariantRow* row;
    double x, y, memory;
    bool frontier = false;
  };
  std::vector<Point> points;
  std::vector<std::string> missing;  // completed, but off the chart (the target not reached)
  for (const auto& row : section.rows) {
    if (row.completed == 0) continue;
    auto x = row.metrics.find(time_key);
    auto y = row.metrics.find(quality_key);
    if (x == row.metrics.end() || y == row.metrics.end()) {
      if (target && y != row.metrics.end()) missing.push_back(row.variant);
      continue;
    }
    auto memory = row.metrics.find(memory_key);
    points.push_back({&row, x->second, charted(quality_key, y->second),
                      memory == row.metrics.end() ? 0 : memory->second});
  }
  if (points.size() < 2) return "";
  // The frontier: sorted by time, each variant more accurate than every faster one.
  std::vector<Point*> by_time;
  for (auto& p : points) by_time.push_back(&p);
  std::sort(by_time.begin(), by_time.end(), [&](const Point* a, const Point* b) {
    return a->x < b->x || (a->x == b->x && better * a->y > better * b->y);
  });
  double best = -1e300;
  for (Point* p : by_time)
    if (better * p->y > best) p->frontier = true, best = better * p->y;
  double x0 = 1e300, x1 = -1e300, y0 = 1e300, y1 = -1e300, max_memory = 0;
  for (const auto& p : points) {
    x0 = std::min(x0, p.x), x1 = std::max(x1, p.x), y0 = std::min(y0, p.y), y1 = std::max(y1, p.y),
    max_memory = std::max(max_memory, p.memory);
  }
  widen(x0, x1, 0.12);
  widen(y0, y1, 0.15);
  Plot plot{x0, x1, y0, y1, false, 64, 30, 420, 240};
  const int width = plot.left + plot.width + 16, height = plot.bottom() + 104;
  const std::string x_title = target ? "time to target (s, median)" : "training time (s, median)";
  const std::string quality = language_model ? "test perplexity" : "test accuracy";
  std::string svg = svg_open("pareto", width, height,
                             (target ? "Time to target against " : "Time against ") + quality) +
                    axes(plot, x_title,
                         language_model ? "test perplexity (median, lower is better)"
                                        : "test accuracy (%, median)");
  std::string frontier;
  for (const Point* p : by_time)
    if (p->frontier)
      frontier += fmt::format("{}{:.1f},{:.1f}", frontier.empty() ? "M" : " L", plot.px(p->x),
                              plot.py(p->y));
  svg += fmt::format(
      R"(<path d="{}" fill="none" stroke="#1d2330" stroke-width="1.5" stroke-dasharray="6 3"/>)",
      frontier);
  // Markers, then labels placed where they overlap neither another label nor a marker.
  struct Box {
    double x0, y0, x1, y1;
    bool overlaps(const Box& o) const { return x0 < o.x1 && o.x0 < x1 && y0 < o.y1 && o.y0 < y1; }
  };
  std::vector<Box> taken;
  auto radius = [&](const Point& p) {
    return max_memory > 0 ? 4 + 10 * std::sqrt(p.memory / max_memory) : 6.0;
  };
  for (const auto& p : points) {
    const double r = radius(p);
    taken.push_back({plot.px(p.x) - r, plot.py(p.y) - r, plot.px(p.x) + r, plot.py(p.y) + r});
    svg += fmt::format(
        R"(<circle cx="{:.1f}" cy="{:.1f}" r="{:.1f}" fill="{}" fill-opacity="0.85" stroke="#1d2330" stroke-width="0.8"><title>{}</title></circle>)",
        plot.px(p.x), plot.py(p.y), r, p.frontier ? variant_color(section, p.row->variant) : kGrey,
        html_escape(p.row->variant));
  }
  for (const auto& p : points) {
    const std::string label = fit(p.row->variant, 22);
    const double w = kCharWidth * static_cast<double>(label.size()), h = 14, r = radius(p);
    const double cx = plot.px(p.x), cy = plot.py(p.y);
    const Box candidates[] = {{cx + r + 3, cy - h / 2, cx + r + 3 + w, cy + h / 2},
                              {cx - r - 3 - w, cy - h / 2, cx - r - 3, cy + h / 2},
                              {cx - w / 2, cy - r - 3 - h, cx + w / 2, cy - r - 3},
                              {cx - w / 2, cy + r + 3, cx + w / 2, cy + r + 3 + h}};
    const Box* chosen = &candidates[0];
    for (const Box& box : candidates) {
      const bool inside = box.x0 >= 0 && box.x1 <= width && box.y0 >= 20 && box.y1 <= plot.bottom();
      if (inside &&
          std::none_of(taken.begin(), taken.end(), [&](const Box& t) { return t.overlaps(box); })) {
        chosen = &box;
        break;
      }
    }
    taken.push_back(*chosen);
    svg += fmt::format(R"(<text x="{:.1f}" y="{:.1f}"{}>{}</text>)", chosen->x0, chosen->y1 - 3,
                       p.frontier ? "" : R"( fill="#7a8291")", html_escape(label));
  }
  const std::string memory_note =
      max_memory > 0 ? fmt::format("marker area: {} ({} at most)", find_metric(memory_key)->label,
                                   format_bytes(max_memory))
                     : "marker: no memory figure";
  std::vector<std::string> notes = {
      "dashed: the frontier, each variant more accurate than every faster one;",
      "grey: another is at least as fast and as accurate", memory_note};
  if (!missing.empty()) notes.push_back(fit("not reached, not shown: " + join(missing, ", "), 70));
  for (size_t i = 0; i < notes.size(); ++i)
    svg += fmt::format(R"(<text class="tick" x="{}" y="{}">{}</text>)", plot.left,
                       plot.bottom() + 50 + 15 * static_cast<int>(i), html_escape(notes[i]));
  return svg + "</svg>";
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
            pareto_chart(section) + curves(section) + validation_costs(section) +
            epoch_tables(section) + run_details(section) + environment_table(section) +
            "</section>";
  }
  return html + "</body></html>\n";
}

}  // namespace trainyard
