// Byte-level BPE gives the `tokenizers` library's ids on 3000 generated texts for three
// tokenizer.json files it wrote (GPT-2's settings, RoBERTa's, a template with single_word, rstrip
// and normalized added tokens; fixtures/make_byte_bpe_fixture.py), decodes as it does, cuts long
// texts where the ids stay the same, keeps any bytes, and refuses every setting it does not
// implement by name.
#include "components/text/byte_bpe.h"

#include <sys/stat.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <future>
#include <random>
#include <sstream>
#include <thread>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "components/text/text_tokenizer.h"
#include "tests/test_support.h"
#include "trainyard/error.h"

using namespace trainyard;

namespace {

std::string fixture(const std::string& name) {
  return std::string(TRAINYARD_SOURCE_DIR) + "/tests/fixtures/" + name;
}

std::string read(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

const nlohmann::json& differential() {
  static const nlohmann::json cases = nlohmann::json::parse(read(fixture("bpe_differential.json")));
  return cases;
}

const std::vector<std::string> kNames = {"gpt2", "roberta", "template", "classes"};

std::vector<int64_t> ordinary(const ByteBpeTokenizer& tokenizer, std::string_view text) {
  std::vector<int32_t> ids;
  tokenizer.encode_ordinary(text, ids);
  return {ids.begin(), ids.end()};
}

}  // namespace

TEST(ByteBpeTest, MatchesTheTokenizersLibraryOnGeneratedText) {
  const nlohmann::json& fixture_json = differential();
  ASSERT_GE(fixture_json["cases"].size(), 3300u);
  for (const std::string& name : kNames) {
    const ByteBpeTokenizer tokenizer =
        ByteBpeTokenizer::from_tokenizer_json(fixture("bpe_" + name + ".json"));
    const auto& frame = fixture_json["frames"][name];
    int failures = 0;
    for (const auto& c : fixture_json["cases"]) {
      const std::string text = c["text"].get<std::string>();
      const auto expected = c["ids"][name].get<std::vector<int64_t>>();
      const std::vector<int64_t> ids = tokenizer.encode(text);
      EXPECT_EQ(ids, expected) << name << ": " << nlohmann::json(text).dump();
      const std::string decoded =
          c.contains("decoded") && c["decoded"].contains(name)
              ? c["decoded"][name].get<std::string>()
              : frame[0].get<std::string>() + text + frame[1].get<std::string>();
      EXPECT_EQ(tokenizer.decode(expected), decoded) << name << ": " << nlohmann::json(text).dump();
      if (ids != expected && ++failures > 10) FAIL() << "more than 10 texts differ";
    }
  }
}

// A long text cut where next_cut says, each piece encoded on its own, gives the whole text's ids.
TEST(ByteBpeTest, CutsLongTextsWhereTheIdsStayTheSame) {
  std::string text;
  for (const auto& c : differential()["cases"]) text += c["text"].get<std::string>() + "\n";
  for (const std::string& name : kNames) {
    const ByteBpeTokenizer tokenizer =
        ByteBpeTokenizer::from_tokenizer_json(fixture("bpe_" + name + ".json"));
    std::vector<int32_t> whole, pieces;
    tokenizer.encode_ordinary(text, whole);
    size_t start = 0, cuts = 0;
    while (start < text.size()) {
      const size_t end = tokenizer.next_cut(text, start + 1 + (start * 7919) % 300);
      tokenizer.encode_ordinary(std::string_view(text).substr(start, end - start), pieces,
                                /*continues=*/start > 0);
      start = end;
      ++cuts;
    }
    EXPECT_GT(cuts, 500u) << name;
    EXPECT_EQ(pieces, whole) << name;
  }
}

// A token ending just before a newline leaves it a piece of its own in the whole text (RoBERTa's
// prefix space: " \n", which a merge "Ġ Ċ" joins); no cut is made there.
TEST(ByteBpeTest, NoCutAfterATokenThatEndsBeforeTheNewline) {
  nlohmann::json j = nlohmann::json::parse(read(fixture("bpe_roberta.json")));
  const int64_t id = static_cast<int64_t>(j["model"]["vocab"].size());
  j["model"]["vocab"]["\u0120\u010A"] = id;  // "ĠĊ"
  j["model"]["merges"].push_back({"\u0120", "\u010A"});
  const ByteBpeTokenizer tokenizer = ByteBpeTokenizer::from_json_text(j.dump(), "edited.json");
  const std::string text = "the movie\n</s>\nfoo bar\n";
  const size_t newline = text.find("</s>\n") + 4;
  const size_t cut = tokenizer.next_cut(text, newline);
  std::vector<int32_t> whole, pieces;
  tokenizer.encode_ordinary(text, whole);
  tokenizer.encode_ordinary(std::string_view(text).substr(0, cut), pieces);
  tokenizer.encode_ordinary(std::string_view(text).substr(cut), pieces, /*continues=*/true);
  EXPECT_EQ(pieces, whole);
  std::vector<int32_t> merged;  // the merge in effect where " \n" is one piece
  tokenizer.encode_ordinary(" \n", merged);
  EXPECT_EQ(merged, std::vector<int32_t>{static_cast<int32_t>(id)});
}

// Any bytes, UTF-8 or not, come back from their ids (GPT-2's settings: no token takes spaces).
TEST(ByteBpeTest, AnyBytesDecodeBackToThemselves) {
  const ByteBpeTokenizer tokenizer =
      ByteBpeTokenizer::from_tokenizer_json(fixture("bpe_gpt2.json"));
  std::mt19937 rng(7);
  for (int i = 0; i < 2000; ++i) {
    std::string bytes(rng() % 40, '\0');
    for (char& b : bytes) b = static_cast<char>(rng() % 4 == 0 ? rng() % 256 : 'a' + rng() % 26);
    const std::vector<int64_t> ids = ordinary(tokenizer, bytes);
    for (int64_t id : ids) ASSERT_LT(id, tokenizer.vocab_size());
    ASSERT_EQ(tokenizer.decode(ids), bytes) << "case " << i;
  }
  EXPECT_EQ(tokenizer.decode(ordinary(tokenizer, "caf\xC3")), "caf\xC3");
}

TEST(ByteBpeTest, FramesTruncatesAndPads) {
  const ByteBpeTokenizer roberta =
      ByteBpeTokenizer::from_tokenizer_json(fixture("bpe_roberta.json"));
  const int64_t s = roberta.token_id("<s>"), end = roberta.token_id("</s>"),
                pad = roberta.token_id("<pad>");
  EXPECT_EQ(roberta.pad_id(), pad);
  const Encoding e = roberta.encode("the movie was great, the movie was great", 6, true);
  ASSERT_EQ(e.input_ids.size(), 6u);
  EXPECT_EQ(e.input_ids.front(), s);
  EXPECT_EQ(e.input_ids.back(), end);
  const Encoding padded = roberta.encode("the", 8, true);
  EXPECT_EQ(padded.input_ids.back(), pad);
  EXPECT_EQ(padded.attention_mask.back(), 0);
  EXPECT_EQ(padded.attention_mask.front(), 1);
  const Encoding dynamic = roberta.encode("the", 8, false);
  EXPECT_EQ(dynamic.input_ids.size(), dynamic.attention_mask.size());
  EXPECT_LT(dynamic.input_ids.size(), 8u);
  const ByteBpeTokenizer gpt2 = ByteBpeTokenizer::from_tokenizer_json(fixture("bpe_gpt2.json"));
  EXPECT_EQ(gpt2.pad_id(), gpt2.token_id("<|endoftext|>"));  // no <pad>: the end of text
  EXPECT_EQ(gpt2.vocab_size(), 1200);
  EXPECT_THROW(gpt2.decode({1200}), UserError);
}

// Each setting the reader does not implement is refused, naming it (edits of bpe_gpt2.json).
TEST(ByteBpeTest, RefusesWhatItDoesNotImplementByName) {
  const nlohmann::json base = nlohmann::json::parse(read(fixture("bpe_gpt2.json")));
  auto refusal = [&](const std::function<void(nlohmann::json&)>& edit) -> std::string {
    nlohmann::json j = base;
    edit(j);
    try {
      ByteBpeTokenizer::from_json_text(j.dump(), "edited.json");
    } catch (const UserError& e) {
      return e.what();
    }
    return "(accepted)";
  };
  auto refused_with = [&](const std::function<void(nlohmann::json&)>& edit,
                          const std::string& words) {
    const std::string message = refusal(edit);
    EXPECT_NE(message.find("edited.json"), std::string::npos) << message;
    EXPECT_NE(message.find(words), std::string::npos) << message;
  };
  EXPECT_EQ(refusal([](nlohmann::json&) {}), "(accepted)");
  refused_with([](auto& j) { j["model"]["type"] = "WordPiece"; }, "its model is WordPiece");
  refused_with([](auto& j) { j["model"]["dropout"] = 0.1; }, "dropout");
  refused_with([](auto& j) { j["model"]["byte_fallback"] = true; }, "byte_fallback");
  refused_with([](auto& j) { j["model"]["ignore_merges"] = true; }, "ignore_merges");
  refused_with([](auto& j) { j["model"]["continuing_subword_prefix"] = "##"; },
               "continuing_subword_prefix");
  refused_with([](auto& j) { j["model"]["end_of_word_suffix"] = "</w>"; }, "end_of_word_suffix");
  refused_with([](auto& j) { j["normalizer"] = {{"type", "NFC"}}; }, "its normalizer is NFC");
  refused_with(
      [](auto& j) {
        j["pre_tokenizer"] = {{"type", "Sequence"}};
      },
      "its pre_tokenizer is Sequence");
  refused_with([](auto& j) { j["pre_tokenizer"]["use_regex"] = false; }, "use_regex");
  refused_with(
      [](auto& j) {
        j["decoder"] = {{"type", "BPEDecoder"}};
      },
      "its decoder is BPEDecoder");
  refused_with(
      [](auto& j) {
        j["post_processor"] = {{"type", "Sequence"}};
      },
      "its post_processor is Sequence");
  refused_with([](auto& j) { j["model"]["vocab"].erase("a"); }, "lacks the byte 0x61");
  refused_with([](auto& j) { j["model"]["merges"][0] = {"a", "zzzz"}; }, "not in its vocab");
  refused_with([](auto& j) { j["model"]["merges"][0] = "a b c"; }, "not two tokens");
  refused_with([](auto& j) { j["model"]["merges"][0] = "#version: 0.2"; }, "not in its vocab");
  refused_with([](auto& j) { j["model"]["vocab"]["a"] = -3; }, "not an id");
  refused_with([](auto& j) { j["added_tokens"][0]["id"] = 5; },
               "has the id 5, where the tokenizers library gives it 0");
  refused_with([](auto& j) { j["added_tokens"][0].erase("lstrip"); }, "does not say lstrip");
  refused_with([](auto& j) { j["pre_tokenizer"].erase("add_prefix_space"); },
               "does not say add_prefix_space");
  refused_with([](auto& j) { j["decoder"] = nullptr; }, "its decoder is none");
  refused_with([](auto& j) { j["version"] = "2.0"; }, "its version is \"2.0\"");
  refused_with([](auto& j) { j["truncation"] = {{"max_length", 4}}; }, "it sets truncation");
  refused_with([](auto& j) { j["padding"] = {{"length", 40}}; }, "it sets padding");
  refused_with([](auto& j) { j["model"]["vocab"] = 3; }, "has no vocab");
  refused_with([](auto& j) { j["added_tokens"][0]["lstrip"] = "yes"; }, "does not say lstrip");
  EXPECT_NE(refusal([](auto& j) { j = nlohmann::json::array(); }).find("not a JSON object"),
            std::string::npos);
}

// GPT-2's split, case by case (what the pattern's alternatives give; the differential test holds
// the library to the same).
TEST(ByteBpeTest, SplitsAsGpt2sPattern) {
  const ByteBpeTokenizer tokenizer =
      ByteBpeTokenizer::from_tokenizer_json(fixture("bpe_gpt2.json"));
  auto pieces = [&](std::string_view text) {
    std::vector<std::string> out;
    for (int64_t id : ordinary(tokenizer, text)) out.push_back(tokenizer.decode({id}));
    std::string joined;
    for (const std::string& piece : out) joined += piece;
    EXPECT_EQ(joined, text);
    return ordinary(tokenizer, text).size();
  };
  // A whitespace run before a word gives its last space to the word; a newline stays alone.
  EXPECT_EQ(ordinary(tokenizer, "a  b"), [&] {
    auto ids = ordinary(tokenizer, "a ");
    auto word = ordinary(tokenizer, " b");
    ids.insert(ids.end(), word.begin(), word.end());
    return ids;
  }());
  EXPECT_GT(pieces("I'm here, you're there\n\n  and they'll go."), 5u);
  EXPECT_TRUE(ordinary(tokenizer, "").empty());
}

// load_text_tokenizer reads a tokenizer.json once and hands it to the reader its model names (issue
// 59): a file that can be read only once — a named pipe, as a shell's process substitution gives —
// loads; reading it a second time would wait for a writer that never comes.
TEST(ByteBpeTest, ATokenizerJsonIsReadOnce) {
  trainyard::testing::TempDir dir;
  for (const char* name : {"bpe_gpt2.json", "tokenizer_template.json"}) {
    const std::string pipe = (std::filesystem::path(dir.path()) / name).string();
    ASSERT_EQ(mkfifo(pipe.c_str(), 0600), 0) << pipe;
    std::thread writer([&] {
      std::ofstream(pipe, std::ios::binary) << read(fixture(name));  // blocks until opened
    });
    auto loading = std::async(std::launch::async, [&] { return load_text_tokenizer(pipe); });
    const bool loaded = loading.wait_for(std::chrono::seconds(20)) == std::future_status::ready;
    writer.join();  // the first reader let it write the file through
    // A second read waits for a second writer: one that writes nothing, so that the test ends.
    if (!loaded) std::ofstream{pipe};
    ASSERT_TRUE(loaded) << name << ": the tokenizer.json was read more than once";
    EXPECT_GT(loading.get()->vocab_size(), 100) << name;
    std::filesystem::remove(pipe);
  }
}
