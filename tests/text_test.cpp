#include <gtest/gtest.h>

#include <cmath>

#include "common/metrics.h"
#include "common/text.h"

namespace trainyard {
namespace {

TEST(TextTest, ClosestMatchAllowsTyposButNotStrangers) {
  EXPECT_EQ(closest_match("epcohs", {"epochs", "seed", "batch_size"}), "epochs");
  EXPECT_EQ(closest_match("lr", {"seed", "epochs"}), "");
  EXPECT_EQ(closest_match("x", {}), "");
}

TEST(TextTest, Formatting) {
  EXPECT_EQ(format_duration(4.25), "4.2s");
  EXPECT_EQ(format_duration(0.042), "42 ms");
  EXPECT_EQ(plural(1, "epoch"), "1 epoch");
  EXPECT_EQ(plural(3, "epoch"), "3 epochs");
  EXPECT_EQ(plural(2, "batch", "batches"), "2 batches");
  EXPECT_EQ(format_duration(125), "2m 05s");
  EXPECT_EQ(format_duration(3 * 3600 + 60 * 7), "3h 07m");
  EXPECT_EQ(format_rate(2890.4, 0), "2890 samples/s");
  EXPECT_EQ(format_rate(180.5, 1024), "184832 tokens/s");  // a language model's context
  EXPECT_EQ(format_bytes(512), "512 B");
  EXPECT_EQ(format_bytes(1.5 * 1024 * 1024 * 1024), "1.5 GiB");
  EXPECT_EQ(stable_hash("abc"), stable_hash("abc"));
  EXPECT_NE(stable_hash("abc"), stable_hash("abd"));
  EXPECT_EQ(stable_hash(""), "cbf29ce484222325");  // FNV-1a 64 offset basis
}

// --device-memory's sizes: 1024-powers for K/M/G/T and KiB..., 1000-powers for KB...; nothing else.
TEST(TextTest, SizesParseWithTheirUnits) {
  EXPECT_EQ(parse_bytes("80GiB"), 80.0 * (1 << 30));
  EXPECT_EQ(parse_bytes(" 24 GB "), 24e9);
  EXPECT_EQ(parse_bytes("512M"), 512.0 * (1 << 20));
  EXPECT_EQ(parse_bytes("1.5TiB"), 1.5 * 1099511627776.0);
  EXPECT_EQ(parse_bytes("1000000"), 1e6);
  for (const char* bad : {"", "lots", "0x10G", "inf", "1e9", "-1G", "0", "0.5", "12 parsecs"})
    EXPECT_EQ(parse_bytes(bad), std::nullopt) << bad;
}

// Lines at most `width` code points, broken at spaces.
TEST(TextTest, WrapBreaksAtSpacesCountingCodePoints) {
  EXPECT_EQ(wrap("a bb ccc dddd", 6), (std::vector<std::string>{"a bb", "ccc", "dddd"}));
  EXPECT_EQ(wrap("2.00× faster ±", 12), (std::vector<std::string>{"2.00× faster", "±"}));
  EXPECT_EQ(wrap("averyveryverylongword x", 5),
            (std::vector<std::string>{"averyveryverylongword", "x"}));
  EXPECT_EQ(wrap("one line", 0), (std::vector<std::string>{"one line"}));
}

TEST(MetricsTest, VocabularyIsUniqueAndFormatted) {
  std::set<std::string> keys;
  for (const auto& m : metric_vocabulary()) EXPECT_TRUE(keys.insert(m.key).second) << m.key;
  EXPECT_EQ(format_metric(*find_metric(metric::kTestAcc), 0.954), "95.4%");
  EXPECT_EQ(format_metric(*find_metric(metric::kSpeedup), 2.918), "2.92x");
  EXPECT_EQ(format_metric(*find_metric(metric::kTrainSeconds), 18.7 * 60), "18m 42s");
  EXPECT_EQ(find_metric("nope"), nullptr);
}

// A test accuracy no better than guessing is flagged; one two binomial deviations above it is not.
TEST(ChanceVerdict, AccuracyAtChanceIsFlagged) {
  EXPECT_EQ(chance_verdict(0.25, 4, 256),
            "did not learn: test accuracy 25.0% is at chance (25.0% for 4 classes)");
  EXPECT_NE(chance_verdict(0.10, 10, 10000), "");
  // 4 classes over 256 samples: sigma = sqrt(.25 * .75 / 256) = 2.7%; chance + 2 sigma = 30.4%.
  EXPECT_NE(chance_verdict(0.30, 4, 256), "");
  EXPECT_EQ(chance_verdict(0.31, 4, 256), "");
  EXPECT_EQ(chance_verdict(0.90, 10, 100), "");
  EXPECT_EQ(chance_verdict(0.5, 1, 100), "");  // one class: nothing to guess
  EXPECT_EQ(chance_verdict(std::nan(""), 4, 100), "");
}

// A training loss that fell less than 2% from its mean up to the first progress line is flagged,
// whatever the accuracy; one that fell more is not, nor one first logged in training's second
// half.
TEST(LossVerdict, ALossThatBarelyMovedIsFlagged) {
  EXPECT_EQ(loss_verdict(2.0, 8, 1.99, 96),
            "did not learn: the training loss fell only 0.5% (2 over the first 8 steps, 1.99 over "
            "the last epoch)");
  EXPECT_EQ(
      loss_verdict(0.5, 10, 0.52, 100),
      "did not learn: the training loss rose 4.0% (0.5 over the first 10 steps, 0.52 over the "
      "last epoch)");
  EXPECT_NE(loss_verdict(1.0, 50, 0.981, 100), "");       // logged at half the training: still said
  EXPECT_EQ(loss_verdict(1.0, 51, 0.99, 100), "");        // later: the loss has had its chance
  EXPECT_EQ(loss_verdict(1.0, 8, 0.98, 96), "");          // 2% lower: it learned
  EXPECT_EQ(loss_verdict(std::nan(""), 8, 1.0, 96), "");  // nothing logged
  EXPECT_EQ(loss_verdict(1.0, 8, std::nan(""), 96), "");  // a diverged run says so elsewhere
}

}  // namespace
}  // namespace trainyard
