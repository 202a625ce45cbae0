// Tokenised texts held as one flat id buffer with offsets, collated into padded batches:
// `max_length` pads every sequence to the same length (as the reference studies do), `dynamic` pads
// each batch to its longest sequence (fewer wasted tokens, same results). A batch without padding
// carries no attention mask.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "components/data/dataset.h"
#include "components/data/tokenized_texts.h"

namespace trainyard {

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

// Tokenises `labels.size()` texts ([CLS] ... [SEP], truncated to max_length, unpadded) on every
// core; `text_of(i)` gives text i (read from a file, say) and may be called from any thread.
class WordPieceTokenizer;
TokenizedTexts tokenize_texts(const std::vector<int64_t>& labels,
                              const std::function<std::string(size_t)>& text_of,
                              const WordPieceTokenizer& tokenizer, int64_t max_length);

// numpy.random.RandomState(seed).permutation(n), exactly: the reference studies' shuffle.
std::vector<int64_t> numpy_permutation(uint32_t seed, int64_t n);

}  // namespace trainyard
