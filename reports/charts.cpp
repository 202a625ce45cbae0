#include "reports/charts.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "common/metrics.h"
#include "common/text.h"

namespace trainyard {

namespace {

// Series colours, one per variant by its place in the experiment.
const char* const kColors[] = {"#0072B2", "#E69F00", "#009E73", "#D55E00",
                               "#CC79A7", "#56B4E9", "#000000", "#8C6D31"};
const char* const kGrey = "#aab1bd";

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

// A variant on the Pareto chart: its time (x), quality (y) and memory, and whether it is on the
// frontier.
struct ParetoPoint {
  const VariantRow* row;
  double x, y, memory;
  bool frontier = false;
};

// Marks the frontier — sorted by time, each variant of higher quality (quality x `better`) than
// every faster one — and returns the points in that order.
std::vector<const ParetoPoint*> mark_frontier(std::vector<ParetoPoint>& points, double better) {
  std::vector<ParetoPoint*> by_time;
  for (auto& p : points) by_time.push_back(&p);
  std::sort(by_time.begin(), by_time.end(), [&](const ParetoPoint* a, const ParetoPoint* b) {
    return a->x < b->x || (a->x == b->x && better * a->y > better * b->y);
  });
  double best = -1e300;
  for (ParetoPoint* p : by_time)
    if (better * p->y > best) p->frontier = true, best = better * p->y;
  return {by_time.begin(), by_time.end()};
}

// Where a label or a marker is on the chart.
struct LabelBox {
  double x0, y0, x1, y1;
  bool overlaps(const LabelBox& o) const {
    return x0 < o.x1 && o.x0 < x1 && y0 < o.y1 && o.y0 < y1;
  }
};

// The place of `label` beside the marker of radius `r` at (cx, cy): it stays inside the plot area
// — never over the axes' tick labels or titles — shifted in from an edge; of its four places
// around the marker the first that overlaps nothing `taken` (the markers, the labels placed) is
// taken, and added to `taken`.
LabelBox place_label(const Plot& plot, double cx, double cy, double r, const std::string& label,
                     std::vector<LabelBox>& taken) {
  const double area_x0 = plot.left, area_x1 = plot.left + plot.width, area_y0 = plot.top,
               area_y1 = plot.bottom();
  auto inside = [&](LabelBox box) {
    const double dx = std::max(0.0, area_x0 - box.x0) - std::max(0.0, box.x1 - area_x1);
    const double dy = std::max(0.0, area_y0 - box.y0) - std::max(0.0, box.y1 - area_y1);
    return LabelBox{box.x0 + dx, box.y0 + dy, box.x1 + dx, box.y1 + dy};
  };
  const double w = kCharWidth * static_cast<double>(label.size()), h = 14;
  const LabelBox candidates[] = {inside({cx + r + 3, cy - h / 2, cx + r + 3 + w, cy + h / 2}),
                                 inside({cx - r - 3 - w, cy - h / 2, cx - r - 3, cy + h / 2}),
                                 inside({cx - w / 2, cy - r - 3 - h, cx + w / 2, cy - r - 3}),
                                 inside({cx - w / 2, cy + r + 3, cx + w / 2, cy + r + 3 + h})};
  const LabelBox* chosen = &candidates[0];
  for (const LabelBox& box : candidates) {
    if (std::none_of(taken.begin(), taken.end(),
                     [&](const LabelBox& t) { return t.overlaps(box); })) {
      chosen = &box;
      break;
    }
  }
  taken.push_back(*chosen);
  return *chosen;
}

}  // namespace

const char* variant_color(const ExperimentReport& section, const std::string& variant) {
  for (size_t i = 0; i < section.rows.size(); ++i)
    if (section.rows[i].variant == variant) return kColors[i % std::size(kColors)];
  return kGrey;
}

std::string tick_label(double value) { return fmt::format("{:.4g}", value); }

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

// A line chart of `series` (each its variant's colour; a band from the repeats' min to max
// behind the median line), with tick-labelled axes and a legend below.
std::string line_chart(const std::string& title, const std::string& x_title,
                       const std::string& y_title, const std::vector<Series>& series,
                       const std::optional<Reference>& reference) {
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
  const TaskTraits& task = traits(section.task);
  const bool language_model = !task.has_accuracy;
  const char* quality_key = task.test_quality;
  const double better = task.quality_higher_is_better ? 1 : -1;  // quality x better: higher wins
  std::vector<ParetoPoint> points;
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
  const std::vector<const ParetoPoint*> by_time = mark_frontier(points, better);
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
  for (const ParetoPoint* p : by_time)
    if (p->frontier)
      frontier += fmt::format("{}{:.1f},{:.1f}", frontier.empty() ? "M" : " L", plot.px(p->x),
                              plot.py(p->y));
  svg += fmt::format(
      R"(<path d="{}" fill="none" stroke="#1d2330" stroke-width="1.5" stroke-dasharray="6 3"/>)",
      frontier);
  // Markers, then labels placed where they overlap neither another label nor a marker.
  std::vector<LabelBox> taken;
  auto radius = [&](const ParetoPoint& p) {
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
    const LabelBox box = place_label(plot, plot.px(p.x), plot.py(p.y), radius(p), label, taken);
    svg += fmt::format(R"(<text x="{:.1f}" y="{:.1f}"{}>{}</text>)", box.x0, box.y1 - 3,
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

std::string confusion_heat_map(const std::string& title, const ConfusionMatrix& matrix,
                               const std::vector<std::string>& names) {
  const int64_t classes = matrix.classes();
  if (classes == 0) return "";
  const bool named = classes <= 20;  // beyond, names would not fit beside a row
  // Cells of 36 px for a few classes down to 4 px for a hundred or more: at most ~400 px square.
  const int cell = static_cast<int>(std::clamp<int64_t>(400 / classes, 4, 36));
  const bool counted = cell >= 28;  // room for a count of up to four digits
  size_t longest = 0;
  if (named)
    for (const std::string& name : names) longest = std::max(longest, fit(name, 14).size());
  // Room for the turned "label" (x 0-14) and the rows' names beside it.
  const int left = 28 + (named ? static_cast<int>(kCharWidth * static_cast<double>(longest)) : 0);
  const int top = 44;  // the title, and "predicted" above the columns
  const int size = cell * static_cast<int>(classes);
  std::string svg = svg_open("confusion", left + size + 10, top + size + (named ? 70 : 24), title);
  svg +=
      fmt::format(R"(<text x="{}" y="36" font-size="11" fill="#5b6475">predicted →</text>)", left);
  svg += fmt::format(
      R"svg(<text x="10" y="{}" font-size="11" fill="#5b6475" transform="rotate(-90 10 {})">)svg"
      R"(label</text>)",
      top + 40, top + 40);
  auto name = [&](int64_t c) {
    return c < static_cast<int64_t>(names.size()) ? names[static_cast<size_t>(c)]
                                                  : std::to_string(c);
  };
  for (int64_t label = 0; label < classes; ++label) {
    const ClassFigures row = matrix.figures(label);
    const int y = top + cell * static_cast<int>(label);
    if (named)
      svg += fmt::format(R"(<text x="{}" y="{}" text-anchor="end" font-size="11">{}</text>)",
                         left - 4, y + cell / 2 + 4, html_escape(fit(name(label), 14)));
    for (int64_t predicted = 0; predicted < classes; ++predicted) {
      const int64_t n = matrix.count(label, predicted);
      const double share =
          row.support > 0 ? static_cast<double>(n) / static_cast<double>(row.support) : 0;
      const int x = left + cell * static_cast<int>(predicted);
      // Blue (the first variant colour's hue) from white at 0 to full at the whole row.
      svg += fmt::format(
          R"(<rect x="{}" y="{}" width="{}" height="{}" fill="#0072B2" fill-opacity="{:.3f}" )"
          R"(stroke="#eef1f5"><title>label {} → predicted {}: {} ({:.1f}% of the label's)"
          R"( {})</title></rect>)",
          x, y, cell, cell, share, html_escape(name(label)), html_escape(name(predicted)), n,
          100 * share, row.support);
      if (counted && n > 0)
        svg += fmt::format(
            R"(<text x="{}" y="{}" text-anchor="middle" font-size="11" fill="{}">{}</text>)",
            x + cell / 2, y + cell / 2 + 4, share > 0.5 ? "white" : "#1d2330", n);
    }
  }
  if (named)  // column names, turned to fit the cell's width
    for (int64_t predicted = 0; predicted < classes; ++predicted) {
      const int x = left + cell * static_cast<int>(predicted) + cell / 2 + 4;
      svg += fmt::format(
          R"svg(<text x="{0}" y="{1}" font-size="11" transform="rotate(-45 {0} {1})" )svg"
          R"(text-anchor="end">{2}</text>)",
          x, top + size + 14, html_escape(fit(name(predicted), 14)));
    }
  return svg + "</svg>";
}

}  // namespace trainyard
