// Tokenised texts held as one flat id buffer with offsets, collated into padded batches:
// `max_length` pads every sequence to the same length (as the reference studies do), `dynamic` pads
// each batch to its longest sequence (fewer wasted tokens, same results). A batch without padding
// carries no attention mask.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "components/data/tokenized_texts.h"
#include "trainyard/dataset.h"

namespace trainyard {

class TextTokenizer;

class TextDataset : public Dataset {
 public:
  // `texts` is shared between the splits; `indices` picks this split's sequences.
  TextDataset(std::shared_ptr<const TokenizedTexts> texts, std::vector<int64_t> indices,
              int64_t max_length, bool dynamic_padding, int64_t pad_id);
  int64_t size() const override { return static_cast<int64_t>(indices_.size()); }
  Batch get_batch(const std::vector<int64_t>& indices) const override;

 private:
  std::shared_ptr<const TokenizedTexts> texts_;
  std::vector<int64_t> indices_;
  int64_t max_length_;
  bool dynamic_padding_;
  int64_t pad_id_;
};

// Tokenises `labels.size()` texts (framed, [CLS] ... [SEP] or <s> ... </s>, truncated to
// max_length, unpadded) on every
// core; `text_of(i)` gives text i (read from a file, say) and may be called from any thread.
TokenizedTexts tokenize_texts(const std::vector<int64_t>& labels,
                              const std::function<std::string(size_t)>& text_of,
                              const TextTokenizer& tokenizer, int64_t max_length);

// What the text datasets (imdb, textfile) share once their files are read: the texts tokenised, or
// read back from their token cache, and cut into splits.

// The texts a dataset read, before tokenising.
struct TextCorpus {
  std::string dataset{};                         // "imdb": starts the log lines
  std::string unit{};                            // "reviews": what the log lines count
  std::vector<int64_t> labels{};                 // one a text
  std::function<std::string(size_t)> text_of{};  // text i; called from any thread
  int64_t num_classes = 0;
};

// Where the tokenised corpus is kept between runs; `key` names the inputs it was made from.
struct TokenCacheFile {
  bool enabled = true;
  std::string path;
  std::string key;
};

// The corpus tokenised: from the cache when it was made from the same inputs and holds every text
// (a damaged one is ignored, and said so), else tokenised and the cache written — a cache that
// cannot be written only costs the next run the tokenisation. The run's log says which.
std::shared_ptr<const TokenizedTexts> tokenize_corpus(const TextCorpus& corpus,
                                                      const TextTokenizer& tokenizer,
                                                      int64_t max_length,
                                                      const TokenCacheFile& cache,
                                                      const DataContext& context);

// The three splits of a tokenised corpus, by index; `dynamic_padding` pads each batch to its
// longest text, otherwise every text to max_length.
struct SplitIndices {
  std::vector<int64_t> train, validation, test;
};
DataSplits text_splits(std::shared_ptr<const TokenizedTexts> texts, SplitIndices indices,
                       int64_t max_length, bool dynamic_padding, const TextTokenizer& tokenizer,
                       int64_t num_classes);

// numpy.random.RandomState(seed).permutation(n), exactly: the reference studies' shuffle.
std::vector<int64_t> numpy_permutation(uint32_t seed, int64_t n);

}  // namespace trainyard
