// A tokenizer.json: the tokenizers library's file, which both of Trainyard's text tokenizers read —
// WordPiece (wordpiece.h: the uncased BERT family's) and byte-level BPE (byte_bpe.h: GPT-2's,
// RoBERTa's). It is read once, here: its size bounded, its JSON parsed, its sections named; each
// reader then refuses, naming the setting, what it does not follow. load_text_tokenizer
// (text_tokenizer.h) reads a file once and gives it to the reader its model names.
#pragma once

#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace trainyard {

class TokenizerJson {
 public:
  // The file at `path`; UserError when it cannot be read, is larger than any tokenizer.json
  // (256 MiB), or is not a JSON object.
  static TokenizerJson read(const std::string& path);
  // `text`, read from `source` (which errors name); UserError when it is not a JSON object.
  static TokenizerJson parse(std::string_view text, const std::string& source);

  const nlohmann::json& root() const { return root_; }
  const std::string& source() const { return source_; }
  // The file's bytes, hashed (common/text.h's stable_hash): what keys caches of tokenised data.
  std::string text_hash() const;
  // The model's type: "WordPiece", "BPE", ... (type_of).
  std::string model_type() const { return type_of(member(root_, "model")); }

  // object[key], or null when `object` is not an object or has no such key.
  static const nlohmann::json& member(const nlohmann::json& object, const char* key);
  // A section's "type": "none" for null, "unknown" when it has none.
  static std::string type_of(const nlohmann::json& section);

 private:
  TokenizerJson(std::string source, std::string text, nlohmann::json root)
      : source_(std::move(source)), text_(std::move(text)), root_(std::move(root)) {}

  std::string source_;
  std::string text_;
  nlohmann::json root_;
};

}  // namespace trainyard
