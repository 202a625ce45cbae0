// How good Trainyard's TPE is, against random search here and Optuna's TPESampler in
// optuna_quality.py, on the same functions and budget: for each function and seed, the best value
// a study of TRIALS trials found. Prints one JSON line per (function, sampler, seed).
// Usage: tpe_quality [TRIALS] [SEEDS]   (bench/search/quality.sh runs both sides and compares)
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include <yaml-cpp/yaml.h>

#include "runner/config/search_space.h"
#include "runner/search/samplers.h"

using namespace trainyard;

namespace {

struct Problem {
  std::string name;
  std::string space;  // sweep.search.space, as a file writes it
  std::function<double(const TrialValues&)> f;
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

}  // namespace

int main(int argc, char** argv) {
  const int trials = argc > 1 ? std::atoi(argv[1]) : 50;
  const int seeds = argc > 2 ? std::atoi(argv[2]) : 30;
  const double pi = 3.14159265358979323846;
  const std::vector<Problem> problems = {
      // optuna_quality.py defines the same three, with the same parameters in the same order.
      {"quadratic-log-categorical",
       "{train.optimizer.lr: {log_uniform: [1.0e-5, 1.0e-1]}, model.dropout: {uniform: [0.0, "
       "0.5]}, train.optimizer.name: {choice: [sgd, adamw, adam]}}",
       [](const TrialValues& v) {
         const double a = std::log10(v[0]) + 3.0, b = (v[1] - 0.2) * 10;
         return a * a + b * b + (v[2] == 1 ? 0.0 : 1.0);
       }},
      {"branin", "{model.x: {uniform: [-5.0, 10.0]}, model.y: {uniform: [0.0, 15.0]}}",
       [pi](const TrialValues& v) {
         const double x = v[0], y = v[1];
         const double b = 5.1 / (4 * pi * pi), c = 5 / pi, t = 1 / (8 * pi);
         return std::pow(y - b * x * x + c * x - 6, 2) + 10 * (1 - t) * std::cos(x) + 10;
       }},
      {"integers-and-choice",
       "{model.depth: {int_uniform: [1, 12]}, model.width: {int_uniform: [16, 512]}, model.act: "
       "{choice: [relu, gelu, tanh, silu]}}",
       [](const TrialValues& v) {
         const double d = v[0] - 6, w = (v[1] - 384) / 64.0;
         return d * d + w * w + (v[2] == 1 ? 0.0 : 2.0);
       }},
  };
  for (const Problem& problem : problems) {
    const auto space = space_of(problem.space);
    for (const char* sampler : {"trainyard-tpe", "trainyard-random"}) {
      for (int seed = 0; seed < seeds; ++seed) {
        std::vector<Observation> seen;
        double best = INFINITY;
        for (int i = 0; i < trials; ++i) {
          const TrialValues v = std::string(sampler) == "trainyard-tpe"
                                    ? propose_tpe(space, static_cast<uint64_t>(seed), i, seen, true)
                                    : propose_random(space, static_cast<uint64_t>(seed), i);
          seen.push_back({v, problem.f(v)});
          best = std::min(best, seen.back().value);
        }
        std::printf("{\"problem\": \"%s\", \"sampler\": \"%s\", \"seed\": %d, \"best\": %.17g}\n",
                    problem.name.c_str(), sampler, seed, best);
      }
    }
  }
  return 0;
}
