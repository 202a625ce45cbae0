#include "components/text/byte_bpe.h"

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <fstream>
#include <memory>
#include <queue>
#include <sstream>

#include <fmt/format.h>
#include <unicode/uchar.h>
#include <unicode/utf8.h>
#include <nlohmann/json.hpp>

#include "common/text.h"
#include "components/text/tokenizer_json.h"
#include "trainyard/error.h"

namespace trainyard {

namespace {

using nlohmann::json;

// GPT-2's bytes_to_unicode: the printable bytes stand for themselves, the others (controls, space,
// 0x7F-0xA0, 0xAD) for U+0100 onwards in byte order, so that every byte is a visible character.
std::vector<std::string> byte_symbols() {
  std::vector<std::string> symbols(256);
  int next = 0;
  for (int b = 0; b < 256; ++b) {
    const bool printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
    const UChar32 c = printable ? b : 0x100 + next++;
    char buffer[U8_MAX_LENGTH];
    int32_t length = 0;
    U8_APPEND_UNSAFE(reinterpret_cast<uint8_t*>(buffer), length, c);  // c < U+0200: fits
    symbols[static_cast<size_t>(b)].assign(buffer, static_cast<size_t>(length));
  }
  return symbols;
}

// What GPT-2's pattern sees of a character.
enum class Kind { space, letter, number, other };

// From U+0080 on, the classes the tokenizers library's Oniguruma gives (its Unicode version, which
// is not necessarily the ICU's here): ranges of letters, numbers and spaces, sorted.
struct KindRange {
  UChar32 first, last;
  Kind kind;
};
constexpr KindRange kKindRanges[] = {
#include "components/text/gpt2_classes.inc"
};

Kind kind_of(UChar32 c) {
  if (c < 0) return Kind::other;  // bytes that are not UTF-8
  const auto* end = std::end(kKindRanges);
  const auto* range = std::upper_bound(std::begin(kKindRanges), end, c,
                                       [](UChar32 v, const KindRange& r) { return v < r.first; });
  if (range == std::begin(kKindRanges)) return Kind::other;
  --range;
  return c <= range->last ? range->kind : Kind::other;
}

// The character at text[i]: its kind and its length in bytes (an ill-formed sequence counts as one
// character of kind other). ASCII without ICU: most text is.
struct Char {
  Kind kind;
  int32_t length;
  UChar32 code;
};

Char char_at(std::string_view text, size_t i) {
  const auto byte = static_cast<unsigned char>(text[i]);
  if (byte < 0x80) {
    Kind kind = Kind::other;
    if (byte == ' ' || (byte >= '\t' && byte <= '\r'))
      kind = Kind::space;
    else if ((byte | 0x20) >= 'a' && (byte | 0x20) <= 'z')
      kind = Kind::letter;
    else if (byte >= '0' && byte <= '9')
      kind = Kind::number;
    return {kind, 1, byte};
  }
  // Read from a window of at most 4 bytes: no offsets beyond int32 (texts over 2 GiB).
  const auto* bytes = reinterpret_cast<const uint8_t*>(text.data()) + i;
  const auto available = static_cast<int32_t>(std::min<size_t>(text.size() - i, U8_MAX_LENGTH));
  int32_t length = 0;
  UChar32 c;
  U8_NEXT(bytes, length, available, c);
  return {kind_of(c), length, c};
}

// The character ending at text[end] (end > 0), read as char_at reads it.
Char char_before(std::string_view text, size_t end) {
  const size_t start = end > U8_MAX_LENGTH ? end - U8_MAX_LENGTH : 0;
  const auto* bytes = reinterpret_cast<const uint8_t*>(text.data()) + start;
  auto at = static_cast<int32_t>(end - start);
  UChar32 c;
  U8_PREV(bytes, 0, at, c);
  return {kind_of(c), static_cast<int32_t>(end - start) - at, c};
}

// Rust regex's \w, as the library's single_word check reads it: Alphabetic, marks, decimal
// numbers, connector punctuation, Join_Control.
bool is_word_char(UChar32 c) {
  if (c < 0) return false;
  if (u_hasBinaryProperty(c, UCHAR_ALPHABETIC) || u_hasBinaryProperty(c, UCHAR_JOIN_CONTROL))
    return true;
  switch (u_charType(c)) {
    case U_NON_SPACING_MARK:
    case U_ENCLOSING_MARK:
    case U_COMBINING_SPACING_MARK:
    case U_DECIMAL_DIGIT_NUMBER:
    case U_CONNECTOR_PUNCTUATION:
      return true;
    default:
      return false;
  }
}

bool is_space(UChar32 c) { return c >= 0 && u_hasBinaryProperty(c, UCHAR_WHITE_SPACE); }

// GPT-2's pattern over `text`: calls emit(start, end) for each match, in order; the matches cover
// the text. See the header for the pattern; each branch below is one of its alternatives.
template <typename Emit>
void split_gpt2(std::string_view text, Emit&& emit) {
  const size_t n = text.size();
  size_t i = 0;
  while (i < n) {
    const Char c = char_at(text, i);
    if (c.code == '\'' && i + 1 < n) {  // 's 't 're 've 'm 'll 'd (case-sensitive)
      const char a = text[i + 1], b = i + 2 < n ? text[i + 2] : '\0';
      size_t length = 0;
      if (a == 's' || a == 't' || a == 'm' || a == 'd')
        length = 2;
      else if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l'))
        length = 3;
      if (length > 0) {
        emit(i, i + length);
        i += length;
        continue;
      }
    }
    size_t start = i, j = i;
    Kind run = c.kind;
    if (c.code == ' ' && i + 1 < n) {  // ' ?' before a letter, number or other run
      const Char next = char_at(text, i + 1);
      if (next.kind != Kind::space) {
        run = next.kind;
        j = i + 1;
      }
    }
    if (run != Kind::space) {  // \p{L}+, \p{N}+ or [^\s\p{L}\p{N}]+
      while (j < n) {
        const Char d = char_at(text, j);
        if (d.kind != run) break;
        j += static_cast<size_t>(d.length);
      }
      emit(start, j);
      i = j;
      continue;
    }
    // Whitespace: \s+(?!\S) takes the run but its last character when a non-space follows (that
    // one then starts the next match: ' ' joins the word, any other stands alone); \s+ the
    // single character that is left before a non-space.
    size_t last = j;  // start of the run's last character
    while (j < n) {
      const Char d = char_at(text, j);
      if (d.kind != Kind::space) break;
      last = j;
      j += static_cast<size_t>(d.length);
    }
    const size_t end = (j < n && last > start) ? last : j;
    emit(start, end);
    i = end;
  }
}

// The per-thread cache of BPE results, by tokenizer (its serial) and word, as the library keeps.
struct BpeCache {
  static constexpr size_t kMaxEntries = 1 << 16;
  static constexpr size_t kMaxWordBytes = 256;
  std::unordered_map<std::string, std::vector<int32_t>> words;
};

BpeCache& cache_for(uint64_t serial) {
  thread_local std::unordered_map<uint64_t, BpeCache> caches;
  return caches[serial];
}

std::atomic<uint64_t> next_serial{1};

}  // namespace

// ---- reading tokenizer.json -------------------------------------------------------------------

namespace {

// Refuses a setting of `file` that this reader does not follow, naming it and what it reads.
[[noreturn]] void refuse(const TokenizerJson& file, const std::string& what) {
  throw UserError(fmt::format(
      "tokenizer: {}: {}; Trainyard reads byte-level BPE tokenizer.json files (GPT-2's, "
      "RoBERTa's and the like) and the uncased BERT family's WordPiece",
      file.source(), what));
}

const json& member(const json& object, const char* key) {
  return TokenizerJson::member(object, key);
}

std::string type_of(const json& section) { return TokenizerJson::type_of(section); }

// A setting that must be null, absent, false, 0 or "" (what the library does by default).
void require_unset(const TokenizerJson& file, const json& object, const char* key,
                   const char* why) {
  const json& value = member(object, key);
  const bool unset = value.is_null() || (value.is_boolean() && !value.get<bool>()) ||
                     (value.is_number() && value.get<double>() == 0) ||
                     (value.is_string() && value.get<std::string>().empty());
  if (!unset) refuse(file, fmt::format("its model sets {} to {} ({})", key, value.dump(), why));
}

}  // namespace

ByteBpeTokenizer ByteBpeTokenizer::from_tokenizer_json(const std::string& path) {
  return from_json(TokenizerJson::read(path));
}

ByteBpeTokenizer ByteBpeTokenizer::from_json_text(std::string_view text,
                                                  const std::string& source) {
  return from_json(TokenizerJson::parse(text, source));
}

ByteBpeTokenizer ByteBpeTokenizer::from_json(const TokenizerJson& file) {
  ByteBpeTokenizer t;
  t.vocab_hash_ = file.text_hash();
  t.serial_ = next_serial++;
  try {
    t.read_pipeline(file);
    t.read_vocab(file);
    t.read_merges(file);
    t.read_added_tokens(file);
    t.read_frame(file);
  } catch (const json::exception& e) {  // a setting of another JSON type than the library's
    throw UserError(
        fmt::format("tokenizer: {} is not a tokenizer.json the tokenizers library writes: {}",
                    file.source(), e.what()));
  }
  t.pad_id_ = t.token_id("<pad>") >= 0           ? t.token_id("<pad>")
              : !t.suffix_ids_.empty()           ? t.suffix_ids_.back()
              : t.token_id("<|endoftext|>") >= 0 ? t.token_id("<|endoftext|>")
                                                 : 0;
  return t;
}

void ByteBpeTokenizer::read_pipeline(const TokenizerJson& file) {
  const json& j = file.root();
  if (member(j, "version") != "1.0")
    refuse(file, fmt::format("its version is {}, not \"1.0\" (the one the tokenizers library "
                             "reads)",
                             member(j, "version").dump()));
  // Whole documents are tokenised: a length limit or padding the file sets would change them.
  for (const char* key : {"truncation", "padding"})
    if (!member(j, key).is_null())
      refuse(file, fmt::format("it sets {} ({}), which the tokenizers library applies to "
                               "every text; set it to null (Trainyard cuts and pads on its "
                               "own)",
                               key, member(j, key).dump()));
  // The model: BPE over byte symbols, nothing that changes its merges.
  const json& model = member(j, "model");
  if (type_of(model) != "BPE")
    refuse(file, fmt::format("its model is {}, not BPE", type_of(model)));
  require_unset(file, model, "dropout", "BPE dropout samples merges at random");
  require_unset(file, model, "continuing_subword_prefix", "not byte-level BPE");
  require_unset(file, model, "end_of_word_suffix", "not byte-level BPE");
  require_unset(file, model, "byte_fallback", "SentencePiece-style BPE, not byte-level");
  require_unset(file, model, "ignore_merges", "Llama 3's tokenizer; not implemented here");
  const json& normalizer = member(j, "normalizer");
  if (!normalizer.is_null())
    refuse(file, fmt::format("its normalizer is {}; byte-level BPE reads the text as it is",
                             type_of(normalizer)));
  const json& pre = member(j, "pre_tokenizer");
  if (type_of(pre) != "ByteLevel")
    refuse(file,
           fmt::format("its pre_tokenizer is {}, not ByteLevel (GPT-2's split)", type_of(pre)));
  if (pre.contains("use_regex") && !pre["use_regex"].get<bool>())
    refuse(file, "its ByteLevel pre_tokenizer has use_regex false (no GPT-2 split)");
  if (!member(pre, "add_prefix_space").is_boolean())
    refuse(file, "its ByteLevel pre_tokenizer does not say add_prefix_space");
  add_prefix_space_ = pre["add_prefix_space"].get<bool>();
  const json& decoder = member(j, "decoder");
  if (type_of(decoder) != "ByteLevel")
    refuse(file, fmt::format("its decoder is {}, not ByteLevel", type_of(decoder)));
}

int32_t ByteBpeTokenizer::place(const TokenizerJson& file, const std::string& token,
                                const json& id_json, const char* where) {
  const int64_t vocab_count =
      static_cast<int64_t>(member(member(file.root(), "model"), "vocab").size());
  const int64_t id = id_json.is_number_integer() ? id_json.get<int64_t>() : -1;
  if (id < 0 || id >= (int64_t{1} << 31) - 1)
    refuse(file, fmt::format("{} gives '{}' the id {}, not an id", where, token, id_json.dump()));
  if (static_cast<size_t>(id) >= tokens_.size()) {
    if (id > vocab_count + (int64_t{1} << 20))
      refuse(file, fmt::format("{} gives '{}' the id {}, far beyond its {} tokens", where, token,
                               id, vocab_count));
    tokens_.resize(static_cast<size_t>(id) + 1);
  }
  tokens_[static_cast<size_t>(id)] = token;
  return static_cast<int32_t>(id);
}

void ByteBpeTokenizer::read_vocab(const TokenizerJson& file) {
  // Ids may leave holes (vocab_size is the largest + 1).
  const json& vocab = member(member(file.root(), "model"), "vocab");
  if (!vocab.is_object() || vocab.empty()) refuse(file, "its model has no vocab");
  for (const auto& [token, id] : vocab.items()) ids_[token] = place(file, token, id, "its vocab");
  const std::vector<std::string> symbols = byte_symbols();
  for (int b = 0; b < 256; ++b) {
    const auto it = ids_.find(symbols[static_cast<size_t>(b)]);
    if (it == ids_.end())
      refuse(file, fmt::format("its vocab lacks the byte 0x{:02X} ('{}'), so it is not "
                               "byte-level: every byte must be a token",
                               b, symbols[static_cast<size_t>(b)]));
    byte_ids_[b] = it->second;
  }
}

void ByteBpeTokenizer::read_merges(const TokenizerJson& file) {
  // "a b" or ["a", "b"], in rank order; a pair listed twice takes its later rank. (A merges.txt's
  // "#version" line has no place here: the library refuses it too.)
  const json& merges = member(member(file.root(), "model"), "merges");
  if (!merges.is_array()) refuse(file, "its model has no merges list");
  int32_t rank = 0;
  for (const json& merge : merges) {
    std::string left, right;
    if (merge.is_string()) {
      const std::string line = merge.get<std::string>();
      const size_t space = line.find(' ');
      if (space == std::string::npos || line.find(' ', space + 1) != std::string::npos)
        refuse(file,
               fmt::format("merge {} ('{}') is not two tokens with a space between", rank, line));
      left = line.substr(0, space);
      right = line.substr(space + 1);
    } else if (merge.is_array() && merge.size() == 2 && merge[0].is_string() &&
               merge[1].is_string()) {
      left = merge[0].get<std::string>();
      right = merge[1].get<std::string>();
    } else {
      refuse(file,
             fmt::format("merge {} is {}, not \"a b\" or [\"a\", \"b\"]", rank, merge.dump()));
    }
    const auto a = ids_.find(left), b = ids_.find(right), ab = ids_.find(left + right);
    for (const auto& [found, token] : {std::pair{a, left}, {b, right}, {ab, left + right}})
      if (found == ids_.end())
        refuse(file, fmt::format("merge {} ('{} {}') has '{}', which is not in its vocab", rank,
                                 left, right, token));
    const uint64_t key = (static_cast<uint64_t>(a->second) << 32) | uint32_t(b->second);
    merges_[key] = Merge{rank, ab->second};
    ++rank;
  }
}

void ByteBpeTokenizer::read_added_tokens(const TokenizerJson& file) {
  // Their own ids, matched in the text before it is split.
  const json& added = member(file.root(), "added_tokens");
  if (!added.is_null() && !added.is_array()) refuse(file, "its added_tokens is not a list");
  // The library gives an added token its vocab id, else the next after the vocabulary's size (or
  // after the largest added id beyond it), in the list's order, whatever the file says: a file
  // whose ids are not those is refused (ids would differ). A token listed twice keeps its first id
  // and takes its last settings.
  const auto vocab_count =
      static_cast<int64_t>(member(member(file.root(), "model"), "vocab").size());
  int64_t largest_added = -1;
  for (const json& entry : added.is_array() ? added : json::array()) {
    if (!entry.is_object() || !entry.contains("content") || !entry["content"].is_string())
      refuse(file, fmt::format("an added token is {}, without its content", entry.dump()));
    AddedToken token;
    token.content = entry["content"].get<std::string>();
    if (token.content.empty()) continue;  // the library ignores it
    for (const char* key : {"single_word", "lstrip", "rstrip", "normalized", "special"})
      if (!member(entry, key).is_boolean())
        refuse(file, fmt::format("the added token '{}' does not say {} (true or false)",
                                 token.content, key));
    token.single_word = entry["single_word"].get<bool>();
    token.lstrip = entry["lstrip"].get<bool>();
    token.rstrip = entry["rstrip"].get<bool>();
    token.normalized = entry["normalized"].get<bool>();
    const auto known = ids_.find(token.content);
    const int64_t expected = known != ids_.end()                                ? known->second
                             : largest_added >= vocab_count || vocab_count == 0 ? largest_added + 1
                                                                                : vocab_count;
    const json& id = member(entry, "id");
    if (!id.is_number_integer() || id.get<int64_t>() != expected)
      refuse(file,
             fmt::format(
                 "the added token '{}' has the id {}, where the tokenizers library gives it {}",
                 token.content, id.dump(), expected));
    token.id = place(file, token.content, id, "its added_tokens");
    largest_added = std::max<int64_t>(largest_added, token.id);
    ids_[token.content] = token.id;
    const auto listed = std::find_if(added_.begin(), added_.end(), [&](const AddedToken& a) {
      return a.content == token.content;
    });
    if (listed != added_.end())
      *listed = std::move(token);
    else
      added_.push_back(std::move(token));
  }
}

void ByteBpeTokenizer::read_frame(const TokenizerJson& file) {
  // The post-processor's special tokens around a single text.
  const json& post = member(file.root(), "post_processor");
  const std::string post_type = type_of(post);
  auto id_of_special = [&](const std::string& token) -> int64_t {
    const auto it = ids_.find(token);
    if (it == ids_.end())
      refuse(file, fmt::format("its post_processor adds '{}', which it has no id for", token));
    return it->second;
  };
  auto first_of_pair = [&](const json& pair, const char* key) {  // ["<s>", 0]
    if (!pair.is_array() || pair.size() != 2 || !pair[0].is_string())
      refuse(file, fmt::format("its {}'s {} is not [token, id]", post_type, key));
    const int64_t id = id_of_special(pair[0].get<std::string>());
    if (!pair[1].is_number_integer() || pair[1].get<int64_t>() != id)
      refuse(file, fmt::format("its {}'s {} {} disagrees with the vocab's id {}", post_type, key,
                               pair.dump(), id));
    return id;
  };
  if (post_type == "RobertaProcessing" || post_type == "BertProcessing") {
    prefix_ids_ = {first_of_pair(member(post, "cls"), "cls")};
    suffix_ids_ = {first_of_pair(member(post, "sep"), "sep")};
  } else if (post_type == "TemplateProcessing") {
    read_template(file, post);
  } else if (post_type != "none" && post_type != "ByteLevel") {
    refuse(file, fmt::format("its post_processor is {}; Trainyard frames a text as ByteLevel, "
                             "RobertaProcessing, BertProcessing or TemplateProcessing do",
                             post_type));
  }
}

void ByteBpeTokenizer::read_template(const TokenizerJson& file, const json& post) {
  // The single template: special tokens around one sequence A, each special token's ids in the
  // vocabulary.
  const json& single = member(post, "single");
  const json& specials = member(post, "special_tokens");
  bool seen_sequence = false;
  for (const json& piece : single.is_array() ? single : json::array()) {
    if (piece.contains("Sequence")) {
      if (seen_sequence || member(piece["Sequence"], "id") != "A")
        refuse(file, "its TemplateProcessing's single template is not one sequence A");
      seen_sequence = true;
      continue;
    }
    const std::string name = member(member(piece, "SpecialToken"), "id").is_string()
                                 ? piece["SpecialToken"]["id"].get<std::string>()
                                 : "";
    const json& ids = member(member(specials, name.c_str()), "ids");
    if (name.empty() || !ids.is_array())
      refuse(file, fmt::format("its TemplateProcessing's piece {} is not a special token "
                               "it lists",
                               piece.dump()));
    for (const json& id : ids) {
      if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() >= vocab_size())
        refuse(file, fmt::format("its TemplateProcessing's '{}' has the id {}, outside "
                                 "the vocabulary",
                                 name, id.dump()));
      (seen_sequence ? suffix_ids_ : prefix_ids_).push_back(id.get<int64_t>());
    }
  }
  if (!seen_sequence) refuse(file, "its TemplateProcessing's single template has no sequence A");
}

std::string ByteBpeTokenizer::framing() const {
  std::vector<std::string> framed;  // "<s> … </s>"
  for (int64_t id : prefix_ids_) framed.push_back(tokens_.at(static_cast<size_t>(id)));
  framed.push_back("…");
  for (int64_t id : suffix_ids_) framed.push_back(tokens_.at(static_cast<size_t>(id)));
  const std::string frame = prefix_ids_.empty() && suffix_ids_.empty()
                                ? "not framed (its post-processor adds no tokens)"
                                : "framed as " + join(framed, " ");
  const std::string why = token_id("<pad>") >= 0 ? ""
                          : !suffix_ids_.empty() ? ": it has no <pad>, so the frame's last token"
                          : pad_id_ == token_id("<|endoftext|>")
                              ? ": it has no <pad>, so <|endoftext|>, as transformers users set "
                                "GPT-2's"
                              : ": it has no <pad> and no end token";
  return fmt::format("{}, padded with {} (id {}{}) under an attention mask of 0", frame,
                     tokens_.at(static_cast<size_t>(pad_id_)), pad_id_, why);
}

// ---- encoding ---------------------------------------------------------------------------------

std::string ByteBpeTokenizer::cache_id() const {
  return fmt::format("byte-bpe {} {}", kVersion, vocab_hash_);
}

int64_t ByteBpeTokenizer::token_id(std::string_view token) const {
  const auto it = ids_.find(std::string(token));
  return it == ids_.end() ? -1 : it->second;
}

void ByteBpeTokenizer::split_added(std::string_view text, bool normalized,
                                   std::vector<Piece>& out) const {
  // Leftmost-longest matches of this pass's tokens, each search going on after the last match
  // (kept or not), as the library's Aho-Corasick iterator; next[k] caches token k's next place.
  std::vector<const AddedToken*> tokens;
  for (const AddedToken& token : added_)
    if (token.normalized == normalized) tokens.push_back(&token);
  if (tokens.empty()) {
    out.push_back({text, -1});
    return;
  }
  std::vector<size_t> next(tokens.size(), 0);
  for (size_t k = 0; k < tokens.size(); ++k) next[k] = text.find(tokens[k]->content);
  size_t search = 0, start_offset = 0;
  while (true) {
    const AddedToken* match = nullptr;
    size_t at = std::string_view::npos;
    for (size_t k = 0; k < tokens.size(); ++k) {
      if (next[k] != std::string_view::npos && next[k] < search)
        next[k] = text.find(tokens[k]->content, search);
      if (next[k] < at || (next[k] == at && next[k] != std::string_view::npos &&
                           tokens[k]->content.size() > match->content.size())) {
        at = next[k];
        match = tokens[k];
      }
    }
    if (match == nullptr) break;
    size_t start = at, stop = at + match->content.size();
    search = stop;
    if (match->single_word) {
      const bool space_before = start == 0 || !is_word_char(char_before(text, start).code);
      const bool space_after = stop == text.size() || !is_word_char(char_at(text, stop).code);
      if (!space_before || !space_after) continue;
    }
    if (match->lstrip) {  // the spaces before it are its own (none an earlier match took)
      size_t left = start;
      while (left > start_offset) {
        const Char before = char_before(text, left);
        if (!is_space(before.code)) break;
        left -= static_cast<size_t>(before.length);
      }
      start = std::max(left, start_offset);
    }
    if (match->rstrip)
      while (stop < text.size() && is_space(char_at(text, stop).code))
        stop += static_cast<size_t>(char_at(text, stop).length);
    if (start_offset < start) out.push_back({text.substr(start_offset, start - start_offset), -1});
    out.push_back({text.substr(start, stop - start), match->id});
    start_offset = stop;
  }
  if (start_offset < text.size()) out.push_back({text.substr(start_offset), -1});
}

void ByteBpeTokenizer::bpe(std::string_view word, std::vector<int32_t>& out) const {
  BpeCache& cache = cache_for(serial_);
  if (word.size() <= BpeCache::kMaxWordBytes) {
    const auto hit = cache.words.find(std::string(word));
    if (hit != cache.words.end()) {
      out.insert(out.end(), hit->second.begin(), hit->second.end());
      return;
    }
  }
  // The library's Word::merge_all: symbols in a linked list, candidate merges in a heap by rank,
  // then position; a candidate is taken only if its pair is still there.
  struct Symbol {
    int32_t id;
    int32_t prev, next;
    bool alive;
  };
  std::vector<Symbol> symbols(word.size());
  for (size_t i = 0; i < word.size(); ++i)
    symbols[i] = {byte_ids_[static_cast<unsigned char>(word[i])], static_cast<int32_t>(i) - 1,
                  i + 1 < word.size() ? static_cast<int32_t>(i) + 1 : -1, true};
  struct Candidate {
    int32_t rank, pos, id;
    bool operator>(const Candidate& o) const {
      return rank != o.rank ? rank > o.rank : pos > o.pos;
    }
  };
  std::priority_queue<Candidate, std::vector<Candidate>, std::greater<Candidate>> queue;
  auto merge_of = [&](int32_t left, int32_t right) -> const Merge* {
    const auto it = merges_.find((static_cast<uint64_t>(left) << 32) | uint32_t(right));
    return it == merges_.end() ? nullptr : &it->second;
  };
  for (size_t i = 0; i + 1 < word.size(); ++i)
    if (const Merge* m = merge_of(symbols[i].id, symbols[i + 1].id))
      queue.push({m->rank, static_cast<int32_t>(i), m->id});
  while (!queue.empty()) {
    const Candidate top = queue.top();
    queue.pop();
    Symbol& left = symbols[static_cast<size_t>(top.pos)];
    if (!left.alive || left.next < 0) continue;
    Symbol& right = symbols[static_cast<size_t>(left.next)];
    const Merge* now = merge_of(left.id, right.id);
    if (now == nullptr || now->id != top.id) continue;
    left.id = top.id;
    right.alive = false;
    left.next = right.next;
    if (left.next >= 0) symbols[static_cast<size_t>(left.next)].prev = top.pos;
    if (left.prev >= 0)
      if (const Merge* m = merge_of(symbols[static_cast<size_t>(left.prev)].id, left.id))
        queue.push({m->rank, left.prev, m->id});
    if (left.next >= 0)
      if (const Merge* m = merge_of(left.id, symbols[static_cast<size_t>(left.next)].id))
        queue.push({m->rank, top.pos, m->id});
  }
  const size_t first = out.size();
  for (const Symbol& s : symbols)
    if (s.alive) out.push_back(s.id);
  if (word.size() <= BpeCache::kMaxWordBytes) {
    if (cache.words.size() >= BpeCache::kMaxEntries) cache.words.clear();
    cache.words.emplace(std::string(word), std::vector<int32_t>(out.begin() + first, out.end()));
  }
}

void ByteBpeTokenizer::encode_piece(std::string_view piece, bool prefix_space,
                                    std::vector<int32_t>& out) const {
  if (prefix_space && add_prefix_space_ && piece.front() != ' ') {
    std::string spaced = " ";
    spaced += piece;
    split_gpt2(spaced, [&](size_t start, size_t end) {
      bpe(std::string_view(spaced).substr(start, end - start), out);
    });
    return;
  }
  split_gpt2(piece, [&](size_t start, size_t end) { bpe(piece.substr(start, end - start), out); });
}

void ByteBpeTokenizer::encode_ordinary(std::string_view text, std::vector<int32_t>& out,
                                       bool continues) const {
  std::vector<Piece> raw, pieces;
  split_added(text, /*normalized=*/false, raw);
  for (const Piece& piece : raw) {
    if (piece.id >= 0)
      pieces.push_back(piece);
    else
      split_added(piece.text, /*normalized=*/true, pieces);
  }
  for (const Piece& piece : pieces) {
    if (piece.id >= 0) {
      out.push_back(piece.id);
    } else if (!piece.text.empty()) {
      // The first piece of a continued text is no piece's start: no prefix space.
      const bool starts = !(continues && piece.text.data() == text.data());
      encode_piece(piece.text, starts, out);
    }
  }
}

std::vector<int64_t> ByteBpeTokenizer::encode(std::string_view text) const {
  std::vector<int32_t> ids;
  encode_ordinary(text, ids);
  std::vector<int64_t> framed(prefix_ids_);
  framed.insert(framed.end(), ids.begin(), ids.end());
  framed.insert(framed.end(), suffix_ids_.begin(), suffix_ids_.end());
  return framed;
}

Encoding ByteBpeTokenizer::encode(std::string_view text, int64_t max_length, bool pad) const {
  std::vector<int32_t> ids;
  encode_ordinary(text, ids);
  const int64_t frame = static_cast<int64_t>(prefix_ids_.size() + suffix_ids_.size());
  const int64_t room = std::max<int64_t>(0, max_length - frame);
  if (static_cast<int64_t>(ids.size()) > room) ids.resize(static_cast<size_t>(room));
  Encoding e;
  e.input_ids = prefix_ids_;
  e.input_ids.insert(e.input_ids.end(), ids.begin(), ids.end());
  e.input_ids.insert(e.input_ids.end(), suffix_ids_.begin(), suffix_ids_.end());
  e.attention_mask.assign(e.input_ids.size(), 1);
  if (pad && static_cast<int64_t>(e.input_ids.size()) < max_length) {
    e.input_ids.resize(static_cast<size_t>(max_length), pad_id_);
    e.attention_mask.resize(static_cast<size_t>(max_length), 0);
  }
  return e;
}

std::string ByteBpeTokenizer::decode(const std::vector<int64_t>& ids) const {
  static const std::unordered_map<std::string, char> byte_of = [] {
    std::unordered_map<std::string, char> map;
    const std::vector<std::string> symbols = byte_symbols();
    for (int b = 0; b < 256; ++b) map[symbols[static_cast<size_t>(b)]] = static_cast<char>(b);
    return map;
  }();
  std::string text;
  for (const int64_t id : ids) {
    if (id < 0 || id >= vocab_size())
      throw UserError(fmt::format("tokenizer: cannot decode the id {}: the vocabulary has {}", id,
                                  vocab_size()));
    const std::string& token = tokens_[static_cast<size_t>(id)];
    // Each character back to its byte; a token with a character that is no byte symbol (an
    // added token's text) is its own UTF-8, as the library's ByteLevel decoder does.
    std::string bytes;
    bool symbols = true;
    for (size_t i = 0; i < token.size() && symbols;) {
      const size_t length = static_cast<size_t>(char_at(token, i).length);
      const auto it = byte_of.find(token.substr(i, length));
      if (it == byte_of.end())
        symbols = false;
      else
        bytes += it->second;
      i += length;
    }
    text += symbols ? bytes : token;
  }
  return text;
}

size_t ByteBpeTokenizer::next_cut(std::string_view text, size_t from) const {
  for (const AddedToken& token : added_)
    if (token.content.find('\n') != std::string::npos) return text.size();
  for (size_t p = text.find('\n', from == 0 ? 0 : from - 1); p != std::string_view::npos;
       p = text.find('\n', p + 1)) {
    const size_t cut = p + 1;
    if (p == 0 || cut >= text.size() || cut < from) continue;
    if (is_space(char_before(text, p).code) || char_at(text, cut).kind == Kind::space) continue;
    // An lstrip token starting here would take the newline in the whole text; a token ending just
    // before the newline would leave it a piece of its own there (a prefix space, an rstrip).
    bool token_here = false;
    for (const AddedToken& token : added_)
      token_here |= (token.lstrip && text.substr(cut).rfind(token.content, 0) == 0) ||
                    text.substr(0, p).ends_with(token.content);
    if (!token_here) return cut;
  }
  return text.size();
}

}  // namespace trainyard
