// Tokenised texts held back to back, and their cache file: what the text datasets (aclImdb,
// synthetic-text) hand to TextDataset. LibTorch-free (trainyard_core), so that the fuzzer drives
// the very code that reads a cache back.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace trainyard {

struct TokenizedTexts {
  std::vector<int32_t> ids;         // all sequences, back to back ([CLS] ... [SEP], no padding)
  std::vector<int64_t> offsets{0};  // sequence i is ids[offsets[i], offsets[i + 1])
  std::vector<int64_t> labels;
  int64_t size() const { return static_cast<int64_t>(labels.size()); }
  void add(const std::vector<int64_t>& sequence, int64_t label);
};

// What is wrong with `texts` for a model of `vocab_size` tokens and `num_classes` classes, or ""
// when every offset, id and label is in range: what TextDataset indexes with, unchecked.
std::string check_tokenized_texts(const TokenizedTexts& texts, int64_t vocab_size,
                                  int64_t num_classes);

// A safetensors file of "ids" (I32), "offsets" (I64) and "labels" (I64), its metadata "key" naming
// the inputs it was made from. Reading gives nothing when there is no file or it was made from
// other inputs; a damaged one (unreadable, or failing check_tokenized_texts) also gives nothing,
// and says why in `damage`. Writing is atomic (write_safetensors).
std::optional<TokenizedTexts> read_token_cache(const std::string& path, const std::string& key,
                                               int64_t vocab_size, int64_t num_classes,
                                               std::string* damage);
void write_token_cache(const std::string& path, const std::string& key,
                       const TokenizedTexts& texts);

}  // namespace trainyard
