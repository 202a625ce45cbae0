#include "components/data/text_batch.h"

#include <algorithm>
#include <exception>
#include <optional>
#include <random>
#include <thread>

#include <fmt/format.h>

#include "components/text/text_tokenizer.h"

namespace trainyard {

TextDataset::TextDataset(std::shared_ptr<const TokenizedTexts> texts, std::vector<int64_t> indices,
                         int64_t max_length, bool dynamic_padding, int64_t pad_id)
    : texts_(std::move(texts)),
      indices_(std::move(indices)),
      max_length_(max_length),
      dynamic_padding_(dynamic_padding),
      pad_id_(pad_id) {}

Batch TextDataset::get_batch(const std::vector<int64_t>& indices) const {
  const auto count = static_cast<int64_t>(indices.size());
  int64_t length = max_length_;
  if (dynamic_padding_) {
    length = 1;
    for (int64_t i : indices) {
      int64_t s = indices_.at(static_cast<size_t>(i));
      length = std::max(length, texts_->offsets[s + 1] - texts_->offsets[s]);
    }
  }
  Batch batch;
  batch.inputs = torch::full({count, length}, pad_id_, torch::kLong);
  batch.attention_mask = torch::zeros({count, length}, torch::kLong);
  batch.targets = torch::empty({count}, torch::kLong);
  auto ids = batch.inputs.accessor<int64_t, 2>();
  auto mask = batch.attention_mask.accessor<int64_t, 2>();
  auto targets = batch.targets.accessor<int64_t, 1>();
  bool padded = false;
  for (int64_t row = 0; row < count; ++row) {
    int64_t s = indices_.at(static_cast<size_t>(indices[static_cast<size_t>(row)]));
    int64_t begin = texts_->offsets[s], n = std::min(texts_->offsets[s + 1] - begin, length);
    for (int64_t t = 0; t < n; ++t) {
      ids[row][t] = texts_->ids[static_cast<size_t>(begin + t)];
      mask[row][t] = 1;
    }
    padded = padded || n < length;
    targets[row] = texts_->labels[static_cast<size_t>(s)];
  }
  // No padding, no mask: every token attends to every token, and attention may take the fused
  // kernels a mask rules out (transformers drops an all-ones mask for the same reason).
  if (!padded) batch.attention_mask = torch::Tensor();
  return batch;
}

TokenizedTexts tokenize_texts(const std::vector<int64_t>& labels,
                              const std::function<std::string(size_t)>& text_of,
                              const TextTokenizer& tokenizer, int64_t max_length) {
  const size_t count = labels.size();
  const size_t workers =
      std::max<size_t>(1, std::min<size_t>(std::thread::hardware_concurrency(), 16));
  std::vector<std::vector<std::vector<int64_t>>> parts(workers);
  std::vector<std::exception_ptr> errors(workers);
  std::vector<std::thread> threads;
  for (size_t w = 0; w < workers; ++w) {
    threads.emplace_back([&, w] {
      try {
        for (size_t i = w; i < count; i += workers)
          parts[w].push_back(tokenizer.encode(text_of(i), max_length, /*pad=*/false).input_ids);
      } catch (...) {
        errors[w] = std::current_exception();
      }
    });
  }
  for (auto& t : threads) t.join();
  for (auto& e : errors)
    if (e) std::rethrow_exception(e);
  TokenizedTexts texts;
  for (size_t i = 0; i < count; ++i) texts.add(parts[i % workers][i / workers], labels[i]);
  return texts;
}

std::shared_ptr<const TokenizedTexts> tokenize_corpus(const TextCorpus& corpus,
                                                      const TextTokenizer& tokenizer,
                                                      int64_t max_length,
                                                      const TokenCacheFile& cache,
                                                      const DataContext& context) {
  auto log = [&](const std::string& line) {
    if (context.log) context.log(fmt::format("{}: {}", corpus.dataset, line));
  };
  const auto n = static_cast<int64_t>(corpus.labels.size());
  std::string damage;
  std::optional<TokenizedTexts> texts =
      cache.enabled ? read_token_cache(cache.path, cache.key, tokenizer.vocab_size(),
                                       corpus.num_classes, &damage)
                    : std::nullopt;
  if (texts && texts->size() != n) {  // the splits index every text
    damage = fmt::format("{} holds {} {}, not {}", cache.path, texts->size(), corpus.unit, n);
    texts.reset();
  }
  log("each text " + tokenizer.framing());  // said: a GPT-2 tokenizer.json has no frame or pad
  if (!damage.empty()) log(fmt::format("ignoring a damaged cache ({}); tokenising again", damage));
  if (texts) {
    log(fmt::format("{} {} from the token cache {}", n, corpus.unit, cache.path));
  } else {
    log(fmt::format("tokenising {} {} (max_length {})", n, corpus.unit, max_length));
    texts = tokenize_texts(corpus.labels, corpus.text_of, tokenizer, max_length);
    if (cache.enabled) {
      try {
        write_token_cache(cache.path, cache.key, *texts);
      } catch (const std::exception& e) {
        log(fmt::format("cannot write the token cache {}: {}", cache.path, e.what()));
      }
    }
  }
  return std::make_shared<const TokenizedTexts>(std::move(*texts));
}

DataSplits text_splits(std::shared_ptr<const TokenizedTexts> texts, SplitIndices indices,
                       int64_t max_length, bool dynamic_padding, const TextTokenizer& tokenizer,
                       int64_t num_classes) {
  auto split = [&](std::vector<int64_t> chosen) {
    return std::make_shared<TextDataset>(texts, std::move(chosen), max_length, dynamic_padding,
                                         tokenizer.pad_id());
  };
  DataSplits splits;
  splits.train = split(std::move(indices.train));
  splits.validation = split(std::move(indices.validation));
  splits.test = split(std::move(indices.test));
  splits.num_classes = num_classes;
  splits.vocab_size = tokenizer.vocab_size();
  return splits;
}

std::vector<int64_t> numpy_permutation(uint32_t seed, int64_t n) {
  // numpy's legacy RandomState seeds MT19937 with init_genrand(seed), as std::mt19937(seed) does,
  // and shuffles from the back, drawing j in [0, i] by masked rejection sampling.
  std::mt19937 generator(seed);
  std::vector<int64_t> x(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) x[static_cast<size_t>(i)] = i;
  for (int64_t i = n - 1; i >= 1; --i) {
    auto max = static_cast<uint32_t>(i);
    uint32_t mask = max;
    mask |= mask >> 1;
    mask |= mask >> 2;
    mask |= mask >> 4;
    mask |= mask >> 8;
    mask |= mask >> 16;
    uint32_t j;
    do {
      j = static_cast<uint32_t>(generator()) & mask;
    } while (j > max);
    std::swap(x[static_cast<size_t>(i)], x[j]);
  }
  return x;
}

}  // namespace trainyard
