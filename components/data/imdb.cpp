#include "components/data/imdb.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

#include "common/text.h"
#include "components/data/text_batch.h"
#include "components/text/wordpiece.h"

namespace trainyard {

namespace fs = std::filesystem;

namespace {

struct Review {
  std::string path;
  int64_t label;
};

std::string layout_hint(const std::string& root) {
  return fmt::format(
      "dataset.root ('{}') must be the aclImdb folder of the IMDB dataset (aclImdb_v1.tar.gz), "
      "holding train/pos, train/neg, test/pos and test/neg",
      root);
}

// What validation can know without tokenising: two classes, the vocabulary's size (its lines), the
// longest sequence, and whether the root's four folders and the vocabulary file are there.
DatasetCapabilities describe_imdb(const ImdbOptions& o) {
  DatasetCapabilities capabilities{
      .num_classes = 2, .max_length = o.max_length, .varying_shapes = o.padding == "dynamic"};
  std::error_code ec;
  if (!fs::is_directory(o.root, ec)) {
    capabilities.files.problems.emplace_back(
        "root", fmt::format("imdb: no such folder '{}'; {}", o.root, layout_hint(o.root)));
  } else {
    std::vector<std::string> missing;
    for (const char* folder : {"train/pos", "train/neg", "test/pos", "test/neg"})
      if (!fs::is_directory(fs::path(o.root) / folder, ec)) missing.push_back(folder);
    if (!missing.empty())
      capabilities.files.problems.emplace_back(
          "root",
          fmt::format("imdb: '{}' lacks {}; {}", o.root, join(missing), layout_hint(o.root)));
  }
  std::ifstream vocab(o.vocab);
  if (!vocab || !fs::is_regular_file(o.vocab, ec)) {  // a folder, or a device that never ends
    capabilities.files.problems.emplace_back(
        "vocab", fmt::format("imdb: cannot read the vocabulary '{}'; dataset.vocab must be the "
                             "model's vocab.txt (one WordPiece token a line)",
                             o.vocab));
    return capabilities;
  }
  std::string line;
  while (std::getline(vocab, line)) ++capabilities.vocab_size;
  return capabilities;
}

// The studies' order: test/pos, test/neg, train/pos, train/neg, each sorted by file name.
std::vector<Review> list_reviews(const std::string& root, uint64_t& total_bytes) {
  std::vector<Review> reviews;
  total_bytes = 0;
  for (const char* split : {"test", "train"}) {
    for (auto [folder, label] : {std::pair{"pos", int64_t{1}}, {"neg", int64_t{0}}}) {
      fs::path dir = fs::path(root) / split / folder;
      std::error_code ec;
      if (!fs::is_directory(dir, ec))
        throw UserError(
            fmt::format("imdb: missing folder {}; {}", dir.string(), layout_hint(root)));
      std::vector<std::string> names;
      for (const auto& entry : fs::directory_iterator(dir))
        if (entry.is_regular_file() && entry.path().extension() == ".txt")
          names.push_back(entry.path().filename().string());
      std::sort(names.begin(), names.end());
      for (const auto& name : names) {
        std::string path = (dir / name).string();
        total_bytes += fs::file_size(path, ec);
        reviews.push_back({path, label});
      }
    }
  }
  if (reviews.empty())
    throw UserError(fmt::format("imdb: no reviews (*.txt) under {}; {}", root, layout_hint(root)));
  return reviews;
}

// An aclImdb review is a few kilobytes; a file of megabytes in its folders
// is something else (a log, an archive), refused before it is read and tokenised whole.
constexpr uintmax_t kMaxReviewBytes = 1 << 20;

std::string read_text(const std::string& path) {
  std::error_code ec;
  if (const uintmax_t size = std::filesystem::file_size(path, ec); !ec && size > kMaxReviewBytes)
    throw UserError(
        fmt::format("imdb: {} is {} bytes, more than the {} a review may have; "
                    "move it out of the dataset's folders",
                    path, size, kMaxReviewBytes));
  std::ifstream in(path, std::ios::binary);
  if (!in) throw UserError(fmt::format("imdb: cannot read {}", path));
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

std::string cache_key(const WordPieceTokenizer& tokenizer, int64_t max_length, size_t reviews,
                      uint64_t bytes) {
  return fmt::format("tokenizer {} vocab {} max_length {} reviews {} bytes {}",
                     WordPieceTokenizer::kVersion, tokenizer.vocab_hash(), max_length, reviews,
                     bytes);
}

}  // namespace

void register_imdb(Registry& registry) {
  OptionSet<ImdbOptions> options;
  options.add("root", &ImdbOptions::root, "the aclImdb folder", names_data(required()))
      .add("vocab", &ImdbOptions::vocab,
           "the BERT vocab.txt of the model (distilbert-base-uncased's)", names_data(required()))
      .add("max_length", &ImdbOptions::max_length,
           "tokens per review, [CLS] and [SEP] included (the studies: 512)", at_least(2))
      .add("padding", &ImdbOptions::padding,
           "max_length: pad every review to max_length; dynamic: to the batch's longest",
           one_of({"max_length", "dynamic"}))
      .add("train_size", &ImdbOptions::train_size,
           "reviews that train, after the shuffle (the studies: 35000)", at_least(1))
      .add("val_size", &ImdbOptions::val_size,
           "reviews that validate; the rest test (the studies: 5000)", at_least(1))
      .add("cache", &ImdbOptions::cache,
           "keep the tokenised reviews in root/.trainyard-cache for later runs");
  registry.add<DataSplits(const DataContext&)>(
      ComponentKind::dataset, "imdb",
      "IMDB reviews (aclImdb), tokenised for BERT; the reference studies' split", options,
      [](const ImdbOptions& o, const DataContext& context) {
        context.check_sequence_fits("imdb", "dataset.max_length", o.max_length);
        WordPieceTokenizer tokenizer = WordPieceTokenizer::from_vocab_file(o.vocab);
        uint64_t bytes = 0;
        std::vector<Review> reviews = list_reviews(o.root, bytes);
        const auto n = static_cast<int64_t>(reviews.size());
        if (o.train_size + o.val_size >= n)
          throw UserError(fmt::format(
              "imdb: train_size {} + val_size {} leave no test reviews: {} holds {} reviews",
              o.train_size, o.val_size, o.root, n));
        TextCorpus corpus{.dataset = "imdb",
                          .unit = "reviews",
                          .text_of = [&](size_t i) { return read_text(reviews[i].path); },
                          .num_classes = 2};
        for (const Review& review : reviews) corpus.labels.push_back(review.label);
        const TokenCacheFile cache{
            .enabled = o.cache,
            .path = (fs::path(o.root) / ".trainyard-cache" /
                     fmt::format("imdb-{}-{}.safetensors", tokenizer.vocab_hash(), o.max_length))
                        .string(),
            .key = cache_key(tokenizer, o.max_length, reviews.size(), bytes)};
        auto texts = tokenize_corpus(corpus, tokenizer, o.max_length, cache, context);
        const std::vector<int64_t> order = numpy_permutation(1, n);
        auto slice = [&](int64_t begin, int64_t end) {
          return std::vector<int64_t>(order.begin() + begin, order.begin() + end);
        };
        DataSplits splits =
            text_splits(std::move(texts),
                        {.train = slice(0, o.train_size),
                         .validation = slice(o.train_size, o.train_size + o.val_size),
                         .test = slice(o.train_size + o.val_size, n)},
                        o.max_length, o.padding == "dynamic", tokenizer, 2);
        splits.details = {{"dataset_classes", "neg=0, pos=1"}};  // its folders
        return splits;
      },
      describe_imdb);
}

}  // namespace trainyard
