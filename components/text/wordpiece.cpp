#include "components/text/wordpiece.h"

#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include <fmt/format.h>
#include <unicode/normalizer2.h>
#include <unicode/uchar.h>
#include <unicode/unistr.h>
#include <unicode/utf8.h>
#include <nlohmann/json.hpp>

#include "common/text.h"
#include "components/text/byte_bpe.h"
#include "components/text/tokenizer_json.h"
#include "trainyard/error.h"

namespace trainyard {

namespace {

// The CJK Unified Ideographs blocks BERT spaces out (not Hiragana, Katakana or Hangul).
bool is_cjk(UChar32 c) {
  return (c >= 0x4E00 && c <= 0x9FFF) || (c >= 0x3400 && c <= 0x4DBF) ||
         (c >= 0x20000 && c <= 0x2A6DF) || (c >= 0x2A700 && c <= 0x2B73F) ||
         (c >= 0x2B740 && c <= 0x2B81F) || (c >= 0x2B820 && c <= 0x2CEAF) ||
         (c >= 0xF900 && c <= 0xFAFF) || (c >= 0x2F800 && c <= 0x2FA1F);
}

// As the tokenizers crate: \t \n \r and Unicode White_Space.
bool is_whitespace(UChar32 c) {
  return c == '\t' || c == '\n' || c == '\r' || u_hasBinaryProperty(c, UCHAR_WHITE_SPACE);
}

// Categories C* (Cc, Cf, Cn, Co, Cs), except the whitespace controls.
bool is_control(UChar32 c) {
  if (c == '\t' || c == '\n' || c == '\r') return false;
  switch (u_charType(c)) {
    // Not U_UNASSIGNED: the tokenizers library (BertTokenizerFast) keeps an unassigned code point
    // and it becomes [UNK], where Python's slow BertTokenizer drops it (found by the differential
    // test).
    case U_CONTROL_CHAR:
    case U_FORMAT_CHAR:
    case U_PRIVATE_USE_CHAR:
    case U_SURROGATE:
      return true;
    default:
      return false;
  }
}

// ASCII punctuation (which includes $ + < = > ^ ` | ~) and Unicode categories P*.
bool is_punctuation(UChar32 c) {
  if ((c >= 33 && c <= 47) || (c >= 58 && c <= 64) || (c >= 91 && c <= 96) ||
      (c >= 123 && c <= 126))
    return true;
  switch (u_charType(c)) {
    case U_CONNECTOR_PUNCTUATION:
    case U_DASH_PUNCTUATION:
    case U_START_PUNCTUATION:
    case U_END_PUNCTUATION:
    case U_INITIAL_PUNCTUATION:
    case U_FINAL_PUNCTUATION:
    case U_OTHER_PUNCTUATION:
      return true;
    default:
      return false;
  }
}

void append_utf8(std::string& out, UChar32 c) {
  char buffer[U8_MAX_LENGTH];
  int32_t length = 0;
  UBool error = false;
  U8_APPEND(reinterpret_cast<uint8_t*>(buffer), length, U8_MAX_LENGTH, c, error);
  if (!error) out.append(buffer, static_cast<size_t>(length));
}

}  // namespace

WordPieceTokenizer WordPieceTokenizer::from_vocab_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::error_code ec;  // a folder, or a device that never ends: not a vocabulary
  if (!in || !std::filesystem::is_regular_file(path, ec))
    throw UserError(fmt::format("tokenizer: cannot read vocabulary {}", path));
  std::vector<std::string> tokens;
  std::unordered_map<std::string, int64_t> first_line;
  std::string line;
  for (int64_t number = 1; std::getline(in, line); ++number) {
    while (!line.empty() && (line.back() == '\r' || line.back() == '\n')) line.pop_back();
    auto [it, inserted] = first_line.emplace(line, number);
    if (!inserted)
      throw UserError(
          fmt::format("tokenizer: vocabulary {} line {} repeats token '{}' (first on line {}); "
                      "is this a BERT vocab.txt?",
                      path, number, line, it->second));
    tokens.push_back(line);
  }
  return from_tokens(std::move(tokens), path);
}

WordPieceTokenizer WordPieceTokenizer::from_tokens(std::vector<std::string> tokens,
                                                   const std::string& source) {
  WordPieceTokenizer t;
  if (tokens.empty()) throw UserError(fmt::format("tokenizer: vocabulary {} is empty", source));
  std::string all;
  for (size_t id = 0; id < tokens.size(); ++id) {
    t.ids_.emplace(tokens[id], static_cast<int64_t>(id));
    all += tokens[id] + "\n";  // as vocab.txt holds it: the same vocabulary hashes the same
  }
  t.tokens_ = std::move(tokens);
  for (auto [name, id] : {std::pair{"[PAD]", &t.pad_id_},
                          {"[UNK]", &t.unk_id_},
                          {"[CLS]", &t.cls_id_},
                          {"[SEP]", &t.sep_id_}}) {
    auto it = t.ids_.find(name);
    if (it == t.ids_.end())
      throw UserError(fmt::format(
          "tokenizer: vocabulary {} has no {} token; a BERT vocab.txt has [PAD], [UNK], "
          "[CLS] and [SEP]",
          source, name));
    *id = it->second;
  }
  t.vocab_hash_ = stable_hash(all);
  return t;
}

namespace {

// What from_tokenizer_json accepts: the uncased BERT family's tokenizer.json, which says in JSON
// what the vocab.txt path assumes. Each check names the setting it found and why it is refused.
void check_bert_tokenizer_json(const nlohmann::json& j, const std::string& path) {
  auto refuse = [&](const std::string& what) {
    throw UserError(
        fmt::format("tokenizer: {}: {}; Trainyard reads the tokenizer.json of the "
                    "uncased BERT family (distilbert-base-uncased's, say), or a "
                    "vocab.txt, or a byte-level BPE tokenizer.json (RoBERTa's, GPT-2's)",
                    path, what));
  };
  const auto& type_of = TokenizerJson::type_of;
  const nlohmann::json& model = j.contains("model") ? j["model"] : nlohmann::json();
  if (type_of(model) != "WordPiece")
    refuse(fmt::format("its model is {}, not WordPiece", type_of(model)));
  if (model.value("continuing_subword_prefix", std::string("##")) != "##")
    refuse("its continuing_subword_prefix is not \"##\"");
  // An integer, read as one: a float such as 1e300 is no count (and casting it would overflow).
  const nlohmann::json max_chars = model.contains("max_input_chars_per_word")
                                       ? model["max_input_chars_per_word"]
                                       : nlohmann::json(WordPieceTokenizer::kMaxCharsPerWord);
  if (!max_chars.is_number_integer() ||
      max_chars.get<int64_t>() != static_cast<int64_t>(WordPieceTokenizer::kMaxCharsPerWord))
    refuse("its max_input_chars_per_word is not 100");
  if (model.value("unk_token", std::string("[UNK]")) != "[UNK]")
    refuse("its unk_token is not [UNK]");
  const nlohmann::json& normalizer = j.contains("normalizer") ? j["normalizer"] : nlohmann::json();
  if (type_of(normalizer) != "BertNormalizer")
    refuse(fmt::format("its normalizer is {}, not BertNormalizer", type_of(normalizer)));
  if (!normalizer.value("lowercase", false))
    refuse("its normalizer does not lowercase (a cased model); the tokenizer here is uncased");
  if (!normalizer.value("clean_text", false) || !normalizer.value("handle_chinese_chars", false))
    refuse("its normalizer turns clean_text or handle_chinese_chars off");
  // null: follow lowercase (true here), as the library does.
  if (normalizer.contains("strip_accents") && normalizer["strip_accents"].is_boolean() &&
      !normalizer["strip_accents"].get<bool>())
    refuse("its normalizer keeps accents (strip_accents: false)");
  const nlohmann::json& pre = j.contains("pre_tokenizer") ? j["pre_tokenizer"] : nlohmann::json();
  if (type_of(pre) != "BertPreTokenizer")
    refuse(fmt::format("its pre_tokenizer is {}, not BertPreTokenizer", type_of(pre)));
  // [CLS] text [SEP]: BertProcessing's cls and sep, or TemplateProcessing's single template.
  const nlohmann::json& post =
      j.contains("post_processor") ? j["post_processor"] : nlohmann::json();
  bool cls_sep = false;
  auto first = [](const nlohmann::json& pair) {  // BertProcessing's ["[CLS]", 101]
    return pair.is_array() && !pair.empty() && pair[0].is_string() ? pair[0].get<std::string>()
                                                                   : std::string();
  };
  if (type_of(post) == "BertProcessing") {
    cls_sep = post.contains("cls") && first(post["cls"]) == "[CLS]" && post.contains("sep") &&
              first(post["sep"]) == "[SEP]";
  } else if (type_of(post) == "TemplateProcessing" && post.contains("single") &&
             post["single"].is_array() && post["single"].size() == 3) {
    const nlohmann::json& single = post["single"];
    auto special = [](const nlohmann::json& piece) {
      return piece.is_object() && piece.contains("SpecialToken") &&
                     piece["SpecialToken"].is_object()
                 ? piece["SpecialToken"].value("id", std::string())
                 : std::string();
    };
    cls_sep = special(single[0]) == "[CLS]" && single[1].is_object() &&
              single[1].contains("Sequence") && special(single[2]) == "[SEP]";
  }
  if (!cls_sep)
    refuse(fmt::format("its post_processor ({}) does not frame a text as [CLS] ... [SEP]",
                       type_of(post)));
  // Special tokens written in a text are matched as BERT's five are (tokenize()); others not.
  if (j.contains("added_tokens") && j["added_tokens"].is_array())
    for (const nlohmann::json& added : j["added_tokens"]) {
      const std::string content = added.is_object() ? added.value("content", std::string()) : "";
      if (content != "[PAD]" && content != "[UNK]" && content != "[CLS]" && content != "[SEP]" &&
          content != "[MASK]")
        refuse(
            fmt::format("it adds the token '{}', beyond BERT's [PAD], [UNK], [CLS], [SEP] "
                        "and [MASK]",
                        content));
    }
}

// The vocabulary of a tokenizer.json's model: its tokens by id, each id from 0 once.
std::vector<std::string> dense_vocab(const TokenizerJson& file) {
  const nlohmann::json& vocab =
      TokenizerJson::member(TokenizerJson::member(file.root(), "model"), "vocab");
  if (!vocab.is_object() || vocab.empty())
    throw UserError(fmt::format("tokenizer: {}: its model has no vocab", file.source()));
  std::vector<std::string> tokens(vocab.size());
  std::vector<bool> seen(vocab.size(), false);
  for (const auto& [token, id] : vocab.items()) {
    const int64_t i = id.is_number_integer() ? id.get<int64_t>() : -1;
    if (i < 0 || i >= static_cast<int64_t>(tokens.size()) || seen[static_cast<size_t>(i)])
      throw UserError(
          fmt::format("tokenizer: {}: the vocab's ids are not 0..{} each once (token '{}' has {})",
                      file.source(), tokens.size() - 1, token, id.dump()));
    seen[static_cast<size_t>(i)] = true;
    tokens[static_cast<size_t>(i)] = token;
  }
  return tokens;
}

// The five special tokens are matched in raw text (tokenize()); the library does so for the added
// tokens it lists unnormalised, as whole strings: each of the five in the vocabulary must be
// listed so, with the vocabulary's id, or the two would tokenise a text with "[MASK]" apart.
void check_special_tokens_added(const TokenizerJson& file, const std::vector<std::string>& tokens) {
  std::map<std::string, const nlohmann::json*> added;
  const nlohmann::json& listed = TokenizerJson::member(file.root(), "added_tokens");
  if (listed.is_array())  // (pointers into the file's own list, which outlives them)
    for (const nlohmann::json& token : listed)
      if (token.is_object() && token.contains("content") && token["content"].is_string())
        added[token["content"].get<std::string>()] = &token;
  for (int64_t id = 0; id < static_cast<int64_t>(tokens.size()); ++id) {
    const std::string& token = tokens[static_cast<size_t>(id)];
    if (token != "[PAD]" && token != "[UNK]" && token != "[CLS]" && token != "[SEP]" &&
        token != "[MASK]")
      continue;
    const auto it = added.find(token);
    const nlohmann::json* entry = it == added.end() ? nullptr : it->second;
    auto flag = [&](const char* key) {
      return entry->contains(key) && (*entry)[key].is_boolean() && (*entry)[key].get<bool>();
    };
    if (entry == nullptr || !entry->contains("id") || !(*entry)["id"].is_number_integer() ||
        (*entry)["id"].get<int64_t>() != id || flag("normalized") || flag("single_word") ||
        flag("lstrip") || flag("rstrip"))
      throw UserError(fmt::format(
          "tokenizer: {}: {} is not among its added_tokens as BERT's are (id {}, normalized, "
          "single_word, lstrip and rstrip false), so a text that holds it would tokenise apart "
          "from the tokenizers library's; Trainyard reads the uncased BERT family's tokenizer.json",
          file.source(), token, id));
  }
}

}  // namespace

WordPieceTokenizer WordPieceTokenizer::from_tokenizer_json(const std::string& path) {
  return from_json(TokenizerJson::read(path));
}

WordPieceTokenizer WordPieceTokenizer::from_json(const TokenizerJson& file) {
  try {
    check_bert_tokenizer_json(file.root(), file.source());
  } catch (const nlohmann::json::exception& e) {  // a setting of another type than the library's
    throw UserError(
        fmt::format("tokenizer: {} is not a tokenizer.json the tokenizers library "
                    "writes: {}",
                    file.source(), e.what()));
  }
  std::vector<std::string> tokens = dense_vocab(file);
  check_special_tokens_added(file, tokens);
  return from_tokens(std::move(tokens), file.source());
}

std::string WordPieceTokenizer::cache_id() const {
  return fmt::format("{} vocab {}", kVersion, vocab_hash_);
}

std::string WordPieceTokenizer::framing() const {
  return fmt::format("framed as {} … {}, padded with {} (id {}) under an attention mask of 0",
                     tokens_.at(static_cast<size_t>(cls_id_)),
                     tokens_.at(static_cast<size_t>(sep_id_)),
                     tokens_.at(static_cast<size_t>(pad_id_)), pad_id_);
}

std::unique_ptr<TextTokenizer> load_text_tokenizer(const std::string& path) {
  if (std::filesystem::path(path).extension() != ".json")
    return std::make_unique<WordPieceTokenizer>(WordPieceTokenizer::from_vocab_file(path));
  const TokenizerJson file = TokenizerJson::read(path);  // read once, given to its model's reader
  if (file.model_type() == "BPE")
    return std::make_unique<ByteBpeTokenizer>(ByteBpeTokenizer::from_json(file));
  return std::make_unique<WordPieceTokenizer>(WordPieceTokenizer::from_json(file));
}

WordPieceTokenizer WordPieceTokenizer::from_file(const std::string& path) {
  if (std::filesystem::path(path).extension() == ".json") return from_tokenizer_json(path);
  return from_vocab_file(path);
}

std::vector<std::string> WordPieceTokenizer::normalize_and_split(std::string_view text) const {
  // 1. Clean and space out CJK, code point by code point (invalid UTF-8 reads as U+FFFD).
  icu::UnicodeString cleaned;
  const auto* bytes = reinterpret_cast<const uint8_t*>(text.data());
  const auto length = static_cast<int32_t>(text.size());
  for (int32_t i = 0; i < length;) {
    UChar32 c;
    U8_NEXT(bytes, i, length, c);
    if (c < 0) c = 0xFFFD;
    if (c == 0 || c == 0xFFFD || is_control(c)) continue;
    if (is_whitespace(c)) {
      cleaned.append(static_cast<UChar32>(' '));
    } else if (is_cjk(c)) {
      cleaned.append(static_cast<UChar32>(' ')).append(c).append(static_cast<UChar32>(' '));
    } else {
      cleaned.append(c);
    }
  }
  // 2. Strip accents: NFD, then drop non-spacing marks. 3. Lowercase.
  UErrorCode status = U_ZERO_ERROR;
  const icu::Normalizer2* nfd = icu::Normalizer2::getNFDInstance(status);
  icu::UnicodeString decomposed = nfd->normalize(cleaned, status);
  if (U_FAILURE(status)) decomposed = cleaned;
  // Lowercase code point by code point, as the tokenizers library does (Rust's
  // char::to_lowercase): without context, so a word-final capital sigma becomes σ, not the ς of
  // ICU's toLower (Unicode's Final_Sigma rule). The one lowercase mapping to more than one code
  // point, İ's, cannot occur here: NFD split it and its dot was dropped.
  icu::UnicodeString stripped;
  for (int32_t i = 0; i < decomposed.length(); i = decomposed.moveIndex32(i, 1)) {
    UChar32 c = decomposed.char32At(i);
    if (u_charType(c) != U_NON_SPACING_MARK) stripped.append(u_tolower(c));
  }

  // 4. Split on whitespace; punctuation characters are words of their own.
  std::vector<std::string> words;
  std::string word;
  auto flush = [&] {
    if (!word.empty()) words.push_back(std::move(word));
    word.clear();
  };
  for (int32_t i = 0; i < stripped.length(); i = stripped.moveIndex32(i, 1)) {
    UChar32 c = stripped.char32At(i);
    if (is_whitespace(c)) {
      flush();
    } else if (is_punctuation(c)) {
      flush();
      append_utf8(word, c);
      flush();
    } else {
      append_utf8(word, c);
    }
  }
  flush();
  return words;
}

void WordPieceTokenizer::wordpiece(const std::string& word, std::vector<std::string>& out) const {
  // Byte offsets of each character, so pieces are cut on character boundaries.
  std::vector<size_t> starts;
  const auto* bytes = reinterpret_cast<const uint8_t*>(word.data());
  for (int32_t i = 0; i < static_cast<int32_t>(word.size());) {
    starts.push_back(static_cast<size_t>(i));
    U8_FWD_1(bytes, i, static_cast<int32_t>(word.size()));
  }
  if (starts.size() > kMaxCharsPerWord) {
    out.push_back(tokens_[unk_id_]);
    return;
  }
  starts.push_back(word.size());
  std::vector<std::string> pieces;
  for (size_t start = 0; start + 1 < starts.size();) {
    size_t end = starts.size() - 1;
    std::string match;
    for (; end > start; --end) {
      std::string piece =
          (start > 0 ? "##" : "") + word.substr(starts[start], starts[end] - starts[start]);
      if (ids_.count(piece)) {
        match = std::move(piece);
        break;
      }
    }
    if (match.empty()) {  // no piece covers this position: the whole word is unknown
      out.push_back(tokens_[unk_id_]);
      return;
    }
    pieces.push_back(std::move(match));
    start = end;
  }
  out.insert(out.end(), pieces.begin(), pieces.end());
}

std::vector<std::string> WordPieceTokenizer::tokenize(std::string_view text) const {
  // Special tokens written in the text ("[SEP]", "[MASK]") are those tokens, as the tokenizers
  // library matches them: on the raw text, case-sensitive, anywhere, before normalisation (found by
  // the differential test against it).
  static const std::vector<std::string_view> kSpecial = {"[PAD]", "[UNK]", "[CLS]", "[SEP]",
                                                         "[MASK]"};
  std::vector<std::string> out;
  while (!text.empty()) {
    size_t at = std::string_view::npos;
    std::string_view special;
    for (std::string_view token : kSpecial) {
      const size_t found = text.find(token);
      if (found < at && ids_.count(std::string(token))) {
        at = found;
        special = token;
      }
    }
    for (const auto& word : normalize_and_split(text.substr(0, at))) wordpiece(word, out);
    if (at == std::string_view::npos) break;
    out.emplace_back(special);
    text.remove_prefix(at + special.size());
  }
  return out;
}

int64_t WordPieceTokenizer::id_of(const std::string& token) const {
  auto it = ids_.find(token);
  return it == ids_.end() ? unk_id_ : it->second;
}

Encoding WordPieceTokenizer::encode(std::string_view text, int64_t max_length, bool pad) const {
  Encoding e;
  e.input_ids.push_back(cls_id_);
  for (const auto& token : tokenize(text)) {
    if (static_cast<int64_t>(e.input_ids.size()) + 1 >= max_length) break;  // room for [SEP]
    e.input_ids.push_back(id_of(token));
  }
  e.input_ids.push_back(sep_id_);
  e.attention_mask.assign(e.input_ids.size(), 1);
  if (pad) {
    e.input_ids.resize(static_cast<size_t>(max_length), pad_id_);
    e.attention_mask.resize(static_cast<size_t>(max_length), 0);
  }
  return e;
}

}  // namespace trainyard
