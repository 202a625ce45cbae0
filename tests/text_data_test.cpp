// The IMDB reader on a small aclImdb folder in the real layout: the studies' order and split,
// tokenisation, the token cache, padding modes, and broken folders.
#include <gtest/gtest.h>

#include <fstream>
#include <functional>

#include "components/builtin.h"
#include "components/data/text_batch.h"
#include "components/text/wordpiece.h"
#include "components/weights/safetensors.h"
#include "tests/test_support.h"
#include "trainyard/dataset.h"

namespace trainyard {
namespace {

std::string fixture(const std::string& name) {
  return std::string(TRAINYARD_SOURCE_DIR) + "/tests/fixtures/" + name;
}

TEST(NumpyPermutationTest, MatchesNumpysRandomState) {
  // numpy.random.RandomState(1).permutation(10) and (50000)[:8]
  EXPECT_EQ(numpy_permutation(1, 10), (std::vector<int64_t>{2, 9, 6, 4, 0, 3, 1, 7, 8, 5}));
  std::vector<int64_t> big = numpy_permutation(1, 50000);
  EXPECT_EQ(std::vector<int64_t>(big.begin(), big.begin() + 8),
            (std::vector<int64_t>{26247, 35067, 34590, 16668, 12196, 2600, 9047, 2206}));
  EXPECT_EQ(std::vector<int64_t>(big.end() - 3, big.end()),
            (std::vector<int64_t>{5192, 12172, 33003}));
}

class ImdbTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // 4 reviews per folder; file names sort as strings ("10_1" before "2_3"), as Python's sorted().
    const char* names[] = {"0_9.txt", "10_1.txt", "2_3.txt", "7_10.txt"};
    for (const char* split : {"test", "train"})
      for (const char* label : {"pos", "neg"})
        for (int i = 0; i < 4; ++i)
          dir.write(std::string("aclImdb/") + split + "/" + label + "/" + names[i],
                    std::string("the movie ") + split + " " + label + " " + std::to_string(i) +
                        (i == 3 ? " was great" : ""));
    dir.write("aclImdb/train/neg/0_9.txt", "");                    // an empty review
    dir.write("aclImdb/train/pos/2_3.txt", "bad \xff\xfe bytes");  // not UTF-8
    dir.write("aclImdb/train/unsup/0_0.txt", "ignored");           // not a labelled folder
  }
  DataSplits load(const std::string& extra = "") {
    ComponentChoice choice{.name = "imdb"};
    std::string yaml = "{root: '" + (dir.path() / "aclImdb").string() + "', vocab: '" +
                       fixture("vocab.txt") + "', max_length: 12, train_size: 8, val_size: 4" +
                       extra + "}";
    flatten_into(choice.options, YAML::Load(yaml), "t");
    DataContext context;
    context.log = [this](const std::string& line) { log.push_back(line); };
    return build_dataset(builtin_registry(), choice, context);
  }
  std::string error_of(const std::string& extra = "") {
    try {
      load(extra);
    } catch (const UserError& e) {
      return e.what();
    }
    return "no error";
  }
  testing::TempDir dir;
  std::vector<std::string> log;
};

TEST_F(ImdbTest, StudiesOrderPermutationAndSplit) {
  DataSplits splits = load();
  EXPECT_EQ(splits.train->size(), 8);
  EXPECT_EQ(splits.validation->size(), 4);
  EXPECT_EQ(splits.test->size(), 4);
  EXPECT_EQ(splits.num_classes, 2);
  // Reading order: test/pos 0..3, test/neg 4..7, train/pos 8..11, train/neg 12..15; files by name:
  // 0_9, 10_1, 2_3, 7_10 -> i = 0, 1, 2, 3. The first training example is review perm[0].
  std::vector<int64_t> perm = numpy_permutation(1, 16);
  WordPieceTokenizer tokenizer = WordPieceTokenizer::from_vocab_file(fixture("vocab.txt"));
  auto text_of = [](int64_t r) {
    const char* split = r < 8 ? "test" : "train";
    const char* label = (r % 8) < 4 ? "pos" : "neg";
    int i = static_cast<int>(r % 4);
    if (r == 12) return std::string("");
    if (r == 10) return std::string("bad \xff\xfe bytes");
    return std::string("the movie ") + split + " " + label + " " + std::to_string(i) +
           (i == 3 ? " was great" : "");
  };
  for (int64_t k = 0; k < 8; ++k) {
    Batch batch = splits.train->get_batch({k});
    int64_t review = perm[static_cast<size_t>(k)];
    EXPECT_EQ(batch.targets[0].item<int64_t>(), (review % 8) < 4 ? 1 : 0) << review;
    Encoding expected = tokenizer.encode(text_of(review), 12, /*pad=*/true);
    std::vector<int64_t> ids(batch.inputs.data_ptr<int64_t>(),
                             batch.inputs.data_ptr<int64_t>() + 12);
    EXPECT_EQ(ids, expected.input_ids) << "review " << review;
  }
}

TEST_F(ImdbTest, TokenCacheIsUsedTheSecondTime) {
  load();
  ASSERT_GE(log.size(), 2u);
  // The frame and padding the tokenizer gives each text, said first (from the cache too).
  EXPECT_NE(log[0].find("each text framed as [CLS] … [SEP], padded with [PAD] (id 0)"),
            std::string::npos)
      << log[0];
  EXPECT_NE(log[1].find("tokenising 16 reviews"), std::string::npos);
  log.clear();
  DataSplits again = load();
  EXPECT_NE(log[0].find("each text framed as [CLS] … [SEP]"), std::string::npos);
  EXPECT_NE(log[1].find("from the token cache"), std::string::npos);
  // A damaged cache is ignored and rebuilt.
  for (const auto& entry :
       std::filesystem::directory_iterator(dir.path() / "aclImdb" / ".trainyard-cache"))
    std::ofstream(entry.path(), std::ios::trunc) << "garbage";
  log.clear();
  load();
  EXPECT_NE(log[1].find("ignoring a damaged cache"), std::string::npos);
  EXPECT_NE(log[2].find("tokenising 16 reviews"), std::string::npos);
  // One whose file is whole, for these inputs, but whose offsets point past its ids (TextDataset
  // would read out of bounds): ignored too, and the batches are those of a fresh tokenisation.
  const Batch fresh = again.train->get_batch({0, 1, 2, 3});
  // Rewrites every cache file, valid as a file and under its own key, with `damage` done to it.
  auto rewrite_caches = [&](const std::function<void(TokenizedTexts&)>& damage) {
    for (const auto& entry :
         std::filesystem::directory_iterator(dir.path() / "aclImdb" / ".trainyard-cache")) {
      const std::string key = SafetensorsFile(entry.path().string()).metadata().at("key");
      std::optional<TokenizedTexts> texts =
          read_token_cache(entry.path().string(), key, 1 << 20, 2, nullptr);
      ASSERT_TRUE(texts);
      damage(*texts);
      write_token_cache(entry.path().string(), key, *texts);
    }
  };
  rewrite_caches([](TokenizedTexts& texts) {
    texts.offsets[1] = static_cast<int64_t>(texts.ids.size()) + 1000;
  });
  log.clear();
  DataSplits rebuilt = load();
  EXPECT_NE(log[1].find("ignoring a damaged cache"), std::string::npos);
  EXPECT_NE(log[1].find("offset 2"), std::string::npos) << log[1];
  const Batch batch = rebuilt.train->get_batch({0, 1, 2, 3});
  EXPECT_TRUE(torch::equal(batch.inputs, fresh.inputs));
  // One whole and in range, for these inputs, but holding a review fewer than the folder: the
  // splits would index past it.
  rewrite_caches([](TokenizedTexts& texts) {
    texts.labels.pop_back();
    texts.offsets.pop_back();
    texts.ids.resize(static_cast<size_t>(texts.offsets.back()));
  });
  log.clear();
  load();
  EXPECT_NE(log[1].find("holds 15 reviews, not 16"), std::string::npos) << log[1];
}

TEST_F(ImdbTest, PaddingModes) {
  Batch fixed = load().train->get_batch({0, 1, 2});
  EXPECT_EQ(fixed.inputs.sizes(), (std::vector<int64_t>{3, 12}));
  Batch dynamic = load(", padding: dynamic").train->get_batch({0, 1, 2});
  // A batch without padding carries no mask: every token is real.
  auto row_tokens = [](const Batch& b) {
    return b.attention_mask.defined() ? b.attention_mask.sum(1)
                                      : torch::full({b.inputs.size(0)}, b.inputs.size(1));
  };
  EXPECT_EQ(dynamic.inputs.size(1), row_tokens(dynamic).max().item<int64_t>());  // the longest row
  EXPECT_EQ(row_tokens(dynamic).sum().item<int64_t>(), row_tokens(fixed).sum().item<int64_t>());
  EXPECT_FALSE(load(", padding: dynamic").train->get_batch({0}).attention_mask.defined());
}

TEST_F(ImdbTest, BrokenFolders) {
  EXPECT_NE(error_of(", train_size: 12").find("train_size 12 + val_size 4 leave no test reviews"),
            std::string::npos);
  std::filesystem::rename(dir.path() / "aclImdb" / "test" / "neg", dir.path() / "elsewhere");
  std::string error = error_of();
  EXPECT_NE(error.find("imdb: missing folder"), std::string::npos) << error;
  EXPECT_NE(error.find("must be the aclImdb folder"), std::string::npos);
  EXPECT_NE(error_of(", vocab: /no/vocab.txt").find("cannot read vocabulary /no/vocab.txt"),
            std::string::npos);
}

TEST_F(ImdbTest, AReviewOfMegabytesIsRefusedUnread) {
  dir.write("aclImdb/train/pos/9_10.txt", std::string((1 << 20) + 1, 'a'));
  const std::string error = error_of();
  EXPECT_NE(error.find("9_10.txt is 1048577 bytes, more than the 1048576 a review may have"),
            std::string::npos)
      << error;
}

TEST(SyntheticTextTest, DeterministicAndDynamicallyPadded) {
  ComponentChoice choice{.name = "synthetic-text"};
  flatten_into(choice.options, YAML::Load("{train_size: 32, min_length: 4, max_length: 20}"), "t");
  DataSplits a = build_dataset(builtin_registry(), choice, {});
  DataSplits b = build_dataset(builtin_registry(), choice, {});
  Batch x = a.train->get_batch({0, 1, 2, 3}), y = b.train->get_batch({0, 1, 2, 3});
  EXPECT_TRUE(torch::equal(x.inputs, y.inputs));
  EXPECT_LE(x.inputs.size(1), 20);
  EXPECT_EQ(x.inputs.select(1, 0).eq(1).all().item<bool>(),
            true);  // every sequence opens with [CLS]
  EXPECT_EQ(a.vocab_size, 1000);
}

}  // namespace
}  // namespace trainyard
