#include "common/classification.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace trainyard {

ConfusionMatrix ConfusionMatrix::from_cells(int64_t classes, std::vector<int64_t> cells) {
  if (classes < 0 || static_cast<int64_t>(cells.size()) != classes * classes)
    throw std::invalid_argument(
        fmt::format("a confusion matrix of {} classes needs {} counts, not {}", classes,
                    classes * classes, cells.size()));
  const auto n = static_cast<size_t>(classes);
  std::vector<int64_t> correct(n, 0), labelled(n, 0), predicted(n, 0);
  for (size_t label = 0; label < n; ++label)
    for (size_t prediction = 0; prediction < n; ++prediction) {
      const int64_t count = cells[label * n + prediction];
      labelled[label] += count;
      predicted[prediction] += count;
      if (label == prediction) correct[label] = count;
    }
  ConfusionMatrix m = from_tallies(std::move(correct), std::move(labelled), std::move(predicted));
  m.cells_ = std::move(cells);
  return m;
}

ConfusionMatrix ConfusionMatrix::from_tallies(std::vector<int64_t> correct,
                                              std::vector<int64_t> labelled,
                                              std::vector<int64_t> predicted) {
  if (labelled.size() != correct.size() || predicted.size() != correct.size())
    throw std::invalid_argument(
        "a class tally needs as many labelled and predicted counts as "
        "correct ones");
  for (size_t c = 0; c < correct.size(); ++c)
    if (correct[c] < 0 || correct[c] > std::min(labelled[c], predicted[c]))
      throw std::invalid_argument(
          fmt::format("class {}: {} correct of {} labelled and {} predicted", c, correct[c],
                      labelled[c], predicted[c]));
  ConfusionMatrix m;
  m.correct_ = std::move(correct);
  m.labelled_ = std::move(labelled);
  m.predicted_ = std::move(predicted);
  return m;
}

int64_t ConfusionMatrix::total() const {
  int64_t sum = 0;
  for (int64_t n : labelled_) sum += n;
  return sum;
}

double ConfusionMatrix::accuracy() const {
  const int64_t n = total();
  if (n == 0) return std::nan("");
  int64_t right = 0;
  for (int64_t c : correct_) right += c;
  return static_cast<double>(right) / static_cast<double>(n);
}

ClassFigures ConfusionMatrix::figures(int64_t c) const {
  const auto i = static_cast<size_t>(c);
  ClassFigures f{.support = labelled_[i], .predicted = predicted_[i]};
  const auto tp = static_cast<double>(correct_[i]);
  auto ratio = [](double a, double b) { return b > 0 ? a / b : 0.0; };  // zero_division=0
  f.precision = ratio(tp, static_cast<double>(f.predicted));
  f.recall = ratio(tp, static_cast<double>(f.support));
  f.f1 = ratio(2 * tp, static_cast<double>(f.support + f.predicted));
  return f;
}

double ConfusionMatrix::macro_f1() const {
  double sum = 0;
  int64_t present = 0;
  for (int64_t c = 0; c < classes(); ++c) {
    if (!occurs(c)) continue;
    sum += figures(c).f1;
    ++present;
  }
  return present == 0 ? std::nan("") : sum / static_cast<double>(present);
}

ConfusionMatrix& ConfusionMatrix::operator+=(const ConfusionMatrix& other) {
  if (empty()) return *this = other;
  if (other.classes() != classes())
    throw std::invalid_argument(fmt::format("confusion matrices of {} and {} classes do not add",
                                            classes(), other.classes()));
  auto add = [](std::vector<int64_t>& to, const std::vector<int64_t>& from) {
    for (size_t i = 0; i < to.size(); ++i) to[i] += from[i];
  };
  add(correct_, other.correct_);
  add(labelled_, other.labelled_);
  add(predicted_, other.predicted_);
  if (has_cells() && other.has_cells())
    add(cells_, other.cells_);
  else
    cells_.clear();
  return *this;
}

std::string ConfusionMatrix::to_json() const {
  if (!has_cells())
    return nlohmann::json{{"correct", correct_}, {"labelled", labelled_}, {"predicted", predicted_}}
        .dump();
  nlohmann::json rows = nlohmann::json::array();
  for (int64_t label = 0; label < classes(); ++label) {
    nlohmann::json row = nlohmann::json::array();
    for (int64_t predicted = 0; predicted < classes(); ++predicted)
      row.push_back(count(label, predicted));
    rows.push_back(std::move(row));
  }
  return rows.dump();
}

namespace {

// `json` as counts: an array of integers ≥ 0 (of `size` when given); nullopt otherwise.
std::optional<std::vector<int64_t>> counts_of(const nlohmann::json& json, size_t size = 0) {
  if (!json.is_array() || json.empty() || (size > 0 && json.size() != size)) return std::nullopt;
  std::vector<int64_t> counts;
  for (const auto& n : json) {
    if (!n.is_number_integer() || n.get<int64_t>() < 0) return std::nullopt;
    counts.push_back(n.get<int64_t>());
  }
  return counts;
}

}  // namespace

std::optional<ConfusionMatrix> ConfusionMatrix::from_json(const std::string& text) {
  const nlohmann::json json = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  try {
    if (json.is_object()) {
      const auto correct = counts_of(json.value("correct", nlohmann::json()));
      if (!correct) return std::nullopt;
      const auto labelled = counts_of(json.value("labelled", nlohmann::json()), correct->size());
      const auto predicted = counts_of(json.value("predicted", nlohmann::json()), correct->size());
      if (!labelled || !predicted) return std::nullopt;
      return from_tallies(*correct, *labelled, *predicted);
    }
    if (!json.is_array() || json.empty()) return std::nullopt;
    std::vector<int64_t> cells;
    for (const auto& row : json) {
      const auto counts = counts_of(row, json.size());
      if (!counts) return std::nullopt;
      cells.insert(cells.end(), counts->begin(), counts->end());
    }
    return from_cells(static_cast<int64_t>(json.size()), std::move(cells));
  } catch (const std::invalid_argument&) {
    return std::nullopt;
  }
}

std::vector<std::string> class_names(const std::string& dataset_classes, int64_t classes) {
  std::vector<std::string> names;
  for (int64_t c = 0; c < classes; ++c) names.push_back(std::to_string(c));
  // "name=index" pairs joined by ", ".
  size_t start = 0;
  while (start < dataset_classes.size()) {
    size_t end = dataset_classes.find(", ", start);
    if (end == std::string::npos) end = dataset_classes.size();
    const std::string pair = dataset_classes.substr(start, end - start);
    const size_t equals = pair.rfind('=');
    if (equals != std::string::npos && equals > 0) {
      const std::string index = pair.substr(equals + 1);
      if (!index.empty() && index.find_first_not_of("0123456789") == std::string::npos &&
          index.size() < 10) {
        const int64_t c = std::stoll(index);
        if (c < classes) names[static_cast<size_t>(c)] = pair.substr(0, equals);
      }
    }
    start = end + 2;
  }
  return names;
}

}  // namespace trainyard
