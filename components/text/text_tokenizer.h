// What the text datasets (textfile, imdb) ask of a tokenizer: a text framed (BERT's [CLS] ...
// [SEP], RoBERTa's <s> ... </s>), truncated to max_length and padded. Two implement it: BERT's
// WordPiece (wordpiece.h) and byte-level BPE (byte_bpe.h); load_text_tokenizer picks by the file.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace trainyard {

struct Encoding {
  std::vector<int64_t> input_ids;
  std::vector<int64_t> attention_mask;
};

class TextTokenizer {
 public:
  virtual ~TextTokenizer() = default;
  // The framed ids, truncated to max_length (the frame kept); padded with pad_id (mask 0) to
  // max_length when pad is true.
  virtual Encoding encode(std::string_view text, int64_t max_length, bool pad) const = 0;
  virtual int64_t pad_id() const = 0;
  virtual int64_t vocab_size() const = 0;
  // What keys a cache of its encodings: its kind, its version and its file's hash.
  virtual std::string cache_id() const = 0;
  // How it frames and pads a text, for the run's log: "framed as [CLS] … [SEP], padded with [PAD]
  // (id 0) …"; "not framed (its post-processor adds no tokens), padded with <|endoftext|> …".
  virtual std::string framing() const = 0;
};

// A tokenizer.json whose model is BPE as byte-level BPE; any other .json, or a vocab.txt, as
// WordPiece. UserError naming the file and what is wrong.
std::unique_ptr<TextTokenizer> load_text_tokenizer(const std::string& path);

}  // namespace trainyard
