// Token files as language-model training reads them, memory-mapped (never read whole):
//   llmc     llm.c's format (dev/data/data_common.py, write_datafile): a header of 256
//            little-endian int32 — magic, version, the token count — then the tokens: magic
//            20240520 version 1 for GPT-2's uint16 tokens, 20240801 version 7 for Llama 3's uint32.
//   nanogpt  nanoGPT's prepare.py output: uint16 tokens, no header.
// The byte-level half of the `tokens` dataset (components/data/tokens.cpp), free of LibTorch so
// that fuzz/token_file_fuzz.cpp can feed it anything.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "common/files.h"

namespace trainyard {

class TokenFile {
 public:
  static constexpr int32_t kMagic = 20240520;      // GPT-2's uint16 tokens, version 1
  static constexpr int32_t kWideMagic = 20240801;  // Llama 3's uint32 tokens, version 7
  static constexpr int64_t kHeaderInts = 256;

  enum class Format { llmc, nanogpt };

  // Maps `path`; UserError naming the file and what is wrong with it (missing, empty, a header
  // whose magic, version or count disagrees with the file, an odd number of token bytes).
  TokenFile(const std::string& path, Format format);

  const std::string& path() const { return path_; }
  int64_t size() const { return tokens_; }  // tokens
  int token_bytes() const { return width_; }
  // Tokens [start, start + count) as int64, into `out`; the range must lie inside the file.
  void copy(int64_t start, int64_t count, int64_t* out) const;
  // The position of the first token ≥ `limit`, or -1 when every token is below it. Reads the
  // whole mapping once (pages in, nothing kept).
  int64_t first_at_or_above(int64_t limit) const;
  // The largest token (-1 for a file of none). Reads the whole mapping once.
  int64_t max_token() const;
  int64_t token(int64_t i) const;

 private:
  std::string path_;
  std::unique_ptr<MappedFile> file_;
  const uint8_t* tokens_data_ = nullptr;  // in file_
  int64_t tokens_ = 0;
  int width_ = 2;
};

// "llmc" or "nanogpt" -> the format; anything else is refused by the option's rule before this.
TokenFile::Format token_file_format(const std::string& name);

}  // namespace trainyard
