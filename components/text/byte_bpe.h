// GPT-2's and RoBERTa's tokenizer: byte-level BPE, read from a Hugging Face tokenizer.json, giving
// the ids the tokenizers library gives for the same file.
//
//   added tokens  matched first, on the raw text, leftmost-longest: those listed unnormalised, then
//                 the others in what is left (no normaliser: the same text); single_word, lstrip
//                 and rstrip as the library reads them
//   prefix space  with add_prefix_space, each piece between added tokens gets a leading ' '
//   split         GPT-2's pattern: 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|
//                 \s+(?!\S)|\s+ (scanned by hand: \s is Unicode's White_Space, as in Oniguruma)
//   BPE           each piece's bytes, one symbol per byte, merged lowest rank first, then leftmost
//   frame         the post-processor's template: nothing (ByteLevel), <s> ... </s> (Roberta-
//                 Processing), or TemplateProcessing's single-sequence pieces
//
// Bytes that are not UTF-8 are kept: each ill-formed sequence is a character of its own that is
// neither letter, number nor space, encoded as its bytes, so decode(encode(bytes)) gives the bytes
// back for any input (the library takes only valid text, and decodes lossily). Any setting this
// does not implement — another model, a normaliser, a pre-tokeniser sequence, byte fallback,
// dropout, truncation or padding in the file, added-token ids other than the library assigns — is
// a UserError naming it. single_word's \w comes from ICU. Thread-safe after construction.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "components/text/text_tokenizer.h"
#include "components/text/tokenizer_json.h"

namespace trainyard {

class ByteBpeTokenizer : public TextTokenizer {
 public:
  // Changes whenever the same file and text would give other ids (it keys token caches).
  static constexpr int kVersion = 1;

  // Reads a tokenizer.json (UserError naming the file and the setting when it is not one this
  // reads); from_json_text reads the text of one, `source` naming it in errors.
  static ByteBpeTokenizer from_tokenizer_json(const std::string& path);
  static ByteBpeTokenizer from_json_text(std::string_view json, const std::string& source);
  // A tokenizer.json read once (tokenizer_json.h): what the two above read.
  static ByteBpeTokenizer from_json(const TokenizerJson& file);

  // The ids of `text` without the template's special tokens (add_special_tokens=False), appended
  // to `out`. `continues` says the text goes on from an earlier piece: no prefix space is added to
  // its start (see next_cut).
  void encode_ordinary(std::string_view text, std::vector<int32_t>& out,
                       bool continues = false) const;
  // The template's frame around encode_ordinary's ids (add_special_tokens=True).
  std::vector<int64_t> encode(std::string_view text) const;
  // Framed, the text truncated to leave room for the frame within max_length; padded with pad_id
  // (mask 0) to max_length when pad is true. As WordPieceTokenizer::encode.
  Encoding encode(std::string_view text, int64_t max_length, bool pad) const override;
  // The text of `ids`: each token's characters back to its bytes (added tokens as written).
  // Throws UserError for an id outside the vocabulary.
  std::string decode(const std::vector<int64_t>& ids) const;

  // The first position at or after `from` where text can be cut, encode_ordinary(text[..p]) and
  // encode_ordinary(text[p..], out, /*continues=*/true) giving together the ids of the whole: just
  // after a newline between two characters that are not spaces (so both halves split there
  // anyway) where no added token can reach across. text.size() when there is none.
  size_t next_cut(std::string_view text, size_t from) const;

  // The id of a token of the vocabulary or the added tokens; -1 when there is none.
  int64_t token_id(std::string_view token) const;
  // The largest id + 1: what a model's embedding must hold.
  int64_t vocab_size() const override { return static_cast<int64_t>(tokens_.size()); }
  // The padding id for batches (attention mask 0): <pad>'s when the tokenizer has one, else the
  // frame's last token's (GPT-2: <|endoftext|>, as transformers users set it), else 0.
  int64_t pad_id() const override { return pad_id_; }
  // Stable hash of the tokenizer.json's bytes: keys caches of tokenised data.
  const std::string& vocab_hash() const { return vocab_hash_; }
  std::string cache_id() const override;
  std::string framing() const override;

 private:
  struct AddedToken {
    std::string content;
    int32_t id = 0;
    bool single_word = false, lstrip = false, rstrip = false, normalized = false;
  };
  struct Merge {
    int32_t rank = 0, id = 0;
  };
  // A piece of text and, when it is an added token, its id (else -1).
  struct Piece {
    std::string_view text;
    int32_t id = -1;
  };

  // Reading a tokenizer.json, in its order: the pipeline around the model (version, normaliser,
  // pre-tokeniser, decoder; what is refused), the vocabulary, the merges, the added tokens, the
  // frame (the post-processor; TemplateProcessing's single template).
  void read_pipeline(const TokenizerJson& file);
  void read_vocab(const TokenizerJson& file);
  void read_merges(const TokenizerJson& file);
  void read_added_tokens(const TokenizerJson& file);
  void read_frame(const TokenizerJson& file);
  void read_template(const TokenizerJson& file, const nlohmann::json& post);
  // Puts `token` at id `id_json` (from the vocab or the added tokens: `where`); returns the id.
  int32_t place(const TokenizerJson& file, const std::string& token, const nlohmann::json& id_json,
                const char* where);

  // The added tokens of one pass (normalized or not) found in `text`, and the text between them.
  void split_added(std::string_view text, bool normalized, std::vector<Piece>& out) const;
  // One piece between added tokens: prefix space, GPT-2's split, BPE.
  void encode_piece(std::string_view piece, bool prefix_space, std::vector<int32_t>& out) const;
  // BPE of one pre-token's bytes (with the calling thread's cache).
  void bpe(std::string_view word, std::vector<int32_t>& out) const;

  std::vector<std::string> tokens_;  // by id (a byte-level string, or an added token's content)
  std::unordered_map<std::string, int32_t> ids_;
  int32_t byte_ids_[256] = {};                  // each byte's one-symbol token
  std::unordered_map<uint64_t, Merge> merges_;  // (left id << 32 | right id) -> rank, merged id
  std::vector<AddedToken> added_;
  bool add_prefix_space_ = false;
  std::vector<int64_t> prefix_ids_, suffix_ids_;  // the frame
  int64_t pad_id_ = 0;
  std::string vocab_hash_;
  uint64_t serial_ = 0;  // keys the per-thread BPE cache: unique to each tokenizer made
};

}  // namespace trainyard
