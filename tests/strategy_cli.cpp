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
model: {name: distilbert, layers: 2, dim: 32, heads: 2, hidden_dim: 64, max_positions: 64, dropout: 0, attention_dropout: 0, classifier_dropout: 0}
dataset: {name: synthetic-text, train_size: 96, val_size: 32, test_size: 32, max_length: 32}
train: {epochs: 1, batch_size: 4, grad_accum: 2, clip_grad_norm: 0.5, optimizer: {name: adamw, lr: 3.0e-3}, log_every: 1000, save_weights: true}
runtime: {accelerator: cpu, threads: 1, devices: 2}
sweep:
  variants:
    - {name: single-8, set: {train.batch_size: 8, runtime.devices: 1}}
)";
  for (const char* precision : {"bf16-mixed", "16-mixed", "bf16-true"})
    yaml += fmt::format(
        "    - {{name: {0}-{1}, set: {{runtime.strategy: {0}, runtime.precision: {1}}}}}\n",
        strategy, precision);
  for (const auto& variant : extra_variants) yaml += "    - " + variant + "\n";
  std::map<std::string, double> losses;
  Result run = trainyard("run " + dir.write("compose.yaml", yaml) + " --db " + db);
  EXPECT_EQ(run.exit_code, 0) << run.output;
  Store store(db);
  auto runs = store.runs("compose");
  EXPECT_EQ(runs.size(), 4 + extra_variants.size());
  if (runs.empty()) return losses;
  EXPECT_EQ(store.attributes(runs[1].id).at("reduce_dtype"), "Float");  // fp32 averages by default
  const double single_loss = store.final_metrics(runs[0].id).at("test_loss");
  for (const auto& r : runs) {
    SCOPED_TRACE(r.variant);
    EXPECT_EQ(r.status, RunStatus::completed);
    auto m = store.final_metrics(r.id);
    EXPECT_TRUE(std::isfinite(m.at("test_loss")));
    EXPECT_NEAR(m.at("test_loss"), single_loss, 0.1);
    EXPECT_TRUE(fs::exists(fs::path(r.environment.log_path).replace_extension(".safetensors")));
    losses[r.variant] = m.at("test_loss");
  }
  return losses;
}

}  // namespace trainyard::testing
