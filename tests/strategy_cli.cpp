#include "tests/strategy_cli.h"

#include <cmath>
#include <filesystem>

#include <fmt/format.h>

#include "db/store.h"

namespace trainyard::testing {

namespace fs = std::filesystem;

void expect_ranks_match_one_process(const TempDir& dir, const std::string& db,
                                    const std::string& strategy, Sharding sharding,
                                    const std::vector<std::string>& extra_variants) {
  std::string yaml = R"(
name: strategies
model: {name: vit, image_size: 16, patch_size: 4, depth: 2, width: 32, heads: 2, mlp_dim: 64, num_classes: 4}
dataset: {name: synthetic-images, train_size: 256, val_size: 64, test_size: 64, num_classes: 4, noise: 0.3}
train: {epochs: 2, batch_size: 16, optimizer: {name: adam, lr: 3.0e-3}, log_every: 1000}
runtime: {accelerator: cpu, threads: 1}
sweep:
  variants:
    - name: single
)";
  for (int ranks : {2, 4})
    yaml += fmt::format(
        "    - {{name: {0}-{1}, set: {{runtime.strategy: {0}, runtime.devices: {1}, "
        "train.batch_size: {2}}}}}\n",
        strategy, ranks, 16 / ranks);
  for (const auto& variant : extra_variants) yaml += "    - " + variant + "\n";
  Result run = trainyard("run " + dir.write("strategies.yaml", yaml) + " --db " + db);
  ASSERT_EQ(run.exit_code, 0) << run.output;
  Store store(db);
  auto runs = store.runs("strategies");
  ASSERT_EQ(runs.size(), 3 + extra_variants.size());
  auto single = store.final_metrics(runs[0].id);
  auto single_epochs = store.epoch_metrics(runs[0].id);
  for (size_t i = 1; i < runs.size(); ++i) {
    SCOPED_TRACE(runs[i].variant);
    auto m = store.final_metrics(runs[i].id);
    EXPECT_EQ(m.at("steps"), single.at("steps"));
    EXPECT_NEAR(m.at("test_loss"), single.at("test_loss"), 1e-4);
    EXPECT_NEAR(store.epoch_metrics(runs[i].id)[1].values.at("train_loss"),
                single_epochs[1].values.at("train_loss"), 1e-4);
  }
  // Per-rank training state, from the engine's accounting: a share of 1/N within 2% where sharded —
  // shards are padded to a multiple of N, and Adam keeps one step count per tensor it updates (one
  // per parameter when whole, one per shard when sharded).
  for (const char* key :
       {"param_bytes_per_rank", "grad_bytes_per_rank", "optimizer_state_bytes_per_rank"}) {
    SCOPED_TRACE(key);
    const bool sharded = std::string(key) == "param_bytes_per_rank"
                             ? sharding.parameters
                             : sharding.gradients_and_optimizer_state;
    for (int ranks : {2, 4}) {
      const double whole = single.at(key);
      const double held =
          store.final_metrics(runs[ranks / 2].id).at(key);  // runs 1 and 2: 2 and 4 ranks
      if (sharded)
        EXPECT_NEAR(held, whole / ranks, 0.02 * whole / ranks);
      else
        EXPECT_EQ(held, whole);
    }
  }
  EXPECT_TRUE(
      fs::exists(runs[1].environment.log_path.substr(0, runs[1].environment.log_path.size() - 4) +
                 "-rank1.log"));
}

std::map<std::string, double> expect_composes_with_precisions(
    const TempDir& dir, const std::string& db, const std::string& strategy,
    const std::vector<std::string>& extra_variants) {
  std::string yaml = R"(
name: compose
model: {name: distilbert, vocab_size: 1000, layers: 2, dim: 32, heads: 2, hidden_dim: 64, max_positions: 64, dropout: 0, attention_dropout: 0, classifier_dropout: 0}
dataset: {name: synthetic-text, train_size: 256, val_size: 32, test_size: 64, max_length: 32}
train: {epochs: 2, batch_size: 4, grad_accum: 2, clip_grad_norm: 0.5, optimizer: {name: adamw, lr: 3.0e-3}, log_every: 1000, save_weights: true}
runtime: {accelerator: cpu, threads: 1, devices: 2}
sweep:
  variants:
    - {name: single-8, set: {train.batch_size: 8, runtime.devices: 1}}
    - {name: untrained, set: {train.optimizer.lr: 1.0e-30, train.batch_size: 8, runtime.devices: 1}}
)";
  yaml += fmt::format("    - {{name: {0}, set: {{runtime.strategy: {0}}}}}\n", strategy);
  const std::map<std::string, std::string> compute = {
      {"bf16-mixed", "BFloat16"}, {"16-mixed", "Half"}, {"bf16-true", "BFloat16"}};
  for (const auto& [precision, dtype] : compute)
    yaml += fmt::format(
        "    - {{name: {0}-{1}, set: {{runtime.strategy: {0}, runtime.precision: {1}}}}}\n",
        strategy, precision);
  for (const auto& variant : extra_variants) yaml += "    - " + variant + "\n";
  std::map<std::string, double> losses;
  Result run = trainyard("run " + dir.write("compose.yaml", yaml) + " --db " + db);
  EXPECT_EQ(run.exit_code, 0) << run.output;
  Store store(db);
  std::map<std::string, RunRecord> runs;
  for (const RunRecord& r : store.runs("compose")) runs.emplace(r.variant, r);
  EXPECT_EQ(runs.size(), 6 + extra_variants.size());
  for (const char* needed : {"single-8", "untrained"})
    if (!runs.count(needed) || !runs.count(strategy)) {
      ADD_FAILURE() << "no run " << needed << " or " << strategy << ":\n" << run.output;
      return losses;
    }
  for (const auto& [variant, r] : runs) {
    SCOPED_TRACE(variant);
    EXPECT_EQ(r.status, RunStatus::completed);
    const auto m = store.final_metrics(r.id);
    EXPECT_TRUE(std::isfinite(m.at("test_loss")));
    EXPECT_TRUE(fs::exists(fs::path(r.environment.log_path).replace_extension(".safetensors")));
    losses[variant] = m.at("test_loss");
  }
  // In fp32, with accumulation and clipping (zero2 and fsdp clip by the norm over every rank's
  // shard), 2 ranks train as one process with the same global batch.
  const auto single = store.final_metrics(runs.at("single-8").id);
  const auto ranks = store.final_metrics(runs.at(strategy).id);
  EXPECT_EQ(ranks.at("steps"), single.at("steps"));
  EXPECT_NEAR(ranks.at("test_loss"), single.at("test_loss"), 1e-4);
  EXPECT_NEAR(store.epoch_metrics(runs.at(strategy).id).at(0).values.at("train_loss"),
              store.epoch_metrics(runs.at("single-8").id).at(0).values.at("train_loss"), 1e-4);
  EXPECT_EQ(store.attributes(runs.at(strategy).id).at("reduce_dtype"), "Float");
  // Every run learned: its test loss is under half the untrained model's (about ln 2).
  const double untrained = losses.at("untrained");
  for (const auto& [variant, loss] : losses) {
    if (variant != "untrained") {
      EXPECT_LT(loss, 0.5 * untrained) << variant;
    }
  }
  // Each precision computed in its own dtype (observed in a training step), and its figures are
  // its own: close to fp32's, not equal.
  for (const auto& [precision, dtype] : compute) {
    const std::string variant = strategy + "-" + precision;
    SCOPED_TRACE(variant);
    if (!runs.count(variant)) continue;
    EXPECT_EQ(store.attributes(runs.at(variant).id).at("forward_dtype"), dtype);
    EXPECT_NE(losses.at(variant), losses.at(strategy));
    EXPECT_NEAR(losses.at(variant), losses.at(strategy), 0.05);
  }
  EXPECT_EQ(store.attributes(runs.at(strategy).id).at("forward_dtype"), "Float");
  return losses;
}

}  // namespace trainyard::testing
