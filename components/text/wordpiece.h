// BERT's tokenizer, uncased: the same ids as Hugging Face's BertTokenizerFast for a vocab.txt (or
// the uncased BERT family's tokenizer.json, which says the same in JSON).
//
//   normalise   drop NUL, U+FFFD and control characters; whitespace becomes ' '; spaces around CJK
//               ideographs; NFD and drop non-spacing marks (accents); lowercase each code point
//               (no context: a word-final Σ is σ, as the tokenizers library lowercases)
//   split       on whitespace, and every punctuation character is a word of its own
//   WordPiece   greedy longest-match-first with "##" continuations; a word that cannot be covered,
//               or is longer than 100 characters, is [UNK]
//   encode      [CLS] tokens [SEP], truncated to max_length, padded with [PAD] (mask 0)
//
// Bytes that are not valid UTF-8 are read as U+FFFD and so dropped by the normaliser (documented
// behaviour, rather than an error: a review with one stray byte still trains). Unicode data comes
// from ICU. Thread-safe after construction.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "components/text/text_tokenizer.h"
#include "components/text/tokenizer_json.h"

namespace trainyard {

class WordPieceTokenizer : public TextTokenizer {
 public:
  static constexpr size_t kMaxCharsPerWord = 100;
  // Changes whenever the same text and vocabulary would give other ids (it keys token caches): 2
  // matches special tokens written in the text and keeps unassigned code points, as the tokenizers
  // library does; 3 lowercases without context (a word-final capital sigma).
  static constexpr int kVersion = 3;

  // Reads a vocabulary, one token per line, id = line number - 1. Throws UserError naming the file
  // (and line) when it is missing, empty, repeats a token or lacks [PAD], [UNK], [CLS] or [SEP].
  static WordPieceTokenizer from_vocab_file(const std::string& path);
  // Reads a Hugging Face tokenizer.json of the uncased BERT family: a WordPiece model with "##"
  // continuations, BertNormalizer lowercasing (accents stripped), BertPreTokenizer, [CLS] ... [SEP]
  // (BertProcessing or TemplateProcessing), no added tokens beyond BERT's five — what the rules
  // above are. Any other type or setting is a UserError naming it. The same vocabulary as a
  // vocab.txt gives the same ids and vocab_hash().
  static WordPieceTokenizer from_tokenizer_json(const std::string& path);
  // A tokenizer.json read once (tokenizer_json.h): what from_tokenizer_json reads.
  static WordPieceTokenizer from_json(const TokenizerJson& file);
  // A .json file as a tokenizer.json, anything else as a vocab.txt.
  static WordPieceTokenizer from_file(const std::string& path);

  // The normalised, split and WordPiece-tokenised text, without special tokens.
  std::vector<std::string> tokenize(std::string_view text) const;

  // [CLS] + ids + [SEP], truncated to max_length; padded to max_length when pad is true.
  Encoding encode(std::string_view text, int64_t max_length, bool pad) const override;

  int64_t pad_id() const override { return pad_id_; }
  int64_t vocab_size() const override { return static_cast<int64_t>(tokens_.size()); }
  // "<kVersion> vocab <vocab_hash>", as token caches were keyed before byte-level BPE.
  std::string cache_id() const override;
  std::string framing() const override;
  // Stable hash of the vocabulary: keys caches of tokenised data.
  const std::string& vocab_hash() const { return vocab_hash_; }

 private:
  // The tokens by id; finds the special tokens and hashes the vocabulary. `source` names the file.
  static WordPieceTokenizer from_tokens(std::vector<std::string> tokens, const std::string& source);
  std::vector<std::string> normalize_and_split(std::string_view text) const;
  void wordpiece(const std::string& word, std::vector<std::string>& out) const;
  int64_t id_of(const std::string& token) const;

  std::vector<std::string> tokens_;
  std::unordered_map<std::string, int64_t> ids_;
  int64_t pad_id_ = 0, unk_id_ = 0, cls_id_ = 0, sep_id_ = 0;
  std::string vocab_hash_;
};

}  // namespace trainyard
