// What a classifier's predictions on a split come to, class by class: the confusion matrix the
// engine counts on the device, and the figures users of imbalanced data report from it. Each is
// defined as scikit-learn defines it (sklearn.metrics), and tests/classification_test.cpp holds
// them to scikit-learn's values on a fixture:
//   precision  tp / (tp + fp), 0 for a class never predicted (zero_division=0)
//   recall     tp / (tp + fn), 0 for a class never the label
//   F1         2 tp / (2 tp + fp + fn), 0 for neither
//   macro-F1   the mean F1 over the classes that occur in the labels or the predictions (a class
//              absent from both — a split that lacks it, never guessed — says nothing and is left
//              out, as f1_score(average="macro") leaves it out)
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace trainyard {

struct ClassFigures {
  double precision = 0;
  double recall = 0;
  double f1 = 0;
  int64_t support = 0;    // samples whose label is the class
  int64_t predicted = 0;  // samples predicted as the class
};

// A split's predictions counted class by class: each class's samples, predictions and correct
// predictions — all every figure above needs — and, up to kMaxCellClasses classes, every cell
// (label, prediction) of the confusion matrix: beyond, its classes² cells would outweigh what a
// report can show (ImageNet-21k's would be 3.8 GB).
class ConfusionMatrix {
 public:
  static constexpr int64_t kMaxCellClasses = 100;

  ConfusionMatrix() = default;
  // Every cell, row by row: row the label, column the prediction; classes x classes of them.
  static ConfusionMatrix from_cells(int64_t classes, std::vector<int64_t> cells);
  // Each class's counts only: correct predictions, samples labelled it, samples predicted it.
  static ConfusionMatrix from_tallies(std::vector<int64_t> correct, std::vector<int64_t> labelled,
                                      std::vector<int64_t> predicted);

  int64_t classes() const { return static_cast<int64_t>(correct_.size()); }
  bool empty() const { return correct_.empty(); }
  bool has_cells() const { return !cells_.empty(); }
  // A cell; has_cells() only.
  int64_t count(int64_t label, int64_t predicted) const {
    return cells_[static_cast<size_t>(label * classes() + predicted)];
  }
  int64_t total() const;
  double accuracy() const;  // NaN when empty
  ClassFigures figures(int64_t c) const;
  double macro_f1() const;  // NaN when no sample was counted
  // Whether class `c` is a label or a prediction of the split (what macro-F1 averages over).
  bool occurs(int64_t c) const { return labelled_[size_t(c)] + predicted_[size_t(c)] > 0; }

  // Pools another split's (a repeat's) counts; the class counts must agree. The cells stay only
  // when both have them.
  ConfusionMatrix& operator+=(const ConfusionMatrix& other);

  // As a run records it (the "test_confusion" attribute): the cells [[row 0], [row 1], ...], or
  // {"correct": [...], "labelled": [...], "predicted": [...]}.
  std::string to_json() const;
  // nullopt when `text` is neither, or its counts disagree.
  static std::optional<ConfusionMatrix> from_json(const std::string& text);

 private:
  std::vector<int64_t> cells_;  // empty beyond kMaxCellClasses
  std::vector<int64_t> correct_, labelled_, predicted_;
};

// The classes' names a dataset recorded ("dataset_classes": "negative=0, positive=1"), by index;
// an index it names no class for (or a record in another form: "integer labels 0..2") is its
// number.
std::vector<std::string> class_names(const std::string& dataset_classes, int64_t classes);

}  // namespace trainyard
