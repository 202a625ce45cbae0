// Token files (components/data/token_file.h): llm.c's format with its header, nanoGPT's headerless
// .bin, and every way a file can disagree with itself refused with the file's name and the fix.
#include <gtest/gtest.h>

#include <cstring>

#include "components/data/token_file.h"
#include "tests/test_support.h"
#include "trainyard/error.h"

namespace trainyard {
namespace {

std::string refusal(const std::string& path, TokenFile::Format format) {
  try {
    TokenFile file(path, format);
  } catch (const UserError& e) {
    return e.what();
  }
  return "";
}

TEST(TokenFileTest, ReadsLlmcAndNanogptTokens) {
  testing::TempDir dir;
  const std::vector<uint32_t> tokens = {50256, 15496, 11, 995, 0, 65535};
  TokenFile gpt2(dir.write("gpt2.bin", testing::llmc_token_file(tokens)), TokenFile::Format::llmc);
  ASSERT_EQ(gpt2.size(), 6);
  EXPECT_EQ(gpt2.token_bytes(), 2);
  std::vector<int64_t> out(4);
  gpt2.copy(1, 4, out.data());
  EXPECT_EQ(out, (std::vector<int64_t>{15496, 11, 995, 0}));
  EXPECT_EQ(gpt2.first_at_or_above(50257), 5);  // 65535
  EXPECT_EQ(gpt2.first_at_or_above(65536), -1);
  EXPECT_EQ(gpt2.max_token(), 65535);

  TokenFile llama(
      dir.write("llama.bin", testing::llmc_token_file({128000, 3, 128255}, /*wide=*/true)),
      TokenFile::Format::llmc);
  EXPECT_EQ(llama.token_bytes(), 4);
  EXPECT_EQ(llama.token(2), 128255);

  std::string raw;
  for (uint16_t t : {uint16_t{1}, uint16_t{2}, uint16_t{60000}})
    raw.append(reinterpret_cast<const char*>(&t), 2);
  TokenFile nanogpt(dir.write("train.bin", raw), TokenFile::Format::nanogpt);
  EXPECT_EQ(nanogpt.size(), 3);
  EXPECT_EQ(nanogpt.token(2), 60000);
  EXPECT_THROW(nanogpt.copy(2, 2, out.data()), std::out_of_range);
}

TEST(TokenFileTest, FilesThatDisagreeWithThemselvesAreRefused) {
  testing::TempDir dir;
  const std::vector<uint32_t> tokens = {1, 2, 3, 4};
  auto llmc_refusal = [&](const std::string& name, const std::string& bytes) {
    return refusal(dir.write(name, bytes), TokenFile::Format::llmc);
  };
  EXPECT_NE(llmc_refusal("lies.bin", testing::llmc_token_file(tokens, false, 9))
                .find("lies.bin: the header says 9 tokens but the file holds 4"),
            std::string::npos);
  std::string odd = testing::llmc_token_file(tokens);
  odd.push_back('\0');
  EXPECT_NE(llmc_refusal("odd.bin", odd)
                .find("odd.bin: 9 bytes after the header is not a whole number of 2-byte tokens"),
            std::string::npos)
      << llmc_refusal("odd.bin", odd);
  EXPECT_NE(llmc_refusal("magic.bin", testing::llmc_token_file(tokens, false, -1, 12345))
                .find("magic number 12345 is neither llm.c's 20240520"),
            std::string::npos);
  EXPECT_NE(llmc_refusal("version.bin", testing::llmc_token_file(tokens, false, -1, -1, 7))
                .find("header version 7 with magic 20240520: llm.c writes version 1"),
            std::string::npos);
  EXPECT_NE(llmc_refusal("short.bin", std::string(100, 'x')).find("dataset.format: nanogpt"),
            std::string::npos);
  EXPECT_NE(llmc_refusal("empty.bin", "").find("empty.bin: the file is empty"), std::string::npos);
  EXPECT_NE(refusal(dir.path().string() + "/missing.bin", TokenFile::Format::llmc)
                .find("missing.bin: No such file"),
            std::string::npos);
  EXPECT_NE(refusal(dir.write("odd_nanogpt.bin", "abc"), TokenFile::Format::nanogpt)
                .find("3 bytes is not a whole number of uint16 tokens"),
            std::string::npos);
  EXPECT_NE(refusal(dir.write("llmc_as_nanogpt.bin", testing::llmc_token_file(tokens)),
                    TokenFile::Format::nanogpt)
                .find("set dataset.format: llmc"),
            std::string::npos);
}

}  // namespace
}  // namespace trainyard
