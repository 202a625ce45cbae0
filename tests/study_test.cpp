// sweep.search end to end on a tiny model: two variants' studies (random, and TPE past its random
// start), successive halving that pauses and promotes, and the best settings confirmed on fresh
// seeds. The rung decisions are recomputed here from the curves the store holds; a trial paused
// and promoted twice equals the same settings trained straight through, bit for bit; a study whose
// controller is SIGKILLed twice ends with the same trials, decisions and best as an undisturbed
// one.
#include <signal.h>
#include <sys/wait.h>

#include <chrono>
#include <cmath>
#include <functional>
#include <numeric>
#include <random>
#include <set>
#include <thread>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>
#include <nlohmann/json.hpp>

#include "common/text.h"
#include "db/store.h"
#include "tests/cli_support.h"

namespace trainyard {
namespace {

using testing::Result;
using testing::trainyard;

// 4 epochs: rungs at 1 and 3 (reduction 3), the last at 4.
std::string study_file(const std::string& name, const std::string& method, int trials) {
  return fmt::format(R"(name: {}
model: {{name: vit, image_size: 8, patch_size: 4, depth: 1, width: 16, heads: 2, mlp_dim: 32, num_classes: 4}}
dataset: {{name: synthetic-images, train_size: 64, val_size: 32, test_size: 32, num_classes: 4, image_size: 8}}
train: {{epochs: 4, batch_size: 16, seed: 5, log_every: 100, optimizer: {{name: adamw, lr: 1.0e-3}}}}
runtime: {{accelerator: cpu, threads: 1, data_workers: 0}}
sweep:
  variants: [{{name: fp32}}, {{name: small-batch, set: {{train.batch_size: 8}}}}]
  search:
    method: {}
    trials: {}
    seed: 3
    space:
      train.optimizer.lr: {{log_uniform: [1.0e-4, 3.0e-2]}}
      train.optimizer.weight_decay: {{choice: [0.0, 0.1]}}
    metric: val_loss
    schedule: {{name: successive-halving, grace_epochs: 1, reduction: 3}}
    confirm_repeats: 2
report: {{baseline: fp32}}
)",
                     name, method, trials);
}

struct StudyRecord {
  StudyKey key;
  std::vector<StudyTrialRow> trials;
  std::vector<StudyDecisionRow> decisions;
  std::optional<StudyOutcomeRow> outcome;
};

// Every study of `experiment` in the store, by variant.
std::map<std::string, StudyRecord> studies_of(Store& store, const std::string& experiment) {
  std::map<std::string, StudyRecord> out;
  for (const StudyProgress& p : store.study_progress())
    if (p.key.experiment == experiment)
      out[p.key.study] = {p.key, store.study_trials(p.key), store.study_decisions(p.key),
                          store.study_outcome(p.key)};
  return out;
}

double val_loss_at(Store& store, int64_t run_id, int64_t epoch) {
  for (const EpochRow& row : store.epoch_metrics(run_id))
    if (row.epoch == epoch) return row.values.at("val_loss");
  return NAN;
}

// Successive halving as docs/search.md states it, from the stored curves alone: at each rung the
// best floor(n / 3) (at least one) by val_loss at the rung's epoch go on, ties to the lower trial;
// the best of the last rung, each by the epoch whose weights its run tested, is the study's.
void expect_decisions_follow_from_the_curves(Store& store, const StudyRecord& study) {
  std::map<int64_t, int64_t> run_of;
  for (const auto& t : study.trials) run_of[t.trial] = t.run_id;
  std::vector<int64_t> cohort;
  for (const auto& t : study.trials) cohort.push_back(t.trial);
  const std::vector<int64_t> rungs = {1, 3, 4};
  ASSERT_EQ(study.decisions.size(), 2u);
  for (size_t r = 0; r < rungs.size(); ++r) {
    std::vector<std::pair<double, int64_t>> ranked;
    // At the last rung, the run's end, a trial stands on the figure of the epoch whose weights it
    // kept and tested (train.checkpoint: best, the lowest val_loss): the figure its own row shows.
    const bool last = r + 1 == rungs.size();
    for (int64_t t : cohort) {
      const int64_t run = run_of.at(t);
      const int64_t epoch =
          last ? std::llround(store.final_metrics(run).at("best_epoch")) : rungs[r];
      ranked.push_back({val_loss_at(store, run, epoch), t});
    }
    std::sort(ranked.begin(), ranked.end());
    if (r + 1 == rungs.size()) {
      ASSERT_TRUE(study.outcome);
      EXPECT_EQ(study.outcome->best_trial, ranked.front().second);
      EXPECT_EQ(*study.outcome->figure, ranked.front().first);
      break;
    }
    const size_t keep = std::max<size_t>(1, cohort.size() / 3);
    std::vector<int64_t> promoted;
    for (size_t k = 0; k < keep; ++k) promoted.push_back(ranked[k].second);
    std::sort(promoted.begin(), promoted.end());
    EXPECT_EQ(study.decisions[r].epochs, rungs[r]);
    EXPECT_EQ(nlohmann::json::parse(study.decisions[r].promoted).get<std::vector<int64_t>>(),
              promoted)
        << study.key.study << " rung " << r << ": " << study.decisions[r].evidence;
    cohort = promoted;
  }
}

class StudyTest : public testing::CliTest {};

TEST_F(StudyTest, TwoVariantsAreSearchedHalvedAndConfirmedAsTheCurvesSay) {
  for (const std::string method : {"random", "tpe"}) {
    SCOPED_TRACE(method);
    const std::string name = "study_" + method;
    // TPE models from its 11th trial on (the first 10 are random).
    const std::string file =
        dir.write(name + ".yaml", study_file(name, method, method == "tpe" ? 12 : 9));
    Result validate = trainyard("validate " + file);
    EXPECT_NE(validate.output.find(
                  fmt::format("2 studies of {} {} trials (successive-halving), then 2 runs of "
                              "each best",
                              method == "tpe" ? 12 : 9, method)),
              std::string::npos)
        << validate.output;
    Result run = trainyard("run " + file + " --db " + db());
    ASSERT_EQ(run.exit_code, 0) << run.output;
    EXPECT_NE(run.output.find(fmt::format("study {}/fp32: best trial", name)), std::string::npos)
        << run.output;

    Store store(db());
    const auto studies = studies_of(store, name);
    ASSERT_EQ(studies.size(), 2u);
    for (const auto& [variant, study] : studies) {
      SCOPED_TRACE(variant);
      expect_decisions_follow_from_the_curves(store, study);
      // The paused trials kept their checkpoints' epochs; the promoted trained on.
      int paused = 0;
      for (const auto& t : study.trials) {
        const RunRecord r = *store.run(t.run_id);
        if (r.status == RunStatus::interrupted) {
          ++paused;
          EXPECT_EQ(r.error.rfind("paused after epoch", 0), 0u) << r.error;
        }
      }
      EXPECT_EQ(paused, static_cast<int>(study.trials.size()) - 1);
    }

    // The variants at their best settings: 2 runs each, on seeds 6 and 7 (the file's 5 is the
    // one the trials were chosen on), compared in the report as the variants.
    std::map<std::string, std::vector<std::string>> seeds;
    for (const RunRecord& r : store.runs(name))
      if (r.variant == "fp32" || r.variant == "small-batch") {
        EXPECT_EQ(r.status, RunStatus::completed);
        seeds[r.variant].push_back(store.params(r.id).at("train.seed"));
        const auto best = studies.at(r.variant).outcome;
        EXPECT_NE(
            r.config_yaml.find(
                "weight_decay: " +
                std::string(best->settings.find("weight_decay=0.1") != std::string::npos ? "0.1"
                                                                                         : "0")),
            std::string::npos);
      }
    EXPECT_EQ(seeds["fp32"], (std::vector<std::string>{"6", "7"}));
    EXPECT_EQ(seeds["small-batch"], (std::vector<std::string>{"6", "7"}));
    const std::string markdown = (dir.path() / (name + ".md")).string();
    ASSERT_EQ(
        trainyard("report --db " + db() + " --experiment " + name + " -o " + markdown).exit_code,
        0);
    const std::string page = testing::read_file(markdown);
    for (const std::string& shown : std::vector<std::string>{
             "### Studies", "#### fp32 (" + std::to_string(method == "tpe" ? 12 : 9) + " trials",
             "rung 0 (epoch 1):", "(paused)", "n | precision", "small-batch",
             // The study's figure beside what its best settings scored on fresh seeds, and the
             // answer that leads with the studies' metric.
             "on fresh seeds (2 runs): val_loss ",
             "by val_loss, the studies' metric, at each variant's best settings on fresh seeds: "
             "fp32 "})
      EXPECT_NE(page.find(shown), std::string::npos) << shown << "\n" << page;
    // The trials are the study's, not "runs of other configurations".
    EXPECT_EQ(page.find("Runs of other configurations"), std::string::npos) << page;
  }
}

// What a space can propose is checked before anything runs, each problem at its place: a misspelt
// setting (did you mean), a uniform range over a setting of whole numbers (int_uniform), a variant
// that fixes a searched key, val_acc for a model without accuracy; and what is not built is
// refused.
TEST_F(StudyTest, TheSpaceIsCheckedAtItsPlaceBeforeAnythingRuns) {
  auto validate = [&](const std::string& name, const std::string& from, const std::string& to) {
    std::string text = study_file(name, "random", 4);
    const size_t at = text.find(from);
    EXPECT_NE(at, std::string::npos) << from;
    text.replace(at, from.size(), to);
    return trainyard("validate " + dir.write(name + ".yaml", text));
  };
  Result misspelt = validate("misspelt", "train.optimizer.lr:", "train.optimizr.lr:");
  EXPECT_EQ(misspelt.exit_code, 2);
  EXPECT_NE(misspelt.output.find("misspelt.yaml:13:27: error: unknown key 'train.optimizr' for "
                                 "section 'train' (did you mean 'optimizer'?)"),
            std::string::npos)
      << misspelt.output;
  Result whole = validate("whole", "train.optimizer.weight_decay: {choice: [0.0, 0.1]}",
                          "train.log_every: {uniform: [10, 100]}");
  EXPECT_NE(whole.output.find("whole.yaml:14:25: error: 'train.log_every' takes values inside its "
                              "range that the run refuses; for a setting of whole numbers, use "
                              "{int_uniform: [low, high]}"),
            std::string::npos)
      << whole.output;
  Result fixed = validate("fixed", "{name: small-batch, set: {train.batch_size: 8}}",
                          "{name: small-batch, set: {train.optimizer.lr: 0.1}}");
  EXPECT_NE(fixed.output.find("error: variant 'small-batch' sets 'train.optimizer.lr', which the "
                              "search varies"),
            std::string::npos)
      << fixed.output;
  const std::string lm = dir.write("lm.yaml", R"(name: lm
model: {name: gpt2, vocab_size: 64, max_positions: 16, depth: 1, width: 16, heads: 2}
dataset: {name: synthetic-tokens, vocab_size: 64, seq_len: 16, train_size: 32, val_size: 8, test_size: 8}
train: {epochs: 1, batch_size: 8}
runtime: {accelerator: cpu}
sweep:
  search: {trials: 2, metric: val_acc, space: {train.optimizer.lr: {log_uniform: [1.0e-4, 1.0e-2]}}}
)");
  Result accuracy = trainyard("validate " + lm);
  EXPECT_NE(accuracy.output.find("'sweep.search.metric' val_acc: variant 'default' trains a causal "
                                 "language model"),
            std::string::npos)
      << accuracy.output;
  std::string lm_f1 = testing::read_file(lm);
  lm_f1.replace(lm_f1.find("metric: val_acc"), 15, "metric: val_f1");
  Result f1 = trainyard("validate " + dir.write("lm_f1.yaml", lm_f1));
  EXPECT_NE(f1.output.find("'sweep.search.metric' val_f1: variant 'default' trains a causal "
                           "language model (model gpt2), which has no classes to take an F1 of"),
            std::string::npos)
      << f1.output;
  const std::string fine = dir.write("fine.yaml", study_file("fine", "random", 4));
  // A classifier's study may search by macro-F1.
  std::string fine_f1 = study_file("fine", "random", 4);
  fine_f1.replace(fine_f1.find("metric: val_loss"), 16, "metric: val_f1");
  Result by_f1 = trainyard("validate " + dir.write("fine_f1.yaml", fine_f1));
  EXPECT_EQ(by_f1.exit_code, 0) << by_f1.output;
  // A study's job trains on one node (refused before Slurm is asked: none runs here).
  Result submit =
      trainyard("submit --slurm " + fine + " --nodes 2 --set runtime.strategy=ddp --db " + db());
  EXPECT_EQ(submit.exit_code, 2);
  EXPECT_NE(submit.output.find("a study submitted to Slurm trains on one node"), std::string::npos)
      << submit.output;
  Result repeats = trainyard("run " + fine + " --repeats 1 --db " + db());
  EXPECT_NE(repeats.output.find("its best settings run sweep.search.confirm_repeats times"),
            std::string::npos)
      << repeats.output;
  EXPECT_FALSE(std::filesystem::exists(db())) << "nothing was written";
}

// One parameter of a generated space: the key, its prior as written, and how a value is checked
// against the run's params.
struct GeneratedParameter {
  std::string id, key, prior;
  std::vector<std::string> excludes{};  // the ids it never shares a file with (searched twice)
};

// A study trains what it says it tried, over every prior kind (uniform, log_uniform, int_uniform,
// a choice of scalars, a choice of mappings) and every kind of key (model, dataset, train,
// runtime, a component's section): study files generated from a seed, run tiny, and for every
// trial the stored and printed settings are the run's params, and the run's params are the
// proposal's values — where a proposal differs from the file, so does the run. A chosen mapping
// naming another component writes its section afresh (the file's weight_decay is not carried into
// it), naming the file's own sets its options over the file's; a chosen name alone keeps what the
// new component declares; a parameter inside a chosen section is kept whichever is written first.
// (A plugin's option: PluginTest.AStudyOverAPluginsOptionTrainsWhatItSaysItTried.)
TEST_F(StudyTest, EveryTrialTrainsWhatItsStudySaysItTried) {
  const std::vector<GeneratedParameter> pool = {
      {"depth", "model.depth", "{int_uniform: [1, 3]}"},
      {"dropout", "model.dropout", "{uniform: [0.0, 0.3]}"},
      {"train_size", "dataset.train_size", "{choice: [48, 64]}"},
      {"lr", "train.optimizer.lr", "{log_uniform: [1.0e-4, 1.0e-2]}", {"optimizer-maps"}},
      {"clip", "train.clip_grad_norm", "{uniform: [0.5, 2.0]}"},
      {"precision", "runtime.precision", "{choice: [32-true, bf16-mixed]}"},
      {"optimizer-maps",
       "train.optimizer",
       "{choice: [{name: sgd, lr: 0.05, momentum: 0.9}, {name: adamw, lr: 0.002}]}",
       {"lr", "optimizer-names"}},
      {"optimizer-names", "train.optimizer", "{choice: [sgd, adamw]}", {"optimizer-maps"}},
      {"scheduler", "train.scheduler",
       "{choice: [{name: cosine, warmup_steps: 2}, {name: step, step_size: 3, gamma: 0.5}]}"},
      {"strategy", "runtime.strategy", "{choice: [single, {name: single}]}"},
      {"batch_size", "train.batch_size", "{choice: [8, 16]}"}};
  auto of = [&](const std::string& id) {
    return *std::find_if(pool.begin(), pool.end(), [&](const auto& p) { return p.id == id; });
  };
  std::mt19937 random(20261206);
  std::set<std::string> covered;
  for (int file = 0; covered.size() < pool.size() && file < 12; ++file) {
    std::vector<GeneratedParameter> space;
    if (file == 0) {
      // A parameter inside a section, written before the choice that names the section's
      // component: the order in which a name's override used to erase it.
      space = {of("lr"), of("optimizer-names"), of("precision")};
    } else {
      std::vector<size_t> order(pool.size());
      std::iota(order.begin(), order.end(), 0);
      std::shuffle(order.begin(), order.end(), random);
      for (size_t i : order) {
        const bool clashes = std::any_of(space.begin(), space.end(), [&](const auto& p) {
          return std::find(p.excludes.begin(), p.excludes.end(), pool[i].id) != p.excludes.end();
        });
        if (space.size() < 4 && !clashes) space.push_back(pool[i]);
      }
    }
    std::string text = fmt::format(R"(name: gen{0}
model: {{name: vit, image_size: 8, patch_size: 4, depth: 1, width: 16, heads: 2, mlp_dim: 32, num_classes: 4}}
dataset: {{name: synthetic-images, train_size: 64, val_size: 16, test_size: 16, num_classes: 4, image_size: 8}}
train: {{epochs: 1, batch_size: 16, seed: 5, log_every: 100, optimizer: {{name: adamw, lr: 1.0e-3, weight_decay: 0.3}}}}
runtime: {{accelerator: cpu, threads: 1, data_workers: 0}}
sweep:
  search:
    method: random
    trials: 3
    seed: {0}
    metric: val_acc
    confirm_repeats: 0
    space:
)",
                                   file);
    for (const auto& p : space) {
      text += fmt::format("      {}: {}\n", p.key, p.prior);
      covered.insert(p.id);
    }
    const std::string name = fmt::format("gen{}", file);
    SCOPED_TRACE(text);
    const Result run = trainyard("run " + dir.write(name + ".yaml", text) + " --db " + db());
    ASSERT_EQ(run.exit_code, 0) << run.output;
    Store store(db());
    const auto studies = studies_of(store, name);
    ASSERT_EQ(studies.size(), 1u);
    const StudyRecord& study = studies.begin()->second;
    ASSERT_EQ(study.trials.size(), 3u);
    // The file's own value of a setting, where it writes one: what a trial trains unless its
    // proposal differs.
    const YAML::Node written = YAML::Load(text);
    auto file_value = [&](const std::string& key) -> std::optional<std::string> {
      YAML::Node node = YAML::Clone(written);
      for (size_t start = 0, dot = 0; dot != std::string::npos; start = dot + 1) {
        dot = key.find('.', start);
        node = node[key.substr(start, dot == std::string::npos ? dot : dot - start)];
        if (!node.IsDefined()) return std::nullopt;
      }
      return node.IsScalar() ? std::optional(node.Scalar()) : std::nullopt;
    };
    for (const StudyTrialRow& trial : study.trials) {
      const auto params = store.params(trial.run_id);
      const auto values = nlohmann::json::parse(trial.values);
      std::vector<std::string> said;
      for (size_t i = 0; i < space.size(); ++i) {
        const GeneratedParameter& p = space[i];
        const YAML::Node prior = YAML::Load(p.prior);
        const std::string label = p.key.substr(p.key.rfind('.') + 1);
        const double value = values[i].get<double>();
        auto param = [&](const std::string& key) {
          EXPECT_TRUE(params.count(key)) << key;
          return params.count(key) ? params.at(key) : std::string();
        };
        auto same = [](const std::string& a, const std::string& b) {
          // As numbers when both are (the YAML emitter's spelling of a double may differ).
          try {
            size_t used_a = 0, used_b = 0;
            const double x = std::stod(a, &used_a), y = std::stod(b, &used_b);
            if (used_a == a.size() && used_b == b.size())
              return std::abs(x - y) <= 1e-9 * std::max(1.0, std::abs(x));
          } catch (const std::exception&) {
          }
          return a == b;
        };
        if (const auto file = file_value(p.key); file && params.count(p.key)) {
          // Where the proposal differs from the file, so does the run.
          const YAML::Node chosen =
              prior["choice"] ? prior["choice"][static_cast<size_t>(value)] : YAML::Node();
          const std::string proposed = chosen.IsDefined()
                                           ? (chosen.IsScalar() ? chosen.Scalar() : "")
                                       : prior["int_uniform"] ? std::to_string(std::llround(value))
                                                              : fmt::format("{}", value);
          if (!proposed.empty() && !same(proposed, *file))
            EXPECT_FALSE(same(param(p.key), *file)) << p.key << " trained the file's " << *file;
        }
        if (prior["uniform"] || prior["log_uniform"]) {
          EXPECT_NEAR(std::stod(param(p.key)), value, 1e-9 * std::abs(value)) << p.key;
          said.push_back(fmt::format("{}={:.4g}", label, std::stod(param(p.key))));
        } else if (prior["int_uniform"]) {
          EXPECT_EQ(param(p.key), std::to_string(std::llround(value))) << p.key;
          said.push_back(label + "=" + param(p.key));
        } else {
          const YAML::Node chosen = prior["choice"][static_cast<size_t>(value)];
          if (chosen.IsMap()) {
            std::vector<std::string> inner;
            for (const auto& entry : chosen) {
              const std::string key = p.key + "." + entry.first.Scalar();
              EXPECT_TRUE(same(param(key), entry.second.Scalar()))
                  << key << ": trained " << param(key) << ", proposed " << entry.second.Scalar();
              if (const auto file = file_value(key); file && !same(*file, entry.second.Scalar()))
                EXPECT_FALSE(same(param(key), *file)) << key;
              inner.push_back(entry.first.Scalar() + ": " + param(key));
            }
            said.push_back(label + "={" + join(inner, ", ") + "}");
            // Another optimizer with options of its own is written afresh: the file's weight
            // decay is not carried into it; the file's own (adamw) takes the options listed over
            // the file's, as a variant's set: does.
            if (p.key == "train.optimizer")
              EXPECT_EQ(same(param("train.optimizer.weight_decay"), "0.3"),
                        chosen["name"].Scalar() == "adamw")
                  << chosen["name"].Scalar();
          } else {
            const std::string key = params.count(p.key) ? p.key : p.key + ".name";
            EXPECT_TRUE(same(param(key), chosen.Scalar())) << key;
            said.push_back(label + "=" + param(key));
            // A name alone keeps the options the new optimizer declares — unless another
            // parameter writes inside the section, which then is written afresh, as a variant's
            // set: {train.optimizer.name: sgd, train.optimizer.lr: ...} is.
            if (p.key == "train.optimizer") {
              const bool restated = std::any_of(space.begin(), space.end(), [](const auto& q) {
                return q.key.rfind("train.optimizer.", 0) == 0;
              });
              EXPECT_EQ(same(param("train.optimizer.weight_decay"), "0.3"), !restated);
            }
          }
        }
      }
      EXPECT_EQ(trial.settings, join(said, " ")) << "trial " << trial.trial;
    }
    ASSERT_TRUE(study.outcome);
    EXPECT_NE(run.output.find(fmt::format("best trial {} (", study.outcome->best_trial.value())),
              std::string::npos)
        << run.output;
    EXPECT_NE(run.output.find("): " + study.outcome->settings + " ("), std::string::npos)
        << run.output;
    for (const StudyTrialRow& trial : study.trials)
      if (trial.trial == study.outcome->best_trial)
        EXPECT_EQ(study.outcome->settings, trial.settings);
  }
  EXPECT_EQ(covered.size(), pool.size()) << "every parameter of the pool was in a file";
}

// No silent collapse: trials whose settings resolve to one config are one run, and the terminal
// and the report say how many distinct configurations were trained of the trials proposed (they
// count toward `trials`: docs/search.md).
TEST_F(StudyTest, TrialsThatResolveAlikeAreSaidToBeOneRun) {
  const std::string file = dir.write("alike.yaml", R"(name: alike
model: {name: vit, image_size: 8, patch_size: 4, depth: 1, width: 16, heads: 2, mlp_dim: 32, num_classes: 4}
dataset: {name: synthetic-images, train_size: 32, val_size: 16, test_size: 16, num_classes: 4, image_size: 8}
train: {epochs: 1, batch_size: 16, seed: 5, log_every: 100}
runtime: {accelerator: cpu, threads: 1, data_workers: 0}
sweep:
  search:
    method: random
    trials: 4
    confirm_repeats: 0
    space:
      runtime.strategy: {choice: [single, {name: single}]}
      train.optimizer.lr: {choice: [0.001, 1.0e-3]}
)");
  const Result run = trainyard("run " + file + " --db " + db());
  ASSERT_EQ(run.exit_code, 0) << run.output;
  EXPECT_NE(run.output.find("study alike/default: 1 distinct configuration trained of 4 trials "
                            "proposed (trial 1 = 0, 2 = 0, 3 = 0: the same resolved config"),
            std::string::npos)
      << run.output;
  Store store(db());
  EXPECT_EQ(store.runs("alike").size(), 1u);
  const std::string markdown = (dir.path() / "alike.md").string();
  ASSERT_EQ(trainyard("report --db " + db() + " -o " + markdown).exit_code, 0);
  EXPECT_NE(testing::read_file(markdown).find("; 1 distinct configuration trained of 4 trials "
                                              "proposed (trials that resolve to one config are "
                                              "one run; they count toward trials)"),
            std::string::npos)
      << testing::read_file(markdown);
}

// Every trial diverges (a learning rate of 1e30 makes NaN of the first step): the study still
// ends, with no best trial, and the report says so rather than that it is still searching.
TEST_F(StudyTest, AStudyWhoseEveryTrialDivergedEndsWithNoBestAndSaysSo) {
  const std::string file = dir.write("diverged.yaml", R"(name: diverged
model: {name: vit, image_size: 8, patch_size: 4, depth: 1, width: 16, heads: 2, mlp_dim: 32, num_classes: 4}
dataset: {name: synthetic-images, train_size: 32, val_size: 16, test_size: 16, num_classes: 4, image_size: 8}
train: {epochs: 2, batch_size: 16, seed: 5, log_every: 100, optimizer: {name: adamw, lr: 1.0e-3}}
runtime: {accelerator: cpu, threads: 1, data_workers: 0}
sweep:
  search:
    method: random
    trials: 3
    confirm_repeats: 1
    space: {train.optimizer.lr: {log_uniform: [1.0e+30, 1.0e+32]}}
)");
  for (int attempt = 0; attempt < 2; ++attempt) {  // run again: it replays to the same end
    const Result run = trainyard("run " + file + " --db " + db());
    ASSERT_EQ(run.exit_code, 0) << run.output;
    EXPECT_NE(run.output.find("study diverged/default: no trial reached a val_loss at epoch 2"),
              std::string::npos)
        << run.output;
  }
  Store store(db());
  const std::map<std::string, StudyRecord> studies = studies_of(store, "diverged");
  ASSERT_EQ(studies.count("default"), 1u);
  const StudyRecord& study = studies.at("default");
  EXPECT_EQ(study.trials.size(), 3u);
  ASSERT_TRUE(study.outcome) << "a study that ended recorded no end";
  EXPECT_FALSE(study.outcome->best_trial);
  EXPECT_FALSE(study.outcome->figure);
  EXPECT_EQ(store.runs("diverged").size(), 3u);  // the trials; no confirmation runs
  const std::string said =
      "study default: ended with no best settings: none of its 3 trials reached a val_loss (each "
      "failed or diverged), so nothing was confirmed";
  const Result answer = trainyard("report --db " + db());
  EXPECT_NE(answer.output.find(said), std::string::npos) << answer.output;
  EXPECT_EQ(answer.output.find("no best settings (yet"), std::string::npos) << answer.output;
  const std::string html = (dir.path() / "diverged.html").string();
  ASSERT_EQ(trainyard("report --db " + db() + " -o " + html).exit_code, 0);
  EXPECT_NE(testing::read_file(html).find(said), std::string::npos);
  EXPECT_EQ(testing::read_file(html).find("has no outcome yet"), std::string::npos);
}

TEST_F(StudyTest, APromotedTrialEqualsTheSameSettingsTrainedStraightThrough) {
  const std::string file = dir.write("halved.yaml", study_file("halved", "random", 6));
  ASSERT_EQ(trainyard("run " + file + " --db " + db()).exit_code, 0);
  Store store(db());
  const auto studies = studies_of(store, "halved");
  const StudyRecord& study = studies.at("fp32");
  ASSERT_TRUE(study.outcome);
  const StudyTrialRow& best =
      study.trials.at(static_cast<size_t>(study.outcome->best_trial.value()));
  const RunRecord promoted = *store.run(best.run_id);
  ASSERT_EQ(promoted.status, RunStatus::completed);
  EXPECT_EQ(promoted.resumes, 2);  // paused at epochs 1 and 3
  // The same settings as a file of their own, trained without a pause (its lr to every bit).
  const auto values = nlohmann::json::parse(best.values);
  std::string straight_file = study_file("straight", "random", 1);
  straight_file = straight_file.substr(0, straight_file.find("sweep:"));
  straight_file += fmt::format("train.optimizer.weight_decay: {}\n",
                               values[1].get<double>() == 0 ? "0.0" : "0.1");
  const std::string straight_db = (dir.path() / "straight.db").string();
  Result straight =
      trainyard("run " + dir.write("straight.yaml", straight_file) + " --db " + straight_db +
                fmt::format(" --set train.optimizer.lr={:.17g}", values[0].get<double>()));
  ASSERT_EQ(straight.exit_code, 0) << straight.output;
  Store reference(straight_db);
  const RunRecord whole = reference.runs("straight").at(0);
  EXPECT_EQ(whole.config_hash, promoted.config_hash);
  EXPECT_EQ(whole.resumes, 0);
  const auto a = store.epoch_metrics(promoted.id), b = reference.epoch_metrics(whole.id);
  ASSERT_EQ(a.size(), 4u);
  ASSERT_EQ(b.size(), 4u);
  for (size_t e = 0; e < a.size(); ++e)
    for (const char* key : {"train_loss", "train_acc", "val_loss", "val_acc", "lr"})
      EXPECT_EQ(a[e].values.at(key), b[e].values.at(key)) << "epoch " << e + 1 << " " << key;
  for (const char* key : {"test_loss", "test_acc", "steps"})
    EXPECT_EQ(store.final_metrics(promoted.id).at(key), reference.final_metrics(whole.id).at(key))
        << key;
}

// Waits (60 s at most) until `ready` says so of the store at `db`.
bool wait_for(const std::string& db, const std::function<bool(Store&)>& ready) {
  for (int i = 0; i < 600; ++i) {
    if (std::filesystem::exists(db)) {
      try {
        Store store(db);
        if (ready(store)) return true;
      } catch (const std::exception&) {  // created but not yet migrated
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return false;
}

TEST_F(StudyTest, AStudyKilledTwiceEndsWithTheTrialsDecisionsAndBestOfAnUndisturbedOne) {
  const std::string file = dir.write("replayed.yaml", study_file("replayed", "tpe", 12));
  const std::string undisturbed_db = (dir.path() / "undisturbed.db").string();
  const std::string weights = " --set train.save_weights=true";  // compared at the end
  ASSERT_EQ(trainyard("run " + file + " --db " + undisturbed_db + weights).exit_code, 0);

  auto trials_recorded = [](Store& store, size_t count) {
    size_t n = 0;
    for (const StudyProgress& p : store.study_progress()) n += static_cast<size_t>(p.trials);
    return n >= count;
  };
  // SIGKILL of the controller (its workers die with it) once 4 trials are recorded; then again
  // during the second variant's study, once TPE models (11 trials recorded there).
  for (size_t recorded : {size_t{4}, size_t{12 + 11}}) {
    const pid_t controller = testing::start_run(file, db(), {"--set", "train.save_weights=true"});
    testing::KillOnExit guard{controller};
    ASSERT_TRUE(wait_for(db(), [&](Store& store) { return trials_recorded(store, recorded); }));
    ASSERT_EQ(kill(controller, SIGKILL), 0);
    ASSERT_EQ(testing::exit_code_of(controller), 128 + SIGKILL);
    guard.pid = -1;
  }
  Result again = trainyard("run " + file + " --db " + db() + weights);
  ASSERT_EQ(again.exit_code, 0) << again.output;

  Store disturbed(db()), reference(undisturbed_db);
  const auto a = studies_of(disturbed, "replayed"), b = studies_of(reference, "replayed");
  ASSERT_EQ(a.size(), 2u);
  ASSERT_EQ(b.size(), 2u);
  for (const auto& [variant, study] : b) {
    SCOPED_TRACE(variant);
    const StudyRecord& other = a.at(variant);
    ASSERT_EQ(other.trials.size(), study.trials.size());
    for (size_t i = 0; i < study.trials.size(); ++i) {
      EXPECT_EQ(other.trials[i].values, study.trials[i].values) << "trial " << i;
      EXPECT_EQ(other.trials[i].epochs, study.trials[i].epochs) << "trial " << i;
      EXPECT_EQ(other.trials[i].figure, study.trials[i].figure) << "trial " << i;
    }
    ASSERT_EQ(other.decisions.size(), study.decisions.size());
    for (size_t r = 0; r < study.decisions.size(); ++r) {
      EXPECT_EQ(other.decisions[r].evidence, study.decisions[r].evidence);
      EXPECT_EQ(other.decisions[r].promoted, study.decisions[r].promoted);
    }
    ASSERT_TRUE(other.outcome);
    EXPECT_EQ(other.outcome->best_trial, study.outcome->best_trial);
    EXPECT_EQ(other.outcome->values, study.outcome->values);
  }
  // And the confirmations trained to the same figures.
  testing::expect_same_training(db(), undisturbed_db);
}

}  // namespace
}  // namespace trainyard

namespace trainyard {
namespace {

// sweep.search.time_budget: no trial is proposed once the study's trials have trained the budget
// through, counted from the epochs' times the store holds, so the same study run again stops at
// the same trial; the trials proposed finish their rungs. What a search does not do yet
// (Hyperband's brackets, more than two objectives) is refused by name.
TEST_F(StudyTest, ATimeBudgetStopsProposingAndWhatIsNotBuiltIsRefusedByName) {
  std::string text = study_file("budget", "random", 6);
  const std::string confirm = "    confirm_repeats: 2\n";
  text.replace(text.find(confirm), confirm.size(),
               "    confirm_repeats: 1\n    time_budget: 0.001s\n");
  const std::string file = dir.write("budget.yaml", text);
  for (int pass = 0; pass < 2; ++pass) {  // the second reads the finished study back
    Result run = trainyard("run " + file + " --db " + db());
    ASSERT_EQ(run.exit_code, 0) << run.output;
    for (const char* variant : {"fp32", "small-batch"})
      EXPECT_NE(run.output.find(fmt::format("study budget/{}: its time budget (", variant) +
                                std::string()),
                std::string::npos)
          << run.output;
    EXPECT_NE(run.output.find("is spent after 1 trial (their epochs took"), std::string::npos)
        << run.output;
    Store store(db());
    const auto studies = studies_of(store, "budget");
    ASSERT_EQ(studies.size(), 2u);
    for (const auto& [variant, study] : studies) {
      EXPECT_EQ(study.trials.size(), 1u) << variant << " (pass " << pass << ")";
      ASSERT_TRUE(study.outcome) << variant;
      EXPECT_EQ(study.outcome->best_trial, 0) << variant;
    }
  }

  auto refused = [&](const std::string& name, const std::string& from, const std::string& to) {
    std::string edited = study_file(name, "random", 4);
    edited.replace(edited.find(from), from.size(), to);
    return trainyard("validate " + dir.write(name + ".yaml", edited));
  };
  const Result hyperband = refused("hyperband", "name: successive-halving", "name: hyperband");
  EXPECT_EQ(hyperband.exit_code, 2);
  EXPECT_NE(hyperband.output.find("'sweep.search.schedule.name' hyperband: not built yet"),
            std::string::npos)
      << hyperband.output;
  // A key another schedule reads is refused as that schedule's.
  const Result foreign =
      refused("foreign", "name: successive-halving", "name: median, startup_trials: 2");
  EXPECT_EQ(foreign.exit_code, 2);
  EXPECT_NE(foreign.output.find("'sweep.search.schedule.reduction' is successive-halving and "
                                "asha's; schedule median does not read it"),
            std::string::npos)
      << foreign.output;
  const Result objectives =
      refused("objectives", "metric: val_loss", "metric: [val_acc, train_seconds, val_loss]");
  EXPECT_EQ(objectives.exit_code, 2);
  EXPECT_NE(objectives.output.find("two objectives are a validation figure and a time, [val_loss "
                                   "| val_acc | val_f1, train_seconds | time_to_target] (several "
                                   "more are not built)"),
            std::string::npos)
      << objectives.output;
  // Said once: the list is not decoded again as a word.
  size_t said = 0;
  for (size_t at = objectives.output.find("'sweep.search.metric'"); at != std::string::npos;
       at = objectives.output.find("'sweep.search.metric'", at + 1))
    ++said;
  EXPECT_EQ(said, 1u) << objectives.output;
  const Result no_trials = refused("no-trials", "    trials: 4\n", "    trials:\n");
  EXPECT_EQ(no_trials.exit_code, 2);
  EXPECT_NE(no_trials.output.find("'sweep.search.trials' has no value: how many trials each "
                                  "variant's study runs"),
            std::string::npos)
      << no_trials.output;
  const Result budget =
      refused("bad-budget", "    seed: 3\n", "    seed: 3\n    time_budget: soon\n");
  EXPECT_EQ(budget.exit_code, 2);
  EXPECT_NE(budget.output.find("'sweep.search.time_budget' soon is not a duration"),
            std::string::npos)
      << budget.output;
}

}  // namespace
}  // namespace trainyard

namespace trainyard {
namespace {

// One variant, 9 random trials over 4 epochs, paused by `schedule`.
std::string scheduled_file(const std::string& name, const std::string& schedule) {
  std::string text = study_file(name, "random", 9);
  const std::string variants =
      "  variants: [{name: fp32}, {name: small-batch, set: {train.batch_size: 8}}]\n";
  text.replace(text.find(variants), variants.size(), "");
  const std::string halving = "{name: successive-halving, grace_epochs: 1, reduction: 3}";
  text.replace(text.find(halving), halving.size(), schedule);
  const std::string report = "report: {baseline: fp32}\n";
  text.replace(text.find(report), report.size(), "");
  return text;
}

std::map<int64_t, int64_t> runs_of(const StudyRecord& study) {
  std::map<int64_t, int64_t> run_of;
  for (const auto& t : study.trials) run_of[t.trial] = t.run_id;
  return run_of;
}

// ASHA as Li et al. state it (MLSys 2020, Algorithm 2), walked again from the stored curves: when
// a job is free, promote from the highest rung below the top the best not-yet-promoted trial of
// its best floor(n / 3), else start the next trial; once all 9 are in and nothing is left to
// promote, at least one of each rung may go on from then on. Returns the promotions, (rung,
// trial), in order.
std::vector<std::pair<int64_t, int64_t>> asha_by_hand(Store& store, const StudyRecord& study) {
  const std::vector<int64_t> epochs = {1, 3, 4};
  const auto run_of = runs_of(study);
  std::vector<std::vector<int64_t>> at(3);  // the trials that reached each rung
  std::vector<std::set<int64_t>> sent(3);
  std::vector<std::pair<int64_t, int64_t>> promotions;
  int64_t next = 0;
  bool draining = false;
  for (;;) {
    std::optional<std::pair<int64_t, int64_t>> job;
    for (int64_t r = 1; r >= 0 && !job; --r) {
      std::vector<std::pair<double, int64_t>> ranked;
      for (int64_t t : at[r]) ranked.push_back({val_loss_at(store, run_of.at(t), epochs[r]), t});
      std::stable_sort(ranked.begin(), ranked.end(),
                       [](const auto& a, const auto& b) { return a.first < b.first; });
      size_t quota = at[r].size() / 3;
      if (draining && !at[r].empty()) quota = std::max<size_t>(quota, 1);
      for (size_t k = 0; k < quota && !job; ++k)
        if (!sent[r].count(ranked[k].second)) job = {{r, ranked[k].second}};
    }
    if (job) {
      promotions.push_back(*job);
      sent[job->first].insert(job->second);
      at[job->first + 1].push_back(job->second);
    } else if (next < 9) {
      at[0].push_back(next++);
    } else if (!draining) {
      draining = true;
    } else {
      break;
    }
  }
  return promotions;
}

// Optuna's MedianPruner (n_startup_trials 2, n_warmup_steps 0 after the first epoch, interval 1)
// walked again from the stored curves: (trial, epoch, went on) for each judgement.
std::vector<std::tuple<int64_t, int64_t, bool>> median_by_hand(Store& store,
                                                               const StudyRecord& study) {
  const auto run_of = runs_of(study);
  std::vector<int64_t> completed;
  std::vector<std::tuple<int64_t, int64_t, bool>> judged;
  for (int64_t t = 0; t < 9; ++t) {
    bool paused = false;
    for (int64_t epoch = 1; epoch < 4 && completed.size() >= 2; ++epoch) {
      std::vector<double> others;
      for (int64_t c : completed) others.push_back(val_loss_at(store, run_of.at(c), epoch));
      std::sort(others.begin(), others.end());
      const size_t n = others.size();
      const double median = n % 2 ? others[n / 2] : (others[n / 2 - 1] + others[n / 2]) / 2;
      double best = INFINITY;
      for (int64_t e = 1; e <= epoch; ++e)
        best = std::min(best, val_loss_at(store, run_of.at(t), e));
      judged.push_back({t, epoch, best <= median});
      if (best > median) {
        paused = true;
        break;
      }
    }
    if (!paused) completed.push_back(t);
  }
  return judged;
}

// sweep.search.schedule asha and median: their decisions are what the papers' rules say of the
// stored curves; a trial they stop is paused with its checkpoint, never killed; asha decides
// before its trials are all in (asynchronous); and an asha study SIGKILLed mid-way ends with the
// trials, decisions and best of an undisturbed one.
TEST_F(StudyTest, AshaAndTheMedianPrunerDecideAsTheirRulesSayAndReplayAfterAKill) {
  const std::string asha =
      dir.write("asha.yaml", scheduled_file("asha", "{name: asha, grace_epochs: 1, reduction: 3}"));
  const Result validate = trainyard("validate " + asha);
  EXPECT_NE(validate.output.find("1 study of 9 random trials (asha), then 2 runs of each best"),
            std::string::npos)
      << validate.output;
  const std::string undisturbed_db = (dir.path() / "undisturbed.db").string();
  const Result run = trainyard("run " + asha + " --db " + undisturbed_db);
  ASSERT_EQ(run.exit_code, 0) << run.output;
  EXPECT_NE(run.output.find("asha rungs at epochs 1, 3, 4"), std::string::npos) << run.output;
  {
    Store store(undisturbed_db);
    const StudyRecord study = studies_of(store, "asha").at("default");
    ASSERT_EQ(study.trials.size(), 9u);
    const auto promotions = asha_by_hand(store, study);
    ASSERT_EQ(study.decisions.size(), promotions.size());
    for (size_t k = 0; k < promotions.size(); ++k) {
      EXPECT_EQ(study.decisions[k].rung, promotions[k].first) << "decision " << k;
      EXPECT_EQ(study.decisions[k].trial, promotions[k].second) << "decision " << k;
      EXPECT_EQ(study.decisions[k].promoted, fmt::format("[{}]", promotions[k].second));
    }
    // Asynchronous: the first promotion came when 3 of the 9 trials were in.
    EXPECT_EQ(nlohmann::json::parse(study.decisions.front().evidence).size(), 3u);
    // The best is the best of those that reached the last rung, by the epoch each run tested.
    std::vector<std::pair<double, int64_t>> top;
    for (const auto& [rung, trial] : promotions)
      if (rung == 1) {
        const int64_t id = runs_of(study).at(trial);
        top.push_back(
            {val_loss_at(store, id, std::llround(store.final_metrics(id).at("best_epoch"))),
             trial});
      }
    ASSERT_FALSE(top.empty());
    ASSERT_TRUE(study.outcome);
    EXPECT_EQ(study.outcome->best_trial, std::min_element(top.begin(), top.end())->second);
    for (const auto& t : study.trials) {
      const RunRecord r = *store.run(t.run_id);
      if (t.epochs < 4) {
        EXPECT_EQ(r.status, RunStatus::interrupted) << t.trial;
        EXPECT_EQ(r.error.rfind("paused after epoch", 0), 0u) << r.error;
      }
    }
  }

  // Killed once the first promotion is recorded, then run again.
  {
    const pid_t controller = testing::start_run(asha, db(), {});
    testing::KillOnExit guard{controller};
    ASSERT_TRUE(wait_for(db(), [](Store& store) {
      for (const StudyProgress& p : store.study_progress())
        if (p.decisions >= 1) return true;
      return false;
    }));
    ASSERT_EQ(kill(controller, SIGKILL), 0);
    ASSERT_EQ(testing::exit_code_of(controller), 128 + SIGKILL);
    guard.pid = -1;
  }
  ASSERT_EQ(trainyard("run " + asha + " --db " + db()).exit_code, 0);
  {
    Store disturbed(db()), reference(undisturbed_db);
    const StudyRecord a = studies_of(disturbed, "asha").at("default");
    const StudyRecord b = studies_of(reference, "asha").at("default");
    ASSERT_EQ(a.trials.size(), b.trials.size());
    for (size_t i = 0; i < a.trials.size(); ++i) {
      EXPECT_EQ(a.trials[i].values, b.trials[i].values) << "trial " << i;
      EXPECT_EQ(a.trials[i].epochs, b.trials[i].epochs) << "trial " << i;
      EXPECT_EQ(a.trials[i].figure, b.trials[i].figure) << "trial " << i;
    }
    ASSERT_EQ(a.decisions.size(), b.decisions.size());
    for (size_t k = 0; k < a.decisions.size(); ++k) {
      EXPECT_EQ(a.decisions[k].evidence, b.decisions[k].evidence) << "decision " << k;
      EXPECT_EQ(a.decisions[k].promoted, b.decisions[k].promoted) << "decision " << k;
    }
    ASSERT_TRUE(a.outcome);
    EXPECT_EQ(a.outcome->best_trial, b.outcome->best_trial);
  }

  const std::string median =
      dir.write("median.yaml",
                scheduled_file("median", "{name: median, grace_epochs: 1, startup_trials: 2}"));
  const Result pruned = trainyard("run " + median + " --db " + db());
  ASSERT_EQ(pruned.exit_code, 0) << pruned.output;
  Store store(db());
  const StudyRecord study = studies_of(store, "median").at("default");
  const auto judged = median_by_hand(store, study);
  ASSERT_EQ(study.decisions.size(), judged.size());
  int paused = 0;
  for (size_t k = 0; k < judged.size(); ++k) {
    const auto& [trial, epoch, went_on] = judged[k];
    EXPECT_EQ(study.decisions[k].trial, trial) << "decision " << k;
    EXPECT_EQ(study.decisions[k].epochs, epoch) << "decision " << k;
    EXPECT_EQ(study.decisions[k].promoted, went_on ? fmt::format("[{}]", trial) : "[]")
        << "decision " << k << ": " << study.decisions[k].evidence;
    // The evidence ends with the judged trial's own best so far.
    EXPECT_EQ(nlohmann::json::parse(study.decisions[k].evidence).back()[0], trial);
    if (!went_on) {
      ++paused;
      const RunRecord r = *store.run(runs_of(study).at(trial));
      EXPECT_EQ(r.error, fmt::format("paused after epoch {} by the study's schedule "
                                     "(sweep.search.schedule); a promotion continues it from its "
                                     "checkpoint",
                                     epoch));
    }
  }
  EXPECT_GT(paused, 0) << "no trial was paused: the test shows nothing";
  const std::string markdown = (dir.path() / "median.md").string();
  ASSERT_EQ(trainyard("report --db " + db() + " --experiment median -o " + markdown).exit_code, 0);
  const std::string page = testing::read_file(markdown);
  EXPECT_NE(page.find("(9 trials, random, median)"), std::string::npos) << page;
  EXPECT_NE(page.find("at epoch 1: its best "), std::string::npos) << page;
  EXPECT_NE(page.find("; the completed trials' 0: "), std::string::npos) << page;
  EXPECT_NE(page.find("→ paused"), std::string::npos) << page;
}

}  // namespace
}  // namespace trainyard

namespace trainyard {
namespace {

// A conditional space end to end: each trial's run trains the branch its optimizer choice drew,
// with that branch's priors and no other's; the study read back after it ended trains nothing
// again; and what a branch's prior can propose that its component refuses is said at the prior.
TEST_F(StudyTest, AConditionalSpaceTrainsEachBranchWithItsOwnPriors) {
  const std::string space = R"(    space:
      train.optimizer:
        choice:
          - {name: adamw, lr: {log_uniform: [1.0e-4, 1.0e-2]}, weight_decay: {log_uniform: [1.0e-5, 1.0e-1]}}
          - {name: sgd, lr: {log_uniform: [1.0e-3, 1.0e-1]}, momentum: {uniform: [0.8, 0.99]}}
)";
  auto conditional = [&](const std::string& name, const std::string& from, const std::string& to) {
    std::string text = study_file(name, "tpe", 12);
    const std::string variants =
        "  variants: [{name: fp32}, {name: small-batch, set: {train.batch_size: 8}}]\n";
    text.replace(text.find(variants), variants.size(), "");
    const std::string old_space = text.substr(text.find("    space:\n"),
                                              text.find("    metric:") - text.find("    space:\n"));
    std::string edited = space;
    if (!from.empty()) edited.replace(edited.find(from), from.size(), to);
    text.replace(text.find(old_space), old_space.size(), edited);
    const std::string schedule =
        "    schedule: {name: successive-halving, grace_epochs: 1, reduction: 3}\n";
    text.replace(text.find(schedule), schedule.size(), "");
    const std::string report = "report: {baseline: fp32}\n";
    text.replace(text.find(report), report.size(), "");
    return dir.write(name + ".yaml", text);
  };
  const std::string file = conditional("conditional", "", "");
  const Result run = trainyard("run " + file + " --db " + db());
  ASSERT_EQ(run.exit_code, 0) << run.output;
  Store store(db());
  const StudyRecord study = studies_of(store, "conditional").at("default");
  ASSERT_EQ(study.trials.size(), 12u);
  std::map<std::string, int> chosen;
  for (const auto& t : study.trials) {
    SCOPED_TRACE("trial " + std::to_string(t.trial));
    const nlohmann::json values = nlohmann::json::parse(t.values);
    ASSERT_EQ(values.size(), 5u);  // the choice, adamw's lr and weight_decay, sgd's lr, momentum
    const std::map<std::string, std::string> params = store.params(t.run_id);
    const std::string optimizer = params.at("train.optimizer.name");
    ++chosen[optimizer];
    const double lr = std::stod(params.at("train.optimizer.lr"));
    if (optimizer == "sgd") {
      EXPECT_EQ(values[0], 1);
      EXPECT_TRUE(values[1].is_null() && values[2].is_null()) << t.values;
      EXPECT_NEAR(lr, values[3].get<double>(), 1e-12 * lr);
      EXPECT_TRUE(lr >= 1e-3 && lr <= 1e-1) << lr;
      const double momentum = std::stod(params.at("train.optimizer.momentum"));
      EXPECT_NEAR(momentum, values[4].get<double>(), 1e-12);
      EXPECT_TRUE(momentum >= 0.8 && momentum <= 0.99) << momentum;
      EXPECT_EQ(t.settings.rfind("optimizer={name: sgd, lr: ", 0), 0u) << t.settings;
    } else {
      ASSERT_EQ(optimizer, "adamw");
      EXPECT_EQ(values[0], 0);
      EXPECT_TRUE(values[3].is_null() && values[4].is_null()) << t.values;
      EXPECT_NEAR(lr, values[1].get<double>(), 1e-12 * lr);
      EXPECT_TRUE(lr >= 1e-4 && lr <= 1e-2) << lr;
      const double decay = std::stod(params.at("train.optimizer.weight_decay"));
      EXPECT_NEAR(decay, values[2].get<double>(), 1e-12 * decay);
      EXPECT_EQ(params.count("train.optimizer.momentum"), 0u);
      EXPECT_EQ(t.settings.rfind("optimizer={name: adamw, lr: ", 0), 0u) << t.settings;
    }
  }
  EXPECT_GT(chosen["sgd"], 0);
  EXPECT_GT(chosen["adamw"], 0);
  ASSERT_TRUE(study.outcome);

  // Read back, not trained again.
  const size_t runs = store.runs("conditional").size();
  const Result again = trainyard("run " + file + " --db " + db());
  ASSERT_EQ(again.exit_code, 0) << again.output;
  EXPECT_EQ(Store(db()).runs("conditional").size(), runs);

  // What a branch can propose that its component refuses, at the prior that proposes it.
  const Result unknown = trainyard(
      "validate " + conditional("unknown", "momentum: {uniform: [0.8, 0.99]}",
                                "momentum: {uniform: [0.8, 0.99]}, betas: {uniform: [0.1, 0.2]}"));
  EXPECT_EQ(unknown.exit_code, 2);
  EXPECT_NE(unknown.output.find("unknown.yaml:15:96: error: unknown key 'train.optimizer.betas' "
                                "for optimizer 'sgd'"),
            std::string::npos)
      << unknown.output;
  const Result range =
      trainyard("validate " + conditional("range", "uniform: [0.8, 0.99]", "uniform: [0.5, 1.5]"));
  EXPECT_EQ(range.exit_code, 2);
  EXPECT_NE(range.output.find("range.yaml:15:73: error: 'train.optimizer.momentum' must be 0 to "
                              "1, got 1.5"),
            std::string::npos)
      << range.output;
}

}  // namespace
}  // namespace trainyard

namespace trainyard {
namespace {

// Two objectives: sweep.search.metric [val_acc, train_seconds] with report.target gives the Pareto
// front of the trials (recomputed here from the store: each trial's kept val_acc and its run's
// train_seconds) and confirms the fastest trial on it that reaches the target; [val_acc,
// time_to_target] confirms the fastest to reach it; what two objectives cannot do is refused.
TEST_F(StudyTest, TwoObjectivesGiveTheParetoFrontAndConfirmTheFastestThatReachesTheTarget) {
  auto two = [&](const std::string& name, const std::string& metric, const std::string& report) {
    std::string text = study_file(name, "tpe", 12);
    const std::string variants =
        "  variants: [{name: fp32}, {name: small-batch, set: {train.batch_size: 8}}]\n";
    text.replace(text.find(variants), variants.size(), "");
    const std::string schedule =
        "    schedule: {name: successive-halving, grace_epochs: 1, reduction: 3}\n";
    text.replace(text.find(schedule), schedule.size(), "");
    text.replace(text.find("metric: val_loss"), 16, "metric: " + metric);
    text.replace(text.find("train.optimizer.weight_decay: {choice: [0.0, 0.1]}"), 50,
                 "train.batch_size: {choice: [4, 16, 32]}");
    const std::string old_report = "report: {baseline: fp32}\n";
    text.replace(text.find(old_report), old_report.size(), report);
    return dir.write(name + ".yaml", text);
  };
  const std::string file = two("pareto", "[val_acc, train_seconds]",
                               "report: {target: {metric: val_acc, value: 0.3}}\n");
  const Result validate = trainyard("validate " + file);
  EXPECT_NE(validate.output.find("1 study of 12 tpe trials by val_acc and train_seconds (a Pareto "
                                 "front), then 2 runs of the settings each picks from its front"),
            std::string::npos)
      << validate.output;
  const Result run = trainyard("run " + file + " --db " + db());
  ASSERT_EQ(run.exit_code, 0) << run.output;
  Store store(db());
  const StudyRecord study = studies_of(store, "pareto").at("default");
  ASSERT_EQ(study.trials.size(), 12u);
  // The front by hand: no other trial at least as accurate and as fast, and better in one.
  std::vector<std::tuple<int64_t, double, double>> trials;  // trial, val_acc, train_seconds
  std::set<std::string> configs;
  for (const auto& t : study.trials)
    if (configs.insert(t.config_hash).second)
      trials.push_back({t.trial, *t.figure, store.final_metrics(t.run_id).at("train_seconds")});
  std::vector<std::string> front;
  std::optional<std::tuple<int64_t, double, double>> fastest;
  for (const auto& a : trials) {
    bool dominated = false;
    for (const auto& b : trials)
      dominated =
          dominated || (std::get<1>(b) >= std::get<1>(a) && std::get<2>(b) <= std::get<2>(a) &&
                        (std::get<1>(b) > std::get<1>(a) || std::get<2>(b) < std::get<2>(a)));
    if (dominated) continue;
    front.push_back(fmt::format("trial {} (", std::get<0>(a)));
    if (std::get<1>(a) >= 0.3 && (!fastest || std::get<2>(a) < std::get<2>(*fastest))) fastest = a;
  }
  const size_t said = run.output.find(
      "study pareto/default: the Pareto front of val_acc and "
      "train_seconds (" +
      std::to_string(front.size()) + " of 12): ");
  ASSERT_NE(said, std::string::npos) << run.output;
  const std::string line = run.output.substr(said, run.output.find('\n', said) - said);
  for (const std::string& point : front) EXPECT_NE(line.find(point), std::string::npos) << line;
  ASSERT_TRUE(fastest) << "no trial reached val_acc 30%: the test shows nothing";
  ASSERT_TRUE(study.outcome);
  EXPECT_EQ(study.outcome->best_trial, std::get<0>(*fastest));
  EXPECT_NE(run.output.find(fmt::format("confirming trial {}: the fastest that reaches val_acc ≥ "
                                        "30.00% (report.target)",
                                        std::get<0>(*fastest))),
            std::string::npos)
      << run.output;
  const std::string markdown = (dir.path() / "pareto.md").string();
  ASSERT_EQ(trainyard("report --db " + db() + " --experiment pareto -o " + markdown).exit_code, 0);
  EXPECT_NE(testing::read_file(markdown).find("- the Pareto front of val_acc and train_seconds ("),
            std::string::npos);
  const std::string html = (dir.path() / "pareto.html").string();
  ASSERT_EQ(trainyard("report --db " + db() + " --experiment pareto -o " + html).exit_code, 0);
  EXPECT_NE(testing::read_file(html).find("<svg class=\"chart front\""), std::string::npos);

  // Time to the target: the trial confirmed is the front's fastest to reach it.
  const Result to_target = trainyard("run " +
                                     two("to-target", "[val_acc, time_to_target]",
                                         "report: {target: {metric: val_acc, value: 0.3}}\n") +
                                     " --db " + db());
  ASSERT_EQ(to_target.exit_code, 0) << to_target.output;
  EXPECT_NE(to_target.output.find("study to-target/default: the Pareto front of val_acc and "
                                  "time_to_target ("),
            std::string::npos)
      << to_target.output;
  EXPECT_NE(to_target.output.find("study to-target/default: confirming trial "), std::string::npos)
      << to_target.output;

  // Refused: time to a target with no target; a schedule; three objectives.
  const Result no_target =
      trainyard("validate " + two("no-target", "[val_acc, time_to_target]", ""));
  EXPECT_EQ(no_target.exit_code, 2);
  EXPECT_NE(no_target.output.find("'sweep.search.metric' [..., time_to_target] needs "
                                  "report.target"),
            std::string::npos)
      << no_target.output;
  std::string scheduled_text = testing::read_file(file);
  scheduled_text.replace(scheduled_text.find("    confirm_repeats"), 0,
                         "    schedule: {name: asha}\n");
  const Result scheduled = trainyard("validate " + dir.write("scheduled.yaml", scheduled_text));
  EXPECT_EQ(scheduled.exit_code, 2);
  EXPECT_NE(scheduled.output.find("with two objectives and schedule asha: pausing trials by a "
                                  "Pareto front is not built"),
            std::string::npos)
      << scheduled.output;
  const Result three =
      trainyard("validate " + two("three", "[val_acc, train_seconds, val_loss]", ""));
  EXPECT_EQ(three.exit_code, 2);
  EXPECT_NE(three.output.find("two objectives are a validation figure and a time"),
            std::string::npos)
      << three.output;
}

}  // namespace
}  // namespace trainyard

namespace trainyard {
namespace {

// sweep.search.parallel: 2 trials train at once, each in a slot with an engine of its own and half
// the machine's CPUs; TPE proposes beside the pending trial as Optuna's constant liar does; and a
// study stopped by Ctrl-C and SIGKILLed while its slots train ends with the trials, decisions and
// best of an undisturbed one, whatever order its trials finished in.
TEST_F(StudyTest, TrialsSideBySideReplayWhateverOrderTheyFinishIn) {
  std::string text = study_file("side", "tpe", 12);
  const std::string variants =
      "  variants: [{name: fp32}, {name: small-batch, set: {train.batch_size: 8}}]\n";
  text.replace(text.find(variants), variants.size(), "");
  text.replace(text.find("    seed: 3\n"), 12, "    seed: 3\n    parallel: 2\n");
  text.replace(text.find("threads: 1, "), 11, "");  // the machine chooses: a share each
  const std::string report = "report: {baseline: fp32}\n";
  text.replace(text.find(report), report.size(), "");
  const std::string file = dir.write("side.yaml", text);
  const std::string undisturbed_db = (dir.path() / "undisturbed.db").string();
  const Result run = trainyard("run " + file + " --db " + undisturbed_db);
  ASSERT_EQ(run.exit_code, 0) << run.output;
  {
    Store store(undisturbed_db);
    const StudyRecord study = studies_of(store, "side").at("default");
    ASSERT_EQ(study.trials.size(), 12u);
    // Each slot's engine counts the runs it trained ("warm: its run N"): no engine trained more
    // than half of them and a few. A trial's run that trained once (not promoted) kept the
    // threads it was given: its share of the machine.
    int launches = 0, most = 0;
    for (const auto& t : study.trials) {
      const auto attributes = store.attributes(t.run_id);
      launches += t.epochs == 1 ? 1 : t.epochs == 3 ? 2 : 3;
      const std::string process = attributes.at("engine process");
      if (process.rfind("warm: its run ", 0) == 0)
        most = std::max(most, std::stoi(process.substr(14)));
      if (t.epochs == 1)
        EXPECT_NE(attributes.at("threads").find("shared by 2 trials side by side"),
                  std::string::npos)
            << attributes.at("threads");
    }
    EXPECT_LE(most, launches / 2 + 3) << "of " << launches << " launches: one engine did them";
  }
  // SIGKILL once 5 trials are recorded; then Ctrl-C (SIGINT) once 11 are, while TPE proposes
  // beside pending trials: the slots' runs stop and nothing is proposed from a trial cut short;
  // then the same command to the end.
  for (const auto& [recorded, signal] : {std::pair{5, SIGKILL}, std::pair{11, SIGINT}}) {
    const pid_t controller = testing::start_run(file, db(), {});
    testing::KillOnExit guard{controller};
    ASSERT_TRUE(wait_for(db(), [recorded = recorded](Store& store) {
      for (const StudyProgress& p : store.study_progress())
        if (p.trials >= recorded) return true;
      return false;
    }));
    ASSERT_EQ(kill(controller, signal), 0);
    const int code = testing::exit_code_of(controller);
    if (signal == SIGKILL) EXPECT_EQ(code, 128 + SIGKILL);
    guard.pid = -1;
  }
  const Result again = trainyard("run " + file + " --db " + db());
  ASSERT_EQ(again.exit_code, 0) << again.output;
  Store disturbed(db()), reference(undisturbed_db);
  const StudyRecord a = studies_of(disturbed, "side").at("default");
  const StudyRecord b = studies_of(reference, "side").at("default");
  ASSERT_EQ(a.trials.size(), b.trials.size());
  for (size_t i = 0; i < a.trials.size(); ++i) {
    EXPECT_EQ(a.trials[i].values, b.trials[i].values) << "trial " << i;
    EXPECT_EQ(a.trials[i].epochs, b.trials[i].epochs) << "trial " << i;
    EXPECT_EQ(a.trials[i].figure, b.trials[i].figure) << "trial " << i;
  }
  ASSERT_EQ(a.decisions.size(), b.decisions.size());
  for (size_t k = 0; k < a.decisions.size(); ++k) {
    EXPECT_EQ(a.decisions[k].evidence, b.decisions[k].evidence) << "decision " << k;
    EXPECT_EQ(a.decisions[k].promoted, b.decisions[k].promoted) << "decision " << k;
  }
  ASSERT_TRUE(a.outcome);
  EXPECT_EQ(a.outcome->best_trial, b.outcome->best_trial);
  EXPECT_EQ(a.outcome->values, b.outcome->values);

  // What slots cannot do yet is refused by name: order-dependent schedules, a time objective,
  // several ranks a trial.
  auto refused_by_name = [&](const std::string& name, const std::string& edited,
                             const std::string& reason) {
    const Result refused = trainyard("validate " + dir.write(name + ".yaml", edited));
    EXPECT_EQ(refused.exit_code, 2) << name;
    EXPECT_NE(refused.output.find(reason), std::string::npos) << refused.output;
  };
  std::string timed = text;
  timed.replace(timed.find("metric: val_loss"), 16, "metric: [val_acc, train_seconds]");
  timed.replace(timed.find("name: successive-halving"), 24, "name: none");
  refused_by_name("timed-side", timed,
                  "'sweep.search.parallel' 2 with the objective train_seconds: a trial's time "
                  "side by side");
  std::string asha = text;
  asha.replace(asha.find("name: successive-halving"), 24, "name: asha");
  refused_by_name("asha-side", asha, "'sweep.search.parallel' 2 with schedule asha: not built");
  std::string ranks = text;
  ranks.replace(ranks.find("accelerator: cpu,"), 17, "accelerator: cpu, devices: 2,");
  refused_by_name("ranks-side", ranks,
                  "'sweep.search.parallel' 2 with runtime.devices 2 (variant ");
  // On GPUs, a slot each: valid, and on this machine, which has none, its trials are skipped.
  std::string gpus = text;
  gpus.replace(gpus.find("accelerator: cpu"), 16, "accelerator: cuda");
  const std::string gpu_file = dir.write("gpu-side.yaml", gpus);
  const Result on_gpus = trainyard("validate " + gpu_file);
  EXPECT_EQ(on_gpus.exit_code, 0) << on_gpus.output;
  const Result skipped = trainyard("run " + gpu_file + " --db " + db() + "-gpu");
  EXPECT_NE(skipped.output.find("skipped: needs a CUDA device"), std::string::npos)
      << skipped.output;
}

}  // namespace
}  // namespace trainyard
