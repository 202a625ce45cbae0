#include "components/data/synthetic_text.h"

#include <random>

#include "components/data/text_batch.h"

namespace trainyard {

namespace {

constexpr int64_t kPad = 0, kCls = 1, kFirstWord = 2;

// Token 0 pads and 1 opens every sequence (a [CLS]); each class c plants token 2 + c at about one
// position in eight among uniformly random words.
TokenizedTexts generate(const SyntheticTextOptions& o, int64_t count, uint64_t seed) {
  std::mt19937_64 generator(seed);
  std::uniform_int_distribution<int64_t> label(0, o.num_classes - 1),
      length(o.min_length, o.max_length), word(kFirstWord + o.num_classes, o.vocab_size - 1);
  std::bernoulli_distribution signal(0.125);
  TokenizedTexts texts;
  std::vector<int64_t> sequence;
  for (int64_t i = 0; i < count; ++i) {
    int64_t c = label(generator), n = length(generator);
    sequence.assign(1, kCls);
    for (int64_t t = 1; t < n; ++t)
      sequence.push_back(signal(generator) ? kFirstWord + c : word(generator));
    texts.add(sequence, c);
  }
  return texts;
}

}  // namespace

void register_synthetic_text(Registry& registry) {
  OptionSet<SyntheticTextOptions> options;
  options.add("train_size", &SyntheticTextOptions::train_size, "training sequences", at_least(1))
      .add("val_size", &SyntheticTextOptions::val_size, "validation sequences", at_least(1))
      .add("test_size", &SyntheticTextOptions::test_size, "test sequences", at_least(1))
      .add("vocab_size", &SyntheticTextOptions::vocab_size,
           "distinct token ids; at most the model's vocab_size", at_least(8))
      .add("min_length", &SyntheticTextOptions::min_length, "shortest sequence, in tokens",
           at_least(2))
      .add("max_length", &SyntheticTextOptions::max_length, "longest sequence, in tokens",
           at_least(2))
      .add("num_classes", &SyntheticTextOptions::num_classes, "classes", at_least(2))
      .add("padding", &SyntheticTextOptions::padding,
           "max_length or dynamic (to the batch's longest)", one_of({"max_length", "dynamic"}))
      .add("seed", &SyntheticTextOptions::seed, "seed of the data (fixed across runs)", at_least(0))
      .check([](const SyntheticTextOptions& o) -> std::optional<std::string> {
        if (o.min_length > o.max_length) return "min_length is greater than max_length";
        return std::nullopt;
      })
      .check([](const SyntheticTextOptions& o) -> std::optional<std::string> {
        if (o.vocab_size < kFirstWord + o.num_classes + 2)
          return "vocab_size is too small for num_classes";
        return std::nullopt;
      });
  registry.add<DataSplits(const DataContext&)>(
      ComponentKind::dataset, "synthetic-text",
      "deterministic token sequences with class signal tokens, for quick runs and tests", options,
      [](const SyntheticTextOptions& o, const DataContext& context) {
        context.check_sequence_fits("synthetic-text", "dataset.max_length", o.max_length);
        const bool dynamic = o.padding == "dynamic";
        const auto seed = static_cast<uint64_t>(o.seed) * 3;
        DataSplits splits;
        auto split = [&](int64_t count, uint64_t s) {
          auto texts = std::make_shared<const TokenizedTexts>(generate(o, count, s));
          return std::make_shared<TextDataset>(texts, index_range(0, count), o.max_length, dynamic,
                                               kPad);
        };
        splits.train = split(o.train_size, seed + 1);
        splits.validation = split(o.val_size, seed + 2);
        splits.test = split(o.test_size, seed + 3);
        splits.num_classes = o.num_classes;
        splits.vocab_size = o.vocab_size;
        return splits;
      },
      [](const SyntheticTextOptions& o) {
        return DatasetCapabilities{.num_classes = o.num_classes,
                                   .vocab_size = o.vocab_size,
                                   .max_length = o.max_length,
                                   .varying_shapes = o.padding == "dynamic"};
      });
}

}  // namespace trainyard
