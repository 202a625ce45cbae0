#include "components/text/wordpiece.h"

#include <fstream>
#include <sstream>

#include <fmt/format.h>
#include <unicode/normalizer2.h>
#include <unicode/uchar.h>
#include <unicode/unistr.h>
#include <unicode/utf8.h>

#include "common/error.h"
#include "common/text.h"

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
  if (!in) throw UserError(fmt::format("tokenizer: cannot read vocabulary {}", path));
  WordPieceTokenizer t;
  std::string line, all;
  for (int64_t number = 1; std::getline(in, line); ++number) {
    while (!line.empty() && (line.back() == '\r' || line.back() == '\n')) line.pop_back();
    auto [it, inserted] = t.ids_.emplace(line, number - 1);
    if (!inserted)
      throw UserError(
          fmt::format("tokenizer: vocabulary {} line {} repeats token '{}' (first on line {}); "
                      "is this a BERT vocab.txt?",
                      path, number, line, it->second + 1));
    t.tokens_.push_back(line);
    all += line + "\n";
  }
  if (t.tokens_.empty()) throw UserError(fmt::format("tokenizer: vocabulary {} is empty", path));
  for (auto [name, id] : {std::pair{"[PAD]", &t.pad_id_},
                          {"[UNK]", &t.unk_id_},
                          {"[CLS]", &t.cls_id_},
                          {"[SEP]", &t.sep_id_}}) {
    auto it = t.ids_.find(name);
    if (it == t.ids_.end())
      throw UserError(fmt::format(
          "tokenizer: vocabulary {} has no {} token; a BERT vocab.txt has [PAD], [UNK], "
          "[CLS] and [SEP]",
          path, name));
    *id = it->second;
  }
  t.vocab_hash_ = stable_hash(all);
  return t;
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
