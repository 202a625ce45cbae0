// The report's SVG charts (reports/charts.cpp): static, self-contained SVG — no scripts, fonts or
// network — that prints as it shows; every text in it escaped. A kit (axes with round ticks, line
// and bar charts) and the Pareto chart of an experiment; the HTML page (reports/html.cpp) lays them
// out. Each variant keeps one colour in every chart.
#pragma once

#include <array>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "common/classification.h"
#include "reports/report.h"

namespace trainyard {

// A variant's colour (Okabe-Ito, readable by colour-blind readers and in grey print) by its place
// in the experiment; grey for one the experiment does not list.
const char* variant_color(const ExperimentReport& section, const std::string& variant);

// A line of a line chart: the median of a variant's runs, with a band over their min to max.
struct Series {
  std::string label;
  const char* color;
  std::vector<std::pair<double, double>> points{};  // (x, y): the line, the median with repeats
  std::vector<std::array<double, 3>> band{};        // (x, min, max) over the repeats
  std::vector<std::pair<double, double>> marks{};   // points of another kind: hollow circles
};

// A horizontal reference line across a chart (report.target), labelled.
struct Reference {
  double y;
  std::string label;
};

// A line chart of `series` (each its variant's colour; a band from the repeats' min to max
// behind the median line), with tick-labelled axes and a legend below; "" without a point.
std::string line_chart(const std::string& title, const std::string& x_title,
                       const std::string& y_title, const std::vector<Series>& series,
                       const std::optional<Reference>& reference = std::nullopt);

// A horizontal bar chart: one bar per (label, value) in its variant's colour, annotated with `text`
// (a bar of value 0 with its text only: "not reached").
struct Bar {
  std::string label;
  double value;
  std::string text;
  const char* color;
};
std::string bar_chart(const std::string& title, const std::vector<Bar>& bars);

// A value as the tick labels write it ("0.25", "1.2e+03").
std::string tick_label(double value);
// A figure as a chart draws it: accuracy in percent, as the tables show it.
double charted(const std::string& key, double value);
// ... and its axis title, with "(%)" for a fraction.
std::string axis_title(const std::string& key);

// Where a variant sits among the others: training time (time-to-target with report.target)
// against test accuracy (a language model's perplexity), the marker's area its peak memory; the
// frontier joins the variants no other beats on both. "" with fewer than two variants to place.
std::string pareto_chart(const ExperimentReport& section);

// A confusion matrix as a heat map: rows the labels, columns the predictions, each cell shaded by
// its share of its row (on the diagonal, the class's recall), its count written in it when the
// cells are large enough and in its tooltip always; the axes name the classes (`names`) up to 20.
std::string confusion_heat_map(const std::string& title, const ConfusionMatrix& matrix,
                               const std::vector<std::string>& names);

}  // namespace trainyard
