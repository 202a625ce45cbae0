// sweep.search's pieces without training: the space as read from a file (and what it refuses),
// the samplers (random's independence of anything but seed and index, the grid's order, TPE's
// determinism and its advantage over random on known functions), and successive halving's rungs
// and promotions.
#include <algorithm>
#include <cmath>
#include <numeric>

#include <gtest/gtest.h>

#include "reports/statistics.h"
#include "runner/config/search_space.h"
#include "runner/search/halving.h"
#include "runner/search/samplers.h"

namespace trainyard {
namespace {

struct Decoded {
  std::optional<SearchSettings> settings;
  std::string problems;
};

Decoded decode(const std::string& yaml, size_t variants = 1) {
  ConfigTree tree;
  flatten_into(tree, YAML::Load(yaml), "x.yaml");
  Diagnostics diagnostics;
  Decoded out;
  out.settings = decode_search(tree.subtree("sweep"), variants, 5000, diagnostics);
  for (const auto& item : diagnostics.items())
    out.problems += to_string(item.origin) + ": " + item.message + "\n";
  return out;
}

TEST(SearchSpace, ReadsTheSpaceInTheFilesOrder) {
  const Decoded d = decode(R"(
sweep:
  search:
    method: tpe
    trials: 24
    seed: 7
    space:
      train.optimizer.lr: {log_uniform: [1.0e-5, 1.0e-2]}
      train.batch_size: {choice: [32, 64, 128]}
      model.dropout: {uniform: [0.0, 0.3]}
      model.depth: {int_uniform: [1, 4]}
    metric: val_acc
    schedule: {name: successive-halving, grace_epochs: 2, reduction: 4}
    confirm_repeats: 3
)");
  ASSERT_EQ(d.problems, "");
  ASSERT_TRUE(d.settings);
  const SearchSettings& s = *d.settings;
  EXPECT_EQ(s.method, SearchMethod::tpe);
  EXPECT_EQ(s.trials, 24);
  EXPECT_EQ(s.seed, 7u);
  EXPECT_FALSE(s.minimize());
  EXPECT_EQ(s.schedule.kind, ScheduleKind::successive_halving);
  EXPECT_EQ(s.schedule.grace_epochs, 2);
  EXPECT_EQ(s.schedule.reduction, 4);
  EXPECT_EQ(s.confirm_repeats, 3);
  ASSERT_EQ(s.space.size(), 4u);
  EXPECT_EQ(s.space[0].key, "train.optimizer.lr");
  EXPECT_EQ(s.space[0].distribution, Distribution::log_uniform);
  EXPECT_EQ(s.space[1].key, "train.batch_size");
  EXPECT_EQ(s.space[1].choices.size(), 3u);
  EXPECT_EQ(s.space[2].distribution, Distribution::uniform);
  EXPECT_EQ(s.space[3].distribution, Distribution::int_uniform);
  EXPECT_EQ(s.space[0].origin.line, 8);
  // What a trial is said to have tried is read back from its run's resolved config.
  EXPECT_EQ(describe_settings(s.space, {1e-3, 2, 0.125, 3},
                              "model: {dropout: 0.125, depth: 3}\n"
                              "train: {batch_size: 128, optimizer: {name: adam, lr: 0.001}}\n"),
            "lr=0.001 batch_size=128 dropout=0.125 depth=3");
  // ... and not from the proposal: a run that trained something else says so.
  EXPECT_EQ(describe_settings(s.space, {1e-3, 2, 0.125, 3},
                              "model: {dropout: 0.0, depth: 3}\n"
                              "train: {batch_size: 32, optimizer: {name: adam, lr: 5.0e-5}}\n"),
            "lr=5e-05 batch_size=32 dropout=0 depth=3");
  EXPECT_EQ(parameter_value(s.space[3], 3.0).as<std::string>(), "3");
  EXPECT_FALSE(decode("sweep: {variants: [{name: a}]}").settings);
}

TEST(SearchSpace, RefusesWhatItCannotSearchSayingWhereAndWhy) {
  auto problems = [](const std::string& search) {
    return decode("sweep:\n  search:\n" + search).problems;
  };
  const std::string misspelt =
      problems("    trials: 4\n    space: {train.optimizer.lr: {lgo_uniform: [1, 2]}}\n");
  EXPECT_NE(misspelt.find("x.yaml:4:34: 'sweep.search.space.train.optimizer.lr.lgo_uniform': "
                          "each parameter is a setting with its prior"),
            std::string::npos)
      << misspelt;
  EXPECT_NE(problems("    trials: 4\n    space: {train.optimizer.lr: {lgo_uniform: [1, 2]}}\n")
                .find("(did you mean 'log_uniform'?)"),
            std::string::npos);
  EXPECT_NE(problems("    trials: 4\n    space: {train.optimizer.lr: {log_uniform: [0, 1]}}\n")
                .find("a log-uniform range must be above 0"),
            std::string::npos);
  EXPECT_NE(problems("    trials: 4\n    space: {model.dropout: {uniform: [3, 1]}}\n")
                .find("must be [low, high], two numbers with low < high"),
            std::string::npos);
  EXPECT_NE(problems("    trials: 4\n    metric: test_acc\n"
                     "    space: {train.epochs: {int_uniform: [1, 3]}}\n")
                .find("choosing settings by the test split would make its figures optimistic"),
            std::string::npos);
  EXPECT_NE(problems("    method: grid\n    space: {train.optimizer.lr: {uniform: [0.1, 1]}}\n")
                .find("method grid takes choice parameters only"),
            std::string::npos);
  EXPECT_NE(problems("    space: {train.epochs: {int_uniform: [1, 3]}}\n")
                .find("'sweep.search.trials' is missing"),
            std::string::npos);
  EXPECT_NE(problems("    trials: 4\n    space: {report.title: {choice: [a, b]}}\n")
                .find("a search sets a run's settings (model, dataset, train, runtime)"),
            std::string::npos);
  EXPECT_NE(problems("    trials: 4\n    space: {train.seed: {choice: [1, 2]}}\n")
                .find("a seed is not a setting to tune"),
            std::string::npos);
  EXPECT_NE(problems("    trials: 4\n    triasl: 3\n    space: {train.epochs: {choice: [1]}}\n")
                .find("did you mean 'trials'"),
            std::string::npos);
  EXPECT_NE(problems("    trials: 4\n    schedule: {name: successive-halving}\n"
                     "    space: {train.epochs: {choice: [1, 2]}}\n")
                .find("trials are compared at the same epochs"),
            std::string::npos);
  EXPECT_NE(decode("sweep:\n  search: {trials: 3000, space: {train.epochs: {choice: [1]}}}\n", 2)
                .problems.find("the search runs 3000 trials x 2 variant(s), more than the limit"),
            std::string::npos);
  EXPECT_NE(decode("sweep:\n  repeats: 2\n  search: {trials: 3, space: {train.epochs: "
                   "{choice: [1]}}}\n")
                .problems.find("the best settings run sweep.search.confirm_repeats times"),
            std::string::npos);
}

// A choice whose values are mappings is applied as a variant's `set:` of the same key applies it:
// flat, so that a section named with options of its own is written afresh (merge_layer); a
// choice of names names the section's component. A setting searched both by a parameter and
// inside a chosen mapping is refused. (A prior inside a choice is a conditional space: below.)
TEST(SearchSpace, AChoiceOfMappingsIsWrittenAsAVariantsSetWritesIt) {
  const Decoded d = decode(R"(
sweep:
  search:
    trials: 4
    space:
      train.optimizer: {choice: [{name: sgd, lr: 0.05, momentum: 0.9}, {name: adamw, lr: 0.002}]}
      train.scheduler: {choice: [none, cosine]}
)");
  ASSERT_EQ(d.problems, "");
  const ConfigTree first = trial_overrides(d.settings->space, {0, 1});
  ASSERT_NE(first.find("train.optimizer.name"), nullptr);
  EXPECT_EQ(first.find("train.optimizer.name")->node.as<std::string>(), "sgd");
  EXPECT_EQ(first.find("train.optimizer.lr")->node.as<double>(), 0.05);
  EXPECT_EQ(first.find("train.optimizer.momentum")->node.as<double>(), 0.9);
  EXPECT_EQ(first.find("train.optimizer"), nullptr);  // no mapping left as one value
  ASSERT_NE(first.find("train.scheduler.name"), nullptr);
  EXPECT_EQ(first.find("train.scheduler.name")->node.as<std::string>(), "cosine");
  // Where each value is written: the choice's own place in the file.
  EXPECT_EQ(first.find("train.optimizer.lr")->origin.line, 6);
  const ConfigTree second = trial_overrides(d.settings->space, {1, 0});
  EXPECT_EQ(second.find("train.optimizer.name")->node.as<std::string>(), "adamw");
  EXPECT_EQ(second.find("train.optimizer.momentum"), nullptr);
  EXPECT_EQ(describe_settings(d.settings->space, {1, 0},
                              "train: {optimizer: {name: adamw, lr: 0.002, weight_decay: 0.01}, "
                              "scheduler: {name: none}}\n"),
            "optimizer={name: adamw, lr: 0.002} scheduler=none");

  // A choice of names after a parameter inside the section: the name is set, the parameter kept.
  const Decoded names = decode(R"(
sweep:
  search:
    trials: 4
    space:
      train.optimizer.lr: {log_uniform: [1.0e-4, 1.0e-2]}
      train.optimizer: {choice: [sgd, adamw]}
)");
  ASSERT_EQ(names.problems, "");
  const ConfigTree named = trial_overrides(names.settings->space, {3e-3, 0});
  ASSERT_NE(named.find("train.optimizer.lr"), nullptr);
  EXPECT_EQ(named.find("train.optimizer.lr")->node.as<double>(), 3e-3);
  EXPECT_EQ(named.find("train.optimizer.name")->node.as<std::string>(), "sgd");
  // An option of a component that is named like a prior is no prior.
  EXPECT_EQ(decode(R"(
sweep:
  search:
    trials: 4
    space:
      model: {choice: [{name: mlp, choice: first}, {name: mlp}]}
)")
                .problems,
            "");

  const std::string twice = decode(R"(
sweep:
  search:
    trials: 4
    space:
      train.optimizer: {choice: [{name: adamw, lr: 0.002}, {name: sgd}]}
      train.optimizer.lr: {log_uniform: [1.0e-4, 1.0e-2]}
)")
                                .problems;
  EXPECT_NE(twice.find("x.yaml:7:28: 'train.optimizer.lr' is searched twice"), std::string::npos)
      << twice;
}

std::vector<SearchParameter> space_of(const std::string& yaml) {
  return decode("sweep:\n  search:\n    trials: 10\n    space: " + yaml + "\n").settings->space;
}

// A conditional space: a choice of mappings with priors inside is the choice followed by one
// parameter per prior of each branch, drawn only when its branch is chosen; each written at its
// prior's place. Nesting one inside another, and a grid over one, are refused.
TEST(SearchSpace, AChoiceWithPriorsInsideIsAConditionalSpace) {
  const Decoded d = decode(R"(
sweep:
  search:
    trials: 4
    space:
      train.optimizer:
        choice:
          - {name: adamw, lr: {log_uniform: [1.0e-4, 1.0e-2]}, weight_decay: {log_uniform: [1.0e-5, 1.0e-1]}}
          - {name: sgd, lr: {log_uniform: [1.0e-3, 1.0e-1]}, momentum: {uniform: [0.8, 0.99]}}
      train.batch_size: {choice: [8, 16]}
)");
  ASSERT_EQ(d.problems, "");
  const std::vector<SearchParameter>& space = d.settings->space;
  ASSERT_EQ(space.size(), 6u);
  const std::vector<std::tuple<std::string, int, size_t, double, double>> want = {
      {"train.optimizer", -1, 0, 0, 0},
      {"train.optimizer.lr", 0, 0, 1e-4, 1e-2},
      {"train.optimizer.weight_decay", 0, 0, 1e-5, 1e-1},
      {"train.optimizer.lr", 0, 1, 1e-3, 1e-1},
      {"train.optimizer.momentum", 0, 1, 0.8, 0.99},
      {"train.batch_size", -1, 0, 0, 0}};
  for (size_t i = 0; i < want.size(); ++i) {
    const auto& [key, parent, branch, low, high] = want[i];
    EXPECT_EQ(space[i].key, key) << i;
    EXPECT_EQ(space[i].parent, parent) << i;
    EXPECT_EQ(space[i].branch, branch) << i;
    EXPECT_EQ(space[i].low, low) << i;
    EXPECT_EQ(space[i].high, high) << i;
  }
  EXPECT_EQ(parameter_label(space, 4), "train.optimizer.momentum (sgd)");
  // The lowest edge: the first branch, the second's parameters none.
  const TrialValues lowest = lowest_values(space);
  EXPECT_EQ(lowest[1], 1e-4);
  EXPECT_TRUE(std::isnan(lowest[3]) && std::isnan(lowest[4]));
  // sgd chosen: its lr and momentum are written, each at its prior's place; adamw's are not.
  const TrialValues sgd = {1, NAN, NAN, 0.05, 0.9, 0};
  const ConfigTree written = trial_overrides(space, sgd);
  EXPECT_EQ(written.find("train.optimizer.name")->node.as<std::string>(), "sgd");
  EXPECT_EQ(written.find("train.optimizer.lr")->node.as<double>(), 0.05);
  EXPECT_EQ(written.find("train.optimizer.momentum")->node.as<double>(), 0.9);
  EXPECT_EQ(written.find("train.optimizer.momentum")->origin.line, 9);
  EXPECT_EQ(written.find("train.optimizer.weight_decay"), nullptr);
  EXPECT_TRUE(written.subtree("train.optimizer.lr").empty());  // the prior is gone
  EXPECT_EQ(describe_settings(space, sgd,
                              "train: {optimizer: {name: sgd, lr: 0.05, momentum: 0.9, "
                              "weight_decay: 0}, batch_size: 8}\n"),
            "optimizer={name: sgd, lr: 0.05, momentum: 0.9} batch_size=8");
  // Random draws each branch's priors only with its branch.
  int chosen[2] = {0, 0};
  for (int i = 0; i < 200; ++i) {
    const TrialValues v = propose_random(space, 5, i);
    const auto branch = static_cast<size_t>(v[0]);
    ++chosen[branch];
    for (size_t k = 1; k <= 4; ++k)
      EXPECT_EQ(std::isnan(v[k]), space[k].branch != branch) << i << " " << k;
  }
  EXPECT_GT(chosen[0], 60);
  EXPECT_GT(chosen[1], 60);

  const std::string nested = decode(R"(
sweep:
  search:
    trials: 4
    space:
      train.optimizer: {choice: [{name: sgd, momentum: {choice: [0.9, {x: {uniform: [0, 1]}}]}}]}
)")
                                 .problems;
  EXPECT_NE(nested.find("'train.optimizer.momentum': a choice with priors inside a branch of a "
                        "choice (a conditional inside a conditional) is not built"),
            std::string::npos)
      << nested;
  const std::string grid = decode(R"(
sweep:
  search:
    method: grid
    space:
      train.optimizer: {choice: [{name: adamw}, {name: sgd, lr: {log_uniform: [1.0e-3, 1.0e-1]}}]}
)")
                               .problems;
  EXPECT_NE(grid.find("x.yaml:6:66: method grid with a conditional space: "
                      "'train.optimizer.lr.log_uniform' is a prior inside a branch"),
            std::string::npos)
      << grid;
}

// TPE over a conditional space: a branch's parameters are modelled from the trials that had them,
// never proposed for a trial of the other branch, and the good branch and its good region found.
TEST(Tpe, LearnsWhichBranchAndWhereInsideIt) {
  const auto space = space_of(
      "{model.c: {choice: [{name: a, x: {uniform: [0, 1]}}, {name: b, y: {uniform: [0, 1]}, z: "
      "{log_uniform: [1.0e-3, 1.0]}}]}}");
  ASSERT_EQ(space.size(), 4u);
  auto objective = [](const TrialValues& v) {
    return v[0] == 0 ? std::pow(v[1] - 0.3, 2) : 0.2 + v[2] * v[3];
  };
  auto same = [](const TrialValues& a, const TrialValues& b) {  // NaN equal to NaN
    return a.size() == b.size() &&
           std::equal(a.begin(), a.end(), b.begin(), [](double x, double y) {
             return x == y || (std::isnan(x) && std::isnan(y));
           });
  };
  int good_branch = 0, close = 0;  // over 10 studies
  for (uint64_t seed = 0; seed < 10; ++seed) {
    double best = INFINITY;
    std::vector<Observation> seen;
    for (int i = 0; i < 60; ++i) {
      const TrialValues v = propose_tpe(space, seed, i, seen, /*minimize=*/true);
      ASSERT_EQ(v.size(), 4u);
      const auto branch = static_cast<size_t>(v[0]);
      for (size_t k = 1; k < 4; ++k) {
        EXPECT_EQ(std::isnan(v[k]), space[k].branch != branch) << i << " " << k;
        if (!std::isnan(v[k])) EXPECT_TRUE(v[k] >= space[k].low && v[k] <= space[k].high);
      }
      if (i >= 20) good_branch += branch == 0;
      seen.push_back({v, objective(v)});
      best = std::min(best, seen.back().value);
    }
    close += best < 0.0025;  // |x - 0.3| < 0.05
    EXPECT_TRUE(
        same(propose_tpe(space, seed, 60, seen, true), propose_tpe(space, seed, 60, seen, true)));
  }
  std::printf("branch a in %d of 400 modelled trials; %d of 10 studies within 0.05 of x = 0.3\n",
              good_branch, close);
  EXPECT_GE(good_branch, 320);  // random: 200
  EXPECT_GE(close, 8);
}

TEST(Samplers, RandomDependsOnTheSeedAndTheTrialAlone) {
  const auto space = space_of(
      "{train.optimizer.lr: {log_uniform: [1.0e-5, 1.0e-1]}, train.batch_size: {choice: [8, 16, "
      "32]}, model.depth: {int_uniform: [1, 4]}, model.dropout: {uniform: [0.0, 0.5]}}");
  ASSERT_EQ(space.size(), 4u);
  EXPECT_EQ(propose_random(space, 3, 17), propose_random(space, 3, 17));
  EXPECT_NE(propose_random(space, 3, 17), propose_random(space, 3, 18));
  EXPECT_NE(propose_random(space, 3, 17), propose_random(space, 4, 17));
  std::vector<double> lrs;
  std::vector<int> choices(3, 0), depths(5, 0);
  for (int i = 0; i < 4000; ++i) {
    const TrialValues v = propose_random(space, 1, i);
    ASSERT_GE(v[0], 1e-5);
    ASSERT_LE(v[0], 1e-1);
    lrs.push_back(v[0]);
    ++choices.at(static_cast<size_t>(v[1]));
    ASSERT_EQ(v[2], std::floor(v[2]));
    ++depths.at(static_cast<size_t>(v[2]));
    ASSERT_GE(v[3], 0.0);
    ASSERT_LT(v[3], 0.5);
  }
  // Log-uniform: the median is the geometric mean of the ends (1e-3), not their mean (0.05).
  std::nth_element(lrs.begin(), lrs.begin() + 2000, lrs.end());
  EXPECT_NEAR(std::log10(lrs[2000]), -3.0, 0.1);
  for (int c : choices) EXPECT_NEAR(c, 4000 / 3, 120);
  EXPECT_EQ(depths[0], 0);
  for (int d = 1; d <= 4; ++d) EXPECT_NEAR(depths[d], 1000, 100);  // both ends included
}

TEST(Samplers, AGridIsEveryCombinationTheLastParameterFastest) {
  const auto space = space_of("{model.x: {choice: [1, 2]}, model.y: {choice: [p, q, r]}}");
  std::vector<TrialValues> all;
  for (int i = 0; i < 6; ++i) all.push_back(propose_grid(space, i));
  EXPECT_EQ(all, (std::vector<TrialValues>{{0, 0}, {0, 1}, {0, 2}, {1, 0}, {1, 1}, {1, 2}}));
}

// A 2-D quadratic on log-lr and a uniform, plus a categorical whose best value is the second:
// what a study of learning rate, dropout and optimizer looks like, with its minimum known (0).
double objective(const TrialValues& v) {
  const double a = std::log10(v[0]) + 3.0, b = (v[1] - 0.2) * 10;
  return a * a + b * b + (v[2] == 1 ? 0.0 : 1.0);
}

double best_of_study(bool tpe, uint64_t seed, int trials) {
  const auto space = space_of(
      "{train.optimizer.lr: {log_uniform: [1.0e-5, 1.0e-1]}, model.dropout: {uniform: [0.0, "
      "0.5]}, train.optimizer.name: {choice: [sgd, adamw, adam]}}");
  std::vector<Observation> seen;
  double best = INFINITY;
  for (int i = 0; i < trials; ++i) {
    const TrialValues v =
        tpe ? propose_tpe(space, seed, i, seen, /*minimize=*/true) : propose_random(space, seed, i);
    seen.push_back({v, objective(v)});
    best = std::min(best, seen.back().value);
  }
  return best;
}

TEST(Tpe, ProposesFromTheSeedAndTheResultsInTrialOrderAlone) {
  const auto space = space_of("{model.x: {uniform: [0, 1]}, model.c: {choice: [u, v, w]}}");
  std::vector<Observation> seen;
  for (int i = 0; i < 15; ++i) seen.push_back({propose_random(space, 2, i), std::sin(i * 1.0)});
  EXPECT_EQ(propose_tpe(space, 2, 15, seen, true), propose_tpe(space, 2, 15, seen, true));
  // The first kStartupTrials are random: the same as a random study's.
  EXPECT_EQ(propose_tpe(space, 2, 3, {seen.begin(), seen.begin() + 3}, true),
            propose_random(space, 2, 3));
  // A failed trial (NaN) is the worst, never the best.
  std::vector<Observation> with_failure = seen;
  with_failure[0].value = NAN;
  const TrialValues v = propose_tpe(space, 2, 15, with_failure, true);
  EXPECT_GE(v[0], 0.0);
  EXPECT_LE(v[0], 1.0);
}

TEST(Tpe, FindsABetterMinimumThanRandomSearchOverTheSameBudget) {
  // Over 30 seeds of 50 trials each, TPE's best is better than random search's in most studies
  // and in the median. (docs/search.md has the comparison with Optuna's TPESampler:
  // bench/search_quality.)
  std::vector<double> tpe, random;
  int tpe_wins = 0;
  for (uint64_t seed = 0; seed < 30; ++seed) {
    tpe.push_back(best_of_study(true, seed, 50));
    random.push_back(best_of_study(false, seed, 50));
    tpe_wins += tpe.back() < random.back();
  }
  auto median = [](std::vector<double> v) {
    std::nth_element(v.begin(), v.begin() + v.size() / 2, v.end());
    return v[v.size() / 2];
  };
  EXPECT_GE(tpe_wins, 20) << "TPE median " << median(tpe) << ", random " << median(random);
  EXPECT_LT(median(tpe), 0.5 * median(random));
}

TEST(Halving, RungsGrowByTheReductionUpToTheEpochs) {
  const auto halving = ScheduleKind::successive_halving;
  EXPECT_EQ(rung_epochs({.kind = halving, .grace_epochs = 1, .reduction = 3}, 9),
            (std::vector<int64_t>{1, 3, 9}));
  EXPECT_EQ(rung_epochs({.kind = halving, .grace_epochs = 1, .reduction = 3}, 4),
            (std::vector<int64_t>{1, 3, 4}));
  EXPECT_EQ(rung_epochs({.kind = ScheduleKind::asha, .grace_epochs = 2, .reduction = 2}, 2),
            (std::vector<int64_t>{2}));
  EXPECT_EQ(rung_epochs({.kind = ScheduleKind::none}, 5), (std::vector<int64_t>{5}));
  // The median pruner checks every interval from the grace on.
  EXPECT_EQ(rung_epochs({.kind = ScheduleKind::median, .grace_epochs = 2, .interval_epochs = 2}, 9),
            (std::vector<int64_t>{2, 4, 6, 8, 9}));
}

// ASHA's get_job (Li et al., Algorithm 2) with reduction 3 over rungs at 1, 3 and 9 epochs.
TEST(Asha, ATrialGoesOnOnceInItsRungsBestThirdAndAPausedOneCanGoOnLater) {
  std::vector<AshaRung> rungs(3);
  auto arrive = [&](size_t rung, int64_t trial, double loss) {
    rungs[rung].trials.push_back(trial);
    rungs[rung].figures.push_back(loss);
  };
  arrive(0, 0, 0.3);
  arrive(0, 1, 0.5);
  EXPECT_FALSE(asha_promotion(rungs, 3, true, false));  // 2 in: a third of them is none
  arrive(0, 2, 0.4);
  auto up = asha_promotion(rungs, 3, true, false);
  ASSERT_TRUE(up);
  EXPECT_EQ(up->rung, 0u);
  EXPECT_EQ(up->trial, 0);
  rungs[0].promoted.insert(0);
  arrive(1, 0, 0.25);
  EXPECT_FALSE(asha_promotion(rungs, 3, true, false));
  // Three worse trials arrive: the best third of six is trials 0 and 2, so 2, paused since its
  // rung was decided without it, goes on now.
  arrive(0, 3, 0.9);
  arrive(0, 4, 0.8);
  arrive(0, 5, 0.7);
  up = asha_promotion(rungs, 3, true, false);
  ASSERT_TRUE(up);
  EXPECT_EQ(up->trial, 2);
  rungs[0].promoted.insert(2);
  arrive(1, 2, 0.35);
  arrive(1, 5, 0.2);  // (as if promoted earlier)
  rungs[0].promoted.insert(5);
  // The highest rung first: rung 1 holds three, its best (5) goes on to the last rung.
  up = asha_promotion(rungs, 3, true, false);
  ASSERT_TRUE(up);
  EXPECT_EQ(up->rung, 1u);
  EXPECT_EQ(up->trial, 5);
  // Higher is better for accuracy: the same rung ranks the other way.
  std::vector<AshaRung> accuracy(2);
  accuracy[0] = {.trials = {0, 1, 2}, .figures = {0.3, 0.5, 0.4}, .promoted = {}};
  EXPECT_EQ(asha_promotion(accuracy, 3, false, false)->trial, 1);
}

TEST(Asha, DrainingSendsTheBestOnAndAFailedTrialNever) {
  std::vector<AshaRung> rungs(3);
  rungs[0] = {.trials = {0, 1}, .figures = {0.5, 0.4}, .promoted = {}};
  EXPECT_FALSE(asha_promotion(rungs, 3, true, false));
  auto up = asha_promotion(rungs, 3, true, true);  // no new trial will come
  ASSERT_TRUE(up);
  EXPECT_EQ(up->trial, 1);
  rungs[0].promoted.insert(1);
  rungs[1] = {.trials = {1}, .figures = {0.3}, .promoted = {}};
  up = asha_promotion(rungs, 3, true, true);
  ASSERT_TRUE(up);
  EXPECT_EQ(up->rung, 1u);  // on to the last rung
  rungs[1].promoted.insert(1);
  EXPECT_FALSE(asha_promotion(rungs, 3, true, true));  // rung 0's quota (1) is spent
  std::vector<AshaRung> failed(2);
  failed[0] = {.trials = {0, 1, 2}, .figures = {NAN, NAN, NAN}, .promoted = {}};
  EXPECT_FALSE(asha_promotion(failed, 3, true, true));
}

// Optuna's MedianPruner: paused when the best so far is worse than the completed trials' median.
TEST(Median, ATrialWorseThanTheMedianIsPausedATieGoesOn) {
  EXPECT_DOUBLE_EQ(median_figure({0.4, NAN, 0.2, 0.9}), 0.4);
  EXPECT_DOUBLE_EQ(median_figure({0.4, 0.2, 0.9, 0.5}), 0.45);
  EXPECT_TRUE(std::isnan(median_figure({NAN})));
  EXPECT_TRUE(beats_median(0.3, 0.4, true));
  EXPECT_FALSE(beats_median(0.5, 0.4, true));
  EXPECT_TRUE(beats_median(0.4, 0.4, true));
  EXPECT_FALSE(beats_median(0.3, 0.4, false));  // accuracy
  EXPECT_FALSE(beats_median(NAN, 0.4, true));   // no figure
  EXPECT_TRUE(beats_median(0.9, NAN, true));    // nothing to judge by
}

TEST(Halving, TheBestThirdGoesOnTiesToTheEarlierTrialFailuresLast) {
  // Lower is better: trials 3 and 5 tie at 0.2; 7 failed.
  const std::vector<int64_t> trials = {0, 1, 2, 3, 4, 5, 6, 7, 8};
  const std::vector<double> losses = {0.9, 0.5, 0.3, 0.2, 0.8, 0.2, 0.7, NAN, 0.6};
  EXPECT_EQ(promote(trials, losses, 3, true), (std::vector<int64_t>{2, 3, 5}));
  EXPECT_EQ(promote(trials, losses, 4, true), (std::vector<int64_t>{3, 5}));
  EXPECT_EQ(promote({4, 9}, {0.1, 0.1}, 3, true), (std::vector<int64_t>{4}));     // at least one
  EXPECT_EQ(promote(trials, losses, 3, false), (std::vector<int64_t>{0, 4, 6}));  // accuracy
  EXPECT_EQ(promote({1, 2}, {NAN, NAN}, 2, true), (std::vector<int64_t>{1}));
}

}  // namespace
}  // namespace trainyard

namespace trainyard {
namespace {

TEST(Pareto, TheFrontIsWhatNothingDominatesAndTheRanksPeelIt) {
  // (loss, seconds), both lower-is-better.
  const std::vector<std::pair<double, double>> points = {{0.5, 10}, {0.4, 20}, {0.6, 5}, {0.5, 12},
                                                         {0.4, 20}, {NAN, 1},  {0.7, 30}};
  EXPECT_EQ(pareto_front(points), (std::vector<size_t>{0, 1, 2, 4}));  // equal points both
  EXPECT_EQ(nondomination_ranks(points), (std::vector<size_t>{0, 0, 0, 1, 0, 3, 2}));
  EXPECT_TRUE(dominates({0.4, 10}, {0.5, 10}));
  EXPECT_FALSE(dominates({0.4, 10}, {0.4, 10}));
  EXPECT_TRUE(dominates({0.9, 90}, {NAN, 1}));
}

// ZDT1 (Zitzler, Deb and Thiele 2000) in three variables: the hypervolume of the front 60 trials
// found, against the reference point (1.1, 11), by MOTPE and by random search, over 10 seeds.
double zdt1_hypervolume(bool motpe, uint64_t seed) {
  const auto space = space_of(
      "{model.a: {uniform: [0.0, 1.0]}, model.b: {uniform: [0.0, 1.0]}, model.c: {uniform: [0.0, "
      "1.0]}}");
  std::vector<Observation> seen;
  std::vector<std::pair<double, double>> points;
  for (int i = 0; i < 60; ++i) {
    const TrialValues v = motpe ? propose_tpe(space, seed, i, seen, true, /*two_objectives=*/true)
                                : propose_random(space, seed, i);
    const double g = 1 + 9 * (v[1] + v[2]) / 2;
    const double f1 = v[0], f2 = g * (1 - std::sqrt(v[0] / g));
    seen.push_back({.values = v, .value = f1, .cost = f2});
    points.push_back({f1, f2});
  }
  std::vector<size_t> front = pareto_front(points);
  std::sort(front.begin(), front.end(),
            [&](size_t a, size_t b) { return points[a].first < points[b].first; });
  double area = 0, above = 11;
  for (size_t k : front) {
    if (points[k].first >= 1.1 || points[k].second >= above) continue;
    area += (1.1 - points[k].first) * (above - points[k].second);
    above = points[k].second;
  }
  return area;
}

TEST(Tpe, WithTwoObjectivesItsFrontCoversMoreThanRandomSearchs) {
  std::vector<double> motpe, random;
  int wins = 0;
  for (uint64_t seed = 0; seed < 10; ++seed) {
    motpe.push_back(zdt1_hypervolume(true, seed));
    random.push_back(zdt1_hypervolume(false, seed));
    wins += motpe.back() > random.back();
  }
  std::sort(motpe.begin(), motpe.end());
  std::sort(random.begin(), random.end());
  std::printf(
      "ZDT1 hypervolume, medians of 10 seeds: MOTPE %.3f, random %.3f; MOTPE larger in "
      "%d\n",
      (motpe[4] + motpe[5]) / 2, (random[4] + random[5]) / 2, wins);
  EXPECT_GE(wins, 8);
}

}  // namespace
}  // namespace trainyard
