// The tokenizer gives Hugging Face BertTokenizerFast's ids on the fixture corpus (accents, CJK,
// emoji, <br />, long words, blank lines), and clear errors for bad vocabularies.
#include <gtest/gtest.h>

#include <fstream>

#include <unicode/uchar.h>
#include <unicode/utf8.h>
#include <nlohmann/json.hpp>

#include "components/text/tokenizer_json.h"
#include "components/text/wordpiece.h"
#include "tests/test_support.h"
#include "trainyard/error.h"

namespace trainyard {
namespace {

std::string fixture(const std::string& name) {
  return std::string(TRAINYARD_SOURCE_DIR) + "/tests/fixtures/" + name;
}

TEST(WordPieceTest, MatchesBertTokenizerFastOnTheFixtureCorpus) {
  WordPieceTokenizer tokenizer = WordPieceTokenizer::from_vocab_file(fixture("vocab.txt"));
  std::ifstream in(fixture("tokenized.json"));
  nlohmann::json reference = nlohmann::json::parse(in);
  const int64_t max_length = reference["max_length"];
  ASSERT_GE(reference["cases"].size(), 15u);
  for (const auto& c : reference["cases"]) {
    Encoding e = tokenizer.encode(c["text"].get<std::string>(), max_length, /*pad=*/true);
    EXPECT_EQ(e.input_ids, c["input_ids"].get<std::vector<int64_t>>()) << c["text"];
    EXPECT_EQ(e.attention_mask, c["attention_mask"].get<std::vector<int64_t>>()) << c["text"];
  }
}

// Differential: 400 generated texts nobody chose (every script, case pairs, combining marks,
// controls and format characters, every whitespace, symbols, markup, over-long words), tokenized by
// the `tokenizers` library's BertWordPieceTokenizer (fixtures/make_wordpiece_differential.py).
void expect_matches_the_differential(const WordPieceTokenizer& tokenizer) {
  std::ifstream in(fixture("wordpiece_differential.json"));
  nlohmann::json reference = nlohmann::json::parse(in);
  const int64_t max_length = reference["max_length"];
  ASSERT_GE(reference["cases"].size(), 300u);
  // The one difference left is of Unicode versions: a code point assigned since Unicode 14 (say
  // U+08CA, a combining mark, which NFD then drops) is unassigned to the library's older tables and
  // becomes [UNK] there. Such texts are left out, and counted.
  auto newer_than_unicode_13 = [](const std::string& text) {
    const auto* bytes = reinterpret_cast<const uint8_t*>(text.data());
    for (int32_t i = 0, n = static_cast<int32_t>(text.size()); i < n;) {
      UChar32 c;
      U8_NEXT(bytes, i, n, c);
      UVersionInfo age;
      u_charAge(c, age);
      if (c >= 0 && age[0] >= 14) return true;
    }
    return false;
  };
  int differences = 0, newer = 0;
  for (const auto& c : reference["cases"]) {
    const std::string text = c["text"].get<std::string>();
    if (newer_than_unicode_13(text)) {
      ++newer;
      continue;
    }
    const Encoding e = tokenizer.encode(text, max_length, /*pad=*/true);
    if (e.input_ids == c["input_ids"].get<std::vector<int64_t>>()) continue;
    if (++differences > 10) continue;  // the first ten say enough
    ADD_FAILURE() << "text " << nlohmann::json(text).dump() << "\n ours   "
                  << nlohmann::json(e.input_ids).dump() << "\n theirs " << c["input_ids"].dump();
  }
  EXPECT_EQ(differences, 0);
  EXPECT_LT(newer, 20);  // most cases are compared
}

TEST(WordPieceTest, MatchesTheTokenizersLibraryOnGeneratedText) {
  expect_matches_the_differential(WordPieceTokenizer::from_vocab_file(fixture("vocab.txt")));
}

// The same vocabulary as Hugging Face tokenizer.json files the tokenizers library wrote (with
// BertProcessing, and with distilbert-base-uncased's TemplateProcessing): the library gives the
// differential texts the same ids from them (fixtures/make_tokenizer_json_fixture.py checks), and
// so does the tokenizer read from them; the vocabulary hashes as the vocab.txt's (one token cache).
TEST(WordPieceTest, ReadsTheTokenizerJsonOfTheUncasedBertFamily) {
  const std::string vocab_hash =
      WordPieceTokenizer::from_vocab_file(fixture("vocab.txt")).vocab_hash();
  for (const char* name : {"tokenizer_bert.json", "tokenizer_template.json"}) {
    SCOPED_TRACE(name);
    const WordPieceTokenizer tokenizer = WordPieceTokenizer::from_file(fixture(name));
    EXPECT_EQ(tokenizer.vocab_hash(), vocab_hash);
    expect_matches_the_differential(tokenizer);
  }
}

// Another tokenizer type, or a setting the tokenizer here does not follow, is refused by name.
TEST(WordPieceTest, RefusesOtherTokenizerJsonsNamingWhat) {
  auto refusal = [](const std::string& path) {
    try {
      WordPieceTokenizer::from_tokenizer_json(path);
    } catch (const UserError& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  EXPECT_NE(refusal(fixture("tokenizer_bpe.json")).find("its model is BPE, not WordPiece"),
            std::string::npos);
  EXPECT_NE(refusal(fixture("tokenizer_cased.json")).find("does not lowercase (a cased model)"),
            std::string::npos);
  testing::TempDir dir;
  std::ifstream in(fixture("tokenizer_template.json"));
  const std::string original((std::istreambuf_iterator<char>(in)),
                             std::istreambuf_iterator<char>());
  std::string json = original;
  const std::string lowercase = "\"lowercase\": true";
  json.replace(json.find(lowercase), lowercase.size(), "\"lowercase\": \"yes\"");
  EXPECT_NE(refusal(dir.write("typed.json", json))
                .find("is not a tokenizer.json the tokenizers library writes"),
            std::string::npos);
  std::string unlisted = original;  // [MASK] normalised: the library would not match it in text
  const std::string mask = "\"content\": \"[MASK]\",";
  const size_t at = unlisted.find("\"normalized\": false", unlisted.find(mask));
  unlisted.replace(at, std::string("\"normalized\": false").size(), "\"normalized\": true");
  EXPECT_NE(refusal(dir.write("unlisted.json", unlisted))
                .find("[MASK] is not among its added_tokens as BERT's are"),
            std::string::npos);
  EXPECT_NE(refusal(dir.write("list.json", "[1, 2]")).find("is not a JSON object"),
            std::string::npos);
  // A count written as a float too large for any integer (the fuzzer's find): refused, not cast.
  for (const char* count : {"1e300", "100.0", "\"100\""}) {
    std::string huge = original;
    const std::string max_chars = "\"max_input_chars_per_word\": 100";
    huge.replace(huge.find(max_chars), max_chars.size(),
                 std::string("\"max_input_chars_per_word\": ") + count);
    EXPECT_NE(refusal(dir.write("huge.json", huge)).find("max_input_chars_per_word is not 100"),
              std::string::npos)
        << count;
  }
}

// A word-final capital sigma: the library lowercases it without context, to σ ("ΜΑΤΟΣ:" is μα ##το
// ##σ :), where Unicode's Final_Sigma rule (ICU's toLower) gives ς and μα ##τος. Chosen texts, with
// a vocabulary that tells the two apart (fixtures/make_wordpiece_differential.py).
TEST(WordPieceTest, LowercasesAWordFinalSigmaAsTheTokenizersLibraryDoes) {
  std::ifstream in(fixture("wordpiece_differential.json"));
  const nlohmann::json sigma = nlohmann::json::parse(in)["sigma"];
  WordPieceTokenizer tokenizer =
      WordPieceTokenizer::from_vocab_file(fixture(sigma["vocab"].get<std::string>()));
  ASSERT_GE(sigma["cases"].size(), 8u);
  for (const auto& c : sigma["cases"]) {
    const std::string text = c["text"].get<std::string>();
    EXPECT_EQ(tokenizer.encode(text, 48, /*pad=*/true).input_ids,
              c["input_ids"].get<std::vector<int64_t>>())
        << text;
  }
  const std::vector<std::string> tokens = tokenizer.tokenize("ΜΑΤΟΣ:");
  EXPECT_EQ(tokens, (std::vector<std::string>{"μα", "##το", "##σ", ":"}));
}

TEST(WordPieceTest, NormalisesAndSplits) {
  WordPieceTokenizer tokenizer = WordPieceTokenizer::from_vocab_file(fixture("vocab.txt"));
  auto tokens = tokenizer.tokenize("Crème\t(café)");
  ASSERT_FALSE(tokens.empty());
  EXPECT_EQ(tokens.front().substr(0, 2), "cr");  // lowercased, accent stripped
  EXPECT_EQ(std::count(tokens.begin(), tokens.end(), "("), 1);
  EXPECT_EQ(tokenizer.tokenize("中文").size(), 2u);  // each ideograph is a word
  EXPECT_TRUE(tokenizer.tokenize("   ").empty());
  EXPECT_EQ(tokenizer.tokenize(std::string(101, 'a')), (std::vector<std::string>{"[UNK]"}));
}

TEST(WordPieceTest, InvalidUtf8IsDroppedNotFatal) {
  WordPieceTokenizer tokenizer = WordPieceTokenizer::from_vocab_file(fixture("vocab.txt"));
  EXPECT_EQ(tokenizer.tokenize("the\xff\xfe movie"), tokenizer.tokenize("the movie"));
}

TEST(WordPieceTest, DynamicEncodingIsNotPadded) {
  WordPieceTokenizer tokenizer = WordPieceTokenizer::from_vocab_file(fixture("vocab.txt"));
  Encoding e = tokenizer.encode("the movie", 64, /*pad=*/false);
  EXPECT_LT(e.input_ids.size(), 10u);
  EXPECT_EQ(e.input_ids.size(), e.attention_mask.size());
  Encoding empty = tokenizer.encode("", 64, false);
  EXPECT_EQ(empty.input_ids.size(), 2u);  // [CLS] [SEP]
}

TEST(WordPieceTest, BadVocabularies) {
  testing::TempDir dir;
  auto error_of = [&](const std::string& text) {
    try {
      WordPieceTokenizer::from_vocab_file(dir.write("vocab.txt", text));
    } catch (const UserError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(error_of("").find("is empty"), std::string::npos);
  EXPECT_NE(error_of("[PAD]\n[UNK]\n[CLS]\nthe\nthe\n")
                .find("line 5 repeats token 'the' (first on line 4)"),
            std::string::npos);
  EXPECT_NE(error_of("[PAD]\n[UNK]\n[CLS]\nthe\n").find("has no [SEP] token"), std::string::npos);
  try {
    WordPieceTokenizer::from_vocab_file((dir.path() / "absent.txt").string());
    FAIL();
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("cannot read vocabulary"), std::string::npos);
  }
  // A device's lines never end (its size says 0): neither file is read from one.
  try {
    WordPieceTokenizer::from_vocab_file("/dev/zero");
    FAIL();
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("cannot read vocabulary /dev/zero"), std::string::npos);
  }
  try {
    TokenizerJson::read("/dev/zero");
    FAIL();
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("/dev/zero goes on past 268435456 bytes"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace trainyard

namespace trainyard {
namespace {

// What the differential test found, each as its own case.
TEST(WordPieceTest, DifferencesFoundAgainstTheTokenizersLibrary) {
  WordPieceTokenizer tokenizer = WordPieceTokenizer::from_vocab_file(fixture("vocab.txt"));
  // A special token written in the text is that token, anywhere, case-sensitive.
  EXPECT_EQ(tokenizer.tokenize("the[SEP]movie [MASK]"),
            (std::vector<std::string>{"the", "[SEP]", "movie", "[MASK]"}));
  EXPECT_NE(tokenizer.tokenize("[sep]"), (std::vector<std::string>{"[SEP]"}));
  // An unassigned code point (U+0C4F) is kept, and unknown; a format character (U+200B) and a
  // private-use one (U+E000) are dropped.
  EXPECT_EQ(tokenizer.tokenize("\xe0\xb1\x8f x"), (std::vector<std::string>{"[UNK]", "x"}));
  EXPECT_EQ(tokenizer.tokenize("\xe2\x80\x8b\xee\x80\x80 x"), (std::vector<std::string>{"x"}));
}

}  // namespace
}  // namespace trainyard
