// How good Trainyard's two-objective search is (MOTPE: sweep.search.metric [figure, time]),
// against random search here and Optuna's samplers in optuna_pareto.py, on the same functions and
// budget: for each function and seed, the hypervolume of the Pareto front a study of TRIALS trials
// found (both objectives minimised; the area they dominate below the function's reference point).
// Prints one JSON line per (function, sampler, seed).
// Usage: pareto_quality [TRIALS] [SEEDS]   (bench/search/pareto.sh runs both sides and compares)
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include <yaml-cpp/yaml.h>

#include "reports/statistics.h"
#include "runner/config/search_space.h"
#include "runner/search/samplers.h"

using namespace trainyard;

namespace {

struct Problem {
  std::string name;
  std::string space;  // sweep.search.space, as a file writes it
  std::function<std::pair<double, double>(const TrialValues&)> f;
  std::pair<double, double> reference;  // the hypervolume's
};

std::vector<SearchParameter> space_of(const std::string& yaml) {
  ConfigTree tree;
  flatten_into(tree, YAML::Load("sweep: {search: {trials: 1, space: " + yaml + "}}"), "bench");
  Diagnostics diagnostics;
  auto settings = decode_search(tree.subtree("sweep"), 1, 100000, diagnostics);
  if (!diagnostics.items().empty() || !settings) {
    std::fprintf(stderr, "bad space: %s\n", yaml.c_str());
    std::exit(2);
  }
  return settings->space;
}

// The area the front of `points` dominates below `reference` (two objectives, both minimised).
double hypervolume(const std::vector<std::pair<double, double>>& points,
                   std::pair<double, double> reference) {
  std::vector<size_t> front = pareto_front(points);
  std::sort(front.begin(), front.end(),
            [&](size_t a, size_t b) { return points[a].first < points[b].first; });
  double area = 0, above = reference.second;
  for (size_t k : front) {
    const auto [x, y] = points[k];
    if (x >= reference.first || y >= above) continue;
    area += (reference.first - x) * (above - y);
    above = y;
  }
  return area;
}

}  // namespace

int main(int argc, char** argv) {
  const int trials = argc > 1 ? std::atoi(argv[1]) : 60;
  const int seeds = argc > 2 ? std::atoi(argv[2]) : 20;
  const std::vector<Problem> problems = {
      // optuna_pareto.py defines the same two, with the same parameters in the same order.
      {"zdt1",
       "{model.a: {uniform: [0.0, 1.0]}, model.b: {uniform: [0.0, 1.0]}, model.c: "
       "{uniform: [0.0, 1.0]}}",
       [](const TrialValues& v) {
         const double g = 1 + 9 * (v[1] + v[2]) / 2;
         return std::pair{v[0], g * (1 - std::sqrt(v[0] / g))};
       },
       {1.1, 11.0}},
      // Accuracy against time, as a study trades them: a learning rate (log), a width (whole
      // numbers) and an optimizer (a choice). "Loss" falls with the width and an lr near 1e-3
      // (adamw's best), "time" grows with the width.
      {"loss-and-time",
       "{train.optimizer.lr: {log_uniform: [1.0e-5, 1.0e-1]}, model.width: {int_uniform: [16, "
       "512]}, train.optimizer.name: {choice: [sgd, adamw, adam]}}",
       [](const TrialValues& v) {
         const double a = std::log10(v[0]) + 3.0, w = v[1] / 512.0;
         const double loss = a * a / 4 + (v[2] == 1 ? 0.0 : 0.3) + 1 / (1 + 8 * w);
         return std::pair{loss, 0.1 + w + (v[2] == 0 ? 0.0 : 0.05)};
       },
       {5.0, 1.5}},
  };
  for (const Problem& problem : problems) {
    const auto space = space_of(problem.space);
    for (const char* sampler : {"trainyard-motpe", "trainyard-random"}) {
      for (int seed = 0; seed < seeds; ++seed) {
        std::vector<Observation> seen;
        std::vector<std::pair<double, double>> points;
        for (int i = 0; i < trials; ++i) {
          const TrialValues v =
              std::string(sampler) == "trainyard-motpe"
                  ? propose_tpe(space, static_cast<uint64_t>(seed), i, seen, true, true)
                  : propose_random(space, static_cast<uint64_t>(seed), i);
          const auto [f1, f2] = problem.f(v);
          seen.push_back({.values = v, .value = f1, .cost = f2});
          points.push_back({f1, f2});
        }
        std::printf("{\"problem\": \"%s\", \"sampler\": \"%s\", \"seed\": %d, \"hv\": %.17g}\n",
                    problem.name.c_str(), sampler, seed, hypervolume(points, problem.reference));
      }
    }
  }
  return 0;
}
