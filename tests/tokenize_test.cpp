// `trainyard tokenize`: text files (.txt, .jsonl) to llm.c's token files, the separator before each
// document, the validation tail, uint32 where the vocabulary outgrows uint16, the ids of the
// tokenizer (whose parity with the tokenizers library ByteBpeTest holds) whatever the threads; bad
// input refused with the file and line, nothing written.
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "components/data/token_file.h"
#include "components/text/byte_bpe.h"
#include "tests/cli_support.h"

namespace trainyard {
namespace {

namespace fs = std::filesystem;
using testing::Result;
using testing::trainyard;

std::vector<int64_t> tokens_of(const std::string& path) {
  const TokenFile file(path, TokenFile::Format::llmc);
  std::vector<int64_t> tokens(static_cast<size_t>(file.size()));
  file.copy(0, file.size(), tokens.data());
  return tokens;
}

std::vector<int64_t> ids(const ByteBpeTokenizer& tokenizer, std::string_view text) {
  std::vector<int32_t> out;
  tokenizer.encode_ordinary(text, out);
  return {out.begin(), out.end()};
}

// Files a writer left behind in `folder` ("<output>.<pid>.tmp").
int temporary_files(const fs::path& folder) {
  int n = 0;
  for (const auto& entry : fs::directory_iterator(folder)) n += entry.path().extension() == ".tmp";
  return n;
}

class TokenizeTest : public testing::CliTest {
 protected:
  std::string gpt2 = testing::source("tests/fixtures/bpe_gpt2.json");
  // Several megabytes of the differential's texts: many pieces for the threads.
  std::string long_text() {
    std::ifstream in(testing::source("tests/fixtures/bpe_differential.json"));
    const nlohmann::json cases = nlohmann::json::parse(in)["cases"];
    std::string text;
    while (text.size() < (3u << 20))
      for (const auto& c : cases) text += c["text"].get<std::string>() + "\n";
    return text;
  }
};

TEST_F(TokenizeTest, WritesLlmcTokenFilesWithASeparatorBeforeEachDocumentAndAValidationTail) {
  const ByteBpeTokenizer tokenizer = ByteBpeTokenizer::from_tokenizer_json(gpt2);
  const std::string book = long_text();
  const std::string a = dir.write("book.txt", book);
  const std::string b = dir.write("reviews.jsonl",
                                  "{\"text\": \"I'm here.\\n\\nYou're   there\"}\n\n"
                                  "{\"text\": \"<|endoftext|> 12,345 naïve\", \"label\": 1}\n");
  const int64_t eot = tokenizer.token_id("<|endoftext|>");
  std::vector<int64_t> expected = {eot};
  for (auto* part : {&book}) {
    const auto encoded = ids(tokenizer, *part);
    expected.insert(expected.end(), encoded.begin(), encoded.end());
  }
  for (const char* doc : {"I'm here.\n\nYou're   there", "<|endoftext|> 12,345 naïve"}) {
    expected.push_back(eot);
    const auto encoded = ids(tokenizer, doc);
    expected.insert(expected.end(), encoded.begin(), encoded.end());
  }
  for (int threads : {1, 2}) {
    const std::string out = (dir.path() / fmt::format("t{}", threads) / "data_train.bin").string();
    const Result r =
        trainyard(fmt::format("tokenize --tokenizer {} {} {} -o {} --val-fraction 0.1 "
                              "--threads {}",
                              gpt2, a, b, out, threads));
    ASSERT_EQ(r.exit_code, 0) << r.output;
    EXPECT_NE(r.output.find("3 documents"), std::string::npos) << r.output;
    EXPECT_NE(r.output.find("'<|endoftext|>' before each document"), std::string::npos) << r.output;
    const std::string val = (dir.path() / fmt::format("t{}", threads) / "data_val.bin").string();
    std::vector<int64_t> train = tokens_of(out), held = tokens_of(val);
    EXPECT_EQ(held.size(), static_cast<size_t>(std::llround(expected.size() * 0.1)));
    train.insert(train.end(), held.begin(), held.end());
    EXPECT_EQ(train, expected) << threads << " threads";
    EXPECT_EQ(TokenFile(out, TokenFile::Format::llmc).token_bytes(), 2);
    EXPECT_EQ(temporary_files(fs::path(out).parent_path()), 0);
  }
  // A line of a .txt file per document, without a separator.
  const Result lines =
      trainyard(fmt::format("tokenize --tokenizer {} {} -o {} --documents line --separator none",
                            gpt2, dir.write("lines.txt", "one line\n\nanother\r\nthe last"),
                            (dir.path() / "lines.bin").string()));
  ASSERT_EQ(lines.exit_code, 0) << lines.output;
  EXPECT_NE(lines.output.find("3 documents"), std::string::npos) << lines.output;
  std::vector<int64_t> joined;
  for (const char* line : {"one line", "another", "the last"}) {
    const auto encoded = ids(tokenizer, line);
    joined.insert(joined.end(), encoded.begin(), encoded.end());
  }
  EXPECT_EQ(tokens_of((dir.path() / "lines.bin").string()), joined);
}

// A vocabulary beyond 65536 ids: llm.c's uint32 layout (magic 20240801, version 7).
TEST_F(TokenizeTest, AVocabularyBeyondUint16WritesUint32Tokens) {
  std::ifstream in(gpt2);
  nlohmann::json j = nlohmann::json::parse(in);
  // 70000 tokens: the vocabulary's own, then many more, then an added one after them all.
  const int64_t own = static_cast<int64_t>(j["model"]["vocab"].size());
  for (int64_t id = own; id < 70000; ++id) j["model"]["vocab"][fmt::format("<{}>", id)] = id;
  j["added_tokens"].push_back({{"id", 70000},
                               {"content", "<|far|>"},
                               {"single_word", false},
                               {"lstrip", false},
                               {"rstrip", false},
                               {"normalized", false},
                               {"special", true}});
  const std::string big = dir.write("big.json", j.dump());
  const Result r = trainyard(fmt::format("tokenize --tokenizer {} {} -o {} --separator '<|far|>'",
                                         big, dir.write("a.txt", "the movie <|far|> was great"),
                                         (dir.path() / "wide.bin").string()));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const TokenFile file((dir.path() / "wide.bin").string(), TokenFile::Format::llmc);
  EXPECT_EQ(file.token_bytes(), 4);
  const std::vector<int64_t> tokens = tokens_of((dir.path() / "wide.bin").string());
  EXPECT_EQ(tokens.front(), 70000);
  EXPECT_EQ(std::count(tokens.begin(), tokens.end(), 70000), 2);
}

TEST_F(TokenizeTest, BadInputIsRefusedNamingTheFileAndNothingIsWritten) {
  const std::string text = dir.write("a.txt", "some text\n");
  auto refused = [&](const std::string& args, const std::string& words) {
    const Result r = trainyard("tokenize " + args + " -o " + (dir.path() / "out.bin").string());
    EXPECT_EQ(r.exit_code, 2) << args << "\n" << r.output;
    EXPECT_NE(r.output.find(words), std::string::npos) << args << "\n" << r.output;
    EXPECT_FALSE(fs::exists((dir.path() / "out.bin").string())) << args;
    EXPECT_EQ(temporary_files(dir.path()), 0) << args;
  };
  refused("--tokenizer " + gpt2 + " " + (dir.path() / "missing.txt").string(), "missing.txt");
  refused("--tokenizer " + testing::source("tests/fixtures/tokenizer_bert.json") + " " + text,
          "its model is WordPiece, not BPE");
  refused("--tokenizer " + gpt2 + " --separator '<nope>' " + text, "'<nope>' is no token");
  refused("--tokenizer " + gpt2 + " " +
              dir.write("bad.jsonl", "{\"text\": \"fine\"}\n\n{\"body\": \"no text\"}\n"),
          "bad.jsonl line 3: no \"text\" string");
  refused("--tokenizer " + gpt2 + " " + dir.write("broken.jsonl", "{\"text\": \"fine\"\n"),
          "broken.jsonl line 1: not JSON");
  refused("--tokenizer " + gpt2 + " " + dir.write("empty.txt", ""), "hold no text");
  refused("--tokenizer " + gpt2 + " --val-fraction 1 " + text, "--val-fraction 1 is not in [0, 1)");
  refused(text, "--tokenizer tokenizer.json");
}

}  // namespace
}  // namespace trainyard
