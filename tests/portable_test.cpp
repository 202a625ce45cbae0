// The same experiment file on another machine is the same experiment: a run is identified by the
// contents of its data, not by where they lie (common/fingerprint.h).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "db/store.h"
#include "tests/cli_support.h"

namespace trainyard {
namespace {

namespace fs = std::filesystem;
using testing::Result;
using testing::trainyard;

class PortableTest : public testing::CliTest {
 protected:
  // A CIFAR-10 binary folder of 20 images a file (label, then 3072 bytes of pixels).
  fs::path write_cifar(const std::string& name) {
    const fs::path root = dir.path() / name;
    fs::create_directories(root);
    for (const auto& file : testing::kCifar10Files) {
      std::ofstream out(root / file, std::ios::binary);
      for (int image = 0; image < 20; ++image)
        out << static_cast<char>(image % 10) << std::string(3072, static_cast<char>(image * 7));
    }
    return root;
  }

  std::string experiment() {
    return dir.write("shapes.yaml", R"(name: shapes
model: {name: vit, image_size: 8, patch_size: 4, depth: 1, width: 16, heads: 2, mlp_dim: 32, num_classes: 10}
dataset: {name: cifar10, root: /nowhere, val_size: 20, image_size: 8}
train: {epochs: 1, batch_size: 20, log_every: 1000}
runtime: {accelerator: cpu, threads: 1}
sweep: {variants: [{name: fp32}, {name: small-lr, set: {train.optimizer.lr: 1.0e-5}}]}
)");
  }
};

// The issue's trial: the data moved to another folder; the file run again there finds both runs
// completed, and the report's table holds them; other data at the same place is another config.
TEST_F(PortableTest, DataMovedElsewhereIsTheSameExperiment) {
  const fs::path first = write_cifar("cifar-here");
  const std::string file = experiment();
  Result ran = trainyard("run " + file + " --db " + db() + " --set dataset.root=" + first.string());
  ASSERT_EQ(ran.exit_code, 0) << ran.output;

  const fs::path moved = dir.path() / "elsewhere" / "cifar";
  fs::create_directories(moved.parent_path());
  fs::rename(first, moved);
  const std::string at_moved = " --set dataset.root=" + moved.string();
  Result again = trainyard("run " + file + " --db " + db() + at_moved);
  EXPECT_EQ(again.exit_code, 0) << again.output;
  EXPECT_NE(again.output.find("2 already completed"), std::string::npos) << again.output;
  EXPECT_NE(again.output.find("next: trainyard report --db " + db() +
                              " --set 'dataset.root=" + moved.string() + "'"),
            std::string::npos)
      << again.output;

  Result report =
      trainyard("report --db " + db() + at_moved + " -o " + (dir.path() / "report.md").string());
  ASSERT_EQ(report.exit_code, 0) << report.output;
  const std::string markdown = testing::read_file(dir.path() / "report.md");
  EXPECT_NE(markdown.find("2 of 2 variants completed"), std::string::npos) << markdown;
  EXPECT_EQ(markdown.find("not run"), std::string::npos) << markdown;
  EXPECT_EQ(markdown.find("Runs of other configurations"), std::string::npos) << markdown;

  // The path is still recorded; the fingerprint is recorded beside it.
  {
    Store store(db());
    const auto runs = store.runs("shapes");
    ASSERT_EQ(runs.size(), 2u);
    EXPECT_NE(runs[0].config_yaml.find("root: " + first.string()), std::string::npos);
    EXPECT_NE(runs[0].config_yaml.find("key: dataset.root"), std::string::npos)
        << runs[0].config_yaml;
  }

  // Other bytes at the same place: another configuration, which trains.
  {
    std::fstream test(moved / "test_batch.bin", std::ios::in | std::ios::out | std::ios::binary);
    test.seekp(100);
    test.put('\x01');
  }
  Result other = trainyard("run " + file + " --db " + db() + at_moved + " --dry-run");
  EXPECT_EQ(other.exit_code, 0) << other.output;
  EXPECT_EQ(other.output.find("already completed"), std::string::npos) << other.output;
}

// A smoke test is one flag: --only and --repeats run part of the file, and what they ran counts as
// the file's: the report shows a subset at fewer repeats, not another experiment, and the full
// batch later trains only the rest.
TEST_F(PortableTest, OnlyAndRepeatsRunPartOfTheFilesExperiment) {
  const std::string file = dir.write("smoke.yaml", R"(name: smoke
model: {name: vit, image_size: 8, patch_size: 4, depth: 1, width: 16, heads: 2, mlp_dim: 32, num_classes: 4}
dataset: {name: synthetic-images, image_size: 8, num_classes: 4, train_size: 32, val_size: 16, test_size: 16}
train: {epochs: 1, batch_size: 16, log_every: 1000}
runtime: {accelerator: cpu, threads: 1}
sweep: {repeats: 2, variants: [{name: fp32}, {name: bf16-true, set: {runtime.precision: bf16-true}}]}
)");
  Result nothing = trainyard("run " + file + " --db " + db() + " --only 'fp16*'");
  EXPECT_EQ(nothing.exit_code, 2) << nothing.output;
  EXPECT_NE(nothing.output.find("--only 'fp16*' matches no variant; the batch's variants: fp32, "
                                "bf16-true"),
            std::string::npos)
      << nothing.output;
  EXPECT_FALSE(fs::exists(db()));

  Result smoke = trainyard("run " + file + " --db " + db() + " --only 'fp*' --repeats 1");
  ASSERT_EQ(smoke.exit_code, 0) << smoke.output;
  EXPECT_NE(smoke.output.find("smoke: 1 completed"), std::string::npos) << smoke.output;
  {
    Store store(db());
    const auto runs = store.runs("smoke");
    ASSERT_EQ(runs.size(), 1u);
    EXPECT_EQ(runs[0].variant, "fp32");
    EXPECT_EQ(store.attributes(runs[0].id).at("selected by"), "--only fp* --repeats 1");
  }
  Result report = trainyard("report --db " + db() + " -o " + (dir.path() / "smoke.md").string());
  ASSERT_EQ(report.exit_code, 0) << report.output;
  const std::string markdown = testing::read_file(dir.path() / "smoke.md");
  EXPECT_NE(markdown.find("1 of 2 completed"), std::string::npos) << markdown;
  EXPECT_EQ(markdown.find("Runs of other configurations"), std::string::npos) << markdown;

  Result rest = trainyard("run " + file + " --db " + db());
  ASSERT_EQ(rest.exit_code, 0) << rest.output;
  EXPECT_NE(rest.output.find("smoke: 3 completed, 1 already completed"), std::string::npos)
      << rest.output;
}

}  // namespace
}  // namespace trainyard
