// OptionSet: one declaration drives decoding, defaults, checks and the listing.
#include <gtest/gtest.h>

#include "trainyard/options.h"

namespace trainyard {
namespace {

struct Opts {
  int64_t depth = 12;
  double dropout = 0.1;
  bool flag = false;
  std::string mode = "fast";
  std::vector<std::string> tags = {"a"};
};

OptionSet<Opts> option_set() {
  OptionSet<Opts> s;
  s.add("depth", &Opts::depth, "blocks", at_least(1))
      .add("dropout", &Opts::dropout, "probability", between(0, 1))
      .add("flag", &Opts::flag, "a switch")
      .add("mode", &Opts::mode, "speed", one_of({"fast", "slow"}))
      .add("tags", &Opts::tags, "labels")
      .check([](const Opts& o) -> std::optional<std::string> {
        if (o.mode == "slow" && o.depth > 100) return "slow mode allows at most 100 blocks";
        return std::nullopt;
      });
  return s;
}

ConfigTree tree_of(const std::string& yaml) {
  ConfigTree tree;
  flatten_into(tree, YAML::Load(yaml), "t.yaml");
  return tree;
}

TEST(OptionSetTest, DefaultsComeFromTheStruct) {
  Diagnostics d;
  Opts o = option_set().decode(ConfigTree(), "x", "thing", {}, d);
  EXPECT_TRUE(d.empty());
  EXPECT_EQ(o.depth, 12);
  EXPECT_EQ(o.mode, "fast");
  auto info = option_set().describe();
  ASSERT_EQ(info.size(), 5u);
  EXPECT_EQ(info[0].default_value, "12");
  EXPECT_EQ(info[0].rule, "≥ 1");
  EXPECT_EQ(info[1].rule, "0 to 1");
  EXPECT_EQ(info[3].rule, "one of: fast, slow");
  EXPECT_EQ(info[4].type, "list");
}

TEST(OptionSetTest, DecodesEveryType) {
  Diagnostics d;
  Opts o =
      option_set().decode(tree_of("{depth: 3, dropout: 0.5, flag: true, mode: slow, tags: [x, y]}"),
                          "x", "thing", {}, d);
  EXPECT_TRUE(d.empty()) << d.format();
  EXPECT_EQ(o.depth, 3);
  EXPECT_DOUBLE_EQ(o.dropout, 0.5);
  EXPECT_TRUE(o.flag);
  EXPECT_EQ(o.mode, "slow");
  EXPECT_EQ(o.tags, (std::vector<std::string>{"x", "y"}));
}

TEST(OptionSetTest, IntegerIsAValidFloat) {
  Diagnostics d;
  Opts o = option_set().decode(tree_of("{dropout: 1}"), "x", "thing", {}, d);
  EXPECT_TRUE(d.empty());
  EXPECT_DOUBLE_EQ(o.dropout, 1.0);
}

TEST(OptionSetTest, BadValuesAreReportedWithTheirOrigin) {
  Diagnostics d;
  option_set().decode(tree_of("depth: 0\ndropout: 2\nflag: maybe\nmode: fats\ntags: 3\n"), "x",
                      "thing", {}, d);
  ASSERT_EQ(d.size(), 5u) << d.format();
  EXPECT_EQ(d.items()[0].message, "'x.depth' must be ≥ 1, got 0");
  EXPECT_EQ(d.items()[0].origin.line, 1);
  EXPECT_EQ(d.items()[1].message, "'x.dropout' must be 0 to 1, got 2");
  EXPECT_EQ(d.items()[2].message, "'x.flag' must be true or false, got 'maybe'");
  EXPECT_EQ(
      d.items()[3].message,
      "'x.mode' has unknown value 'fats' (did you mean 'fast'?); expected one of: fast, slow");
  EXPECT_EQ(d.items()[4].message, "'x.tags' must be a list of strings, got '3'");
}

TEST(OptionSetTest, CrossOptionChecksRunAfterCleanDecoding) {
  Diagnostics d;
  option_set().decode(tree_of("{depth: 101, mode: slow}"), "x", "thing", {"t.yaml", 1, 1}, d);
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(d.items()[0].message, "thing: slow mode allows at most 100 blocks");
}

TEST(OptionSetTest, EmptyValueIsAnError) {
  Diagnostics d;
  option_set().decode(tree_of("depth:\n"), "x", "thing", {}, d);
  ASSERT_EQ(d.size(), 1u);
  EXPECT_NE(d.items()[0].message.find("'x.depth' has no value"), std::string::npos);
}

TEST(OptionSetTest, EncodeRoundTrips) {
  Diagnostics d;
  Opts o = option_set().decode(tree_of("{depth: 3, dropout: 0.25}"), "x", "thing", {}, d);
  ConfigTree encoded = option_set().encode(o, "", {});
  Opts again = option_set().decode(encoded, "x", "thing", {}, d);
  EXPECT_TRUE(d.empty());
  EXPECT_EQ(again.depth, 3);
  EXPECT_DOUBLE_EQ(again.dropout, 0.25);
  EXPECT_EQ(encoded.find("dropout")->node.Scalar(), "0.25");
  EXPECT_EQ(option_set().encode(Opts{}, "", {}).find("dropout")->node.Scalar(), "0.1");
}

TEST(ConfigTreeTest, SettingAKeyReplacesLeavesAboveAndBelow) {
  ConfigTree tree = tree_of("{model: {name: vit, depth: 2}, train: {epochs: 1}}");
  tree.set("model", {YAML::Node("resnet"), {}, {}});
  EXPECT_EQ(tree.find("model.depth"), nullptr);
  tree.set("model.depth", {YAML::Node(3), {}, {}});
  EXPECT_EQ(tree.find("model"), nullptr);
  EXPECT_EQ(tree.find("train.epochs")->node.Scalar(), "1");
}

TEST(ConfigTreeTest, ReorderingEntriesNeverRewritesValues) {
  // Regression: yaml-cpp's Node assignment writes through the handle; erasing from the middle of
  // the entry vector once turned 'seed: 123' into 'seed: adam'.
  ConfigTree tree = tree_of("{a: 1, b: 2, c: 3, d: 4}");
  tree.erase("a");
  tree.set("b", {YAML::Node("two"), {}, {}});
  EXPECT_EQ(tree.find("c")->node.Scalar(), "3");
  EXPECT_EQ(tree.find("d")->node.Scalar(), "4");
  EXPECT_EQ(tree.find("b")->node.Scalar(), "two");
}

TEST(ConfigTreeTest, DottedKeysEqualNestedOnes) {
  ConfigTree a = tree_of("{train.epochs: 3}");
  ConfigTree b = tree_of("{train: {epochs: 3}}");
  EXPECT_EQ(a.to_yaml_text(), b.to_yaml_text());
  EXPECT_EQ(a.to_yaml_text(), "train:\n  epochs: 3\n");
}

}  // namespace
}  // namespace trainyard
