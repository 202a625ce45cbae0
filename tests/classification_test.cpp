// A classifier's evaluation figures equal scikit-learn's (1.9.1) on a fixture of logits and labels
// (fixtures/make_classification_metrics_fixture.py): accuracy, each class's precision, recall, F1
// and support, macro-F1, top-k accuracy with its tie rule, and the confusion matrix — counted by
// the engine's accumulator, a batch at a time, as evaluation counts them. Cases: two classes, a
// class never predicted and one never the label, a class absent from both (left out of the macro
// mean), ten classes with ties at the k-th place, rows of equal scores, twenty classes.
#include "common/classification.h"

#include <fstream>
#include <sstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "runner/engine/split_metrics.h"

namespace trainyard {
namespace {

nlohmann::json fixture() {
  std::ifstream in(std::string(TRAINYARD_SOURCE_DIR) +
                   "/tests/fixtures/classification_metrics.json");
  std::ostringstream text;
  text << in.rdbuf();
  return nlohmann::json::parse(text.str());
}

struct Case {
  std::string name;
  torch::Tensor logits, labels;
  const nlohmann::json* expected;
};

std::vector<Case> cases() {
  static const nlohmann::json all = fixture();
  std::vector<Case> out;
  for (const auto& c : all.at("cases")) {
    const auto scores = c.at("scores").get<std::vector<std::vector<float>>>();
    const int64_t rows = static_cast<int64_t>(scores.size());
    const int64_t classes = c.at("classes").get<int64_t>();
    torch::Tensor logits = torch::empty({rows, classes});
    for (int64_t i = 0; i < rows; ++i)
      for (int64_t j = 0; j < classes; ++j)
        logits[i][j] = scores[static_cast<size_t>(i)][static_cast<size_t>(j)];
    out.push_back({c.at("name").get<std::string>(), logits,
                   torch::tensor(c.at("labels").get<std::vector<int64_t>>(), torch::kLong), &c});
  }
  return out;
}

// What evaluation counts of the case, fed in batches of 7 samples.
SplitResult evaluate(const Case& c, const TrainingTask& task) {
  Accumulator metrics(torch::Device(torch::kCPU), task, /*per_class=*/true);
  for (int64_t start = 0; start < c.labels.size(0); start += 7) {
    const torch::Tensor logits = c.logits.slice(0, start, start + 7);
    const torch::Tensor labels = c.labels.slice(0, start, start + 7);
    metrics.add(task.loss(logits, labels), logits, labels);
  }
  return metrics.result();
}

TEST(ClassificationMetricsTest, EqualScikitLearnsOnTheFixture) {
  const TrainingTask task(Task::classification);
  const auto all = cases();
  ASSERT_EQ(all.size(), 6u);
  for (const Case& c : all) {
    SCOPED_TRACE(c.name);
    const nlohmann::json& expected = *c.expected;
    const SplitResult split = evaluate(c, task);
    const int64_t classes = expected.at("classes").get<int64_t>();
    ASSERT_EQ(split.confusion.classes(), classes);
    // The confusion matrix, cell by cell (row the label, column the prediction).
    const auto confusion = expected.at("confusion").get<std::vector<std::vector<int64_t>>>();
    for (int64_t i = 0; i < classes; ++i)
      for (int64_t j = 0; j < classes; ++j)
        EXPECT_EQ(split.confusion.count(i, j), confusion[size_t(i)][size_t(j)]) << i << "," << j;
    EXPECT_DOUBLE_EQ(split.accuracy, expected.at("accuracy").get<double>());
    EXPECT_DOUBLE_EQ(split.confusion.accuracy(), expected.at("accuracy").get<double>());
    for (int64_t k = 0; k < classes; ++k) {
      SCOPED_TRACE("class " + std::to_string(k));
      const ClassFigures f = split.confusion.figures(k);
      EXPECT_DOUBLE_EQ(f.precision, expected.at("precision")[size_t(k)].get<double>());
      EXPECT_DOUBLE_EQ(f.recall, expected.at("recall")[size_t(k)].get<double>());
      EXPECT_DOUBLE_EQ(f.f1, expected.at("f1")[size_t(k)].get<double>());
      EXPECT_EQ(f.support, expected.at("support")[size_t(k)].get<int64_t>());
    }
    // numpy sums ten or more classes pairwise: the last bits may differ.
    EXPECT_NEAR(split.macro_f1, expected.at("macro_f1").get<double>(), 1e-12);
    // Counted as the tallies kept beyond 100 classes: the same figures.
    torch::Tensor tallies = torch::zeros({3, classes}, torch::kLong);
    task.count_tallies(c.logits, c.labels, tallies);
    auto row = [&](int64_t r) {
      const torch::Tensor t = tallies[r].contiguous();
      return std::vector<int64_t>(t.data_ptr<int64_t>(), t.data_ptr<int64_t>() + classes);
    };
    const ConfusionMatrix tallied = ConfusionMatrix::from_tallies(row(0), row(1), row(2));
    EXPECT_NEAR(tallied.macro_f1(), expected.at("macro_f1").get<double>(), 1e-12);
    for (int64_t k = 0; k < classes; ++k) {
      EXPECT_DOUBLE_EQ(tallied.figures(k).precision, split.confusion.figures(k).precision) << k;
      EXPECT_DOUBLE_EQ(tallied.figures(k).recall, split.confusion.figures(k).recall) << k;
    }
    // top-k, whole and in batches; top-5 in the split's result where there are more than five.
    for (const auto& [k, accuracy] : expected.at("top_k").items()) {
      SCOPED_TRACE("top-" + k);
      const torch::Tensor hits = task.top_k_correct(c.logits, c.labels, std::stoll(k));
      EXPECT_DOUBLE_EQ(hits.item<double>() / double(c.labels.size(0)), accuracy.get<double>());
    }
    if (classes > 5)
      EXPECT_DOUBLE_EQ(split.top5, expected.at("top_k").at("5").get<double>());
    else
      EXPECT_TRUE(std::isnan(split.top5));
  }
}

// A diverged model's NaN scores find nothing: a label scored NaN is no hit, and a NaN elsewhere
// ranks above the label.
TEST(ClassificationMetricsTest, NanScoresAreNoTopKHits) {
  const TrainingTask task(Task::classification);
  const float nan = std::nanf("");
  const torch::Tensor logits = torch::tensor({nan, nan, nan, nan, nan, nan,  // all NaN
                                              1.f, 0.f, nan, 0.f, 0.f, 0.f,  // label 0 first
                                              1.f, nan, nan, 0.f, 0.f, 0.f}  // two NaN above it
                                             )
                                   .reshape({3, 6});
  const torch::Tensor labels = torch::tensor({0, 0, 0}, torch::kLong);
  EXPECT_EQ(task.top_k_correct(logits, labels, 5).item<int64_t>(), 2);
  EXPECT_EQ(task.top_k_correct(logits, labels, 2).item<int64_t>(), 1);
  EXPECT_EQ(task.top_k_correct(logits, labels, 1).item<int64_t>(), 0);
}

TEST(ClassificationMetricsTest, TheMatrixTravelsAsJsonAndPoolsRepeats) {
  const ConfusionMatrix m = ConfusionMatrix::from_cells(3, {5, 1, 0, 2, 7, 1, 0, 0, 4});
  EXPECT_EQ(m.to_json(), "[[5,1,0],[2,7,1],[0,0,4]]");
  const auto back = ConfusionMatrix::from_json(m.to_json());
  ASSERT_TRUE(back);
  ConfusionMatrix pooled = *back;
  pooled += m;
  EXPECT_EQ(pooled.count(1, 1), 14);
  EXPECT_EQ(pooled.total(), 40);
  EXPECT_DOUBLE_EQ(pooled.macro_f1(), m.macro_f1());  // doubling every count changes no ratio
  for (const char* bad : {"", "[]", "[[1,2],[3]]", "[[1,-2],[3,4]]", "[[1.5]]", "{\"a\":1}"})
    EXPECT_FALSE(ConfusionMatrix::from_json(bad)) << bad;
  EXPECT_THROW(pooled += ConfusionMatrix::from_cells(2, {1, 0, 0, 1}), std::invalid_argument);
  // Empty: no figure at all, not a zero.
  EXPECT_TRUE(std::isnan(ConfusionMatrix::from_cells(2, {0, 0, 0, 0}).macro_f1()));
  // Each class's tallies only (beyond 100 classes): the same figures, no cells; pooled with a
  // matrix of cells, the cells go.
  const ConfusionMatrix tallies = ConfusionMatrix::from_tallies({5, 7, 4}, {6, 10, 4}, {7, 8, 5});
  EXPECT_EQ(tallies.to_json(), R"({"correct":[5,7,4],"labelled":[6,10,4],"predicted":[7,8,5]})");
  const auto tallies_back = ConfusionMatrix::from_json(tallies.to_json());
  ASSERT_TRUE(tallies_back);
  EXPECT_FALSE(tallies_back->has_cells());
  for (int64_t c = 0; c < 3; ++c) {
    EXPECT_EQ(tallies_back->figures(c).f1, m.figures(c).f1) << c;
    EXPECT_EQ(tallies_back->figures(c).support, m.figures(c).support) << c;
  }
  EXPECT_EQ(tallies_back->macro_f1(), m.macro_f1());
  ConfusionMatrix mixed = m;
  mixed += tallies;
  EXPECT_FALSE(mixed.has_cells());
  EXPECT_EQ(mixed.total(), 40);
  for (const char* bad :
       {R"({"correct":[5],"labelled":[4],"predicted":[9]})",  // more correct than labelled
        R"({"correct":[1,2],"labelled":[4],"predicted":[9,9]})", R"({"correct":[1]})"})
    EXPECT_FALSE(ConfusionMatrix::from_json(bad)) << bad;
}

TEST(ClassificationMetricsTest, ClassNamesComeFromTheDatasetsRecord) {
  EXPECT_EQ(class_names("negative=0, positive=1", 2),
            (std::vector<std::string>{"negative", "positive"}));
  EXPECT_EQ(class_names("integer labels 0..2", 3), (std::vector<std::string>{"0", "1", "2"}));
  EXPECT_EQ(class_names("a=b=1, c=0", 3), (std::vector<std::string>{"c", "a=b", "2"}));
  EXPECT_EQ(class_names("x=7", 2), (std::vector<std::string>{"0", "1"}));
}

}  // namespace
}  // namespace trainyard
