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

}  // namespace
}  // namespace trainyard
