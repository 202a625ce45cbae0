#include "components/data/token_file.h"

#include <algorithm>
#include <cstring>

#include <fmt/format.h>

#include "common/files.h"
#include "trainyard/error.h"

namespace trainyard {

namespace {

[[noreturn]] void fail(const std::string& path, const std::string& what) {
  throw UserError(fmt::format("tokens: {}: {}", path, what));
}

int32_t read_int32(const uint8_t* bytes) {  // little-endian, as llm.c writes with numpy
  uint32_t value = 0;
  for (int i = 3; i >= 0; --i) value = (value << 8) | bytes[i];
  int32_t out;
  std::memcpy(&out, &value, sizeof(out));
  return out;
}

}  // namespace

TokenFile::Format token_file_format(const std::string& name) {
  return name == "nanogpt" ? TokenFile::Format::nanogpt : TokenFile::Format::llmc;
}

TokenFile::TokenFile(const std::string& path, Format format) : path_(path) {
  try {
    file_ = std::make_unique<MappedFile>(path);
  } catch (const std::runtime_error& e) {
    fail(path, e.what());
  }
  const size_t bytes = file_->size();
  if (bytes == 0) fail(path, "the file is empty");
  const uint8_t* data = file_->data();
  if (format == Format::nanogpt) {
    if (bytes % 2 != 0)
      fail(path, fmt::format("{} bytes is not a whole number of uint16 tokens; the file is "
                             "truncated or not nanoGPT's .bin (format: nanogpt)",
                             bytes));
    if (bytes >= 4 && (read_int32(data) == kMagic || read_int32(data) == kWideMagic))
      fail(path, fmt::format("begins with llm.c's magic number {}: it is in llm.c's format; set "
                             "dataset.format: llmc",
                             read_int32(data)));
    tokens_data_ = data;
    tokens_ = static_cast<int64_t>(bytes / 2);
    return;
  }
  constexpr size_t kHeaderBytes = kHeaderInts * 4;
  if (bytes < kHeaderBytes)
    fail(path, fmt::format("{} bytes is shorter than llm.c's {}-byte header; the file is "
                           "truncated, or nanoGPT's headerless .bin (set dataset.format: "
                           "nanogpt)",
                           bytes, kHeaderBytes));
  const int32_t magic = read_int32(data), version = read_int32(data + 4),
                count = read_int32(data + 8);
  // The pairs llm.c writes (data_common.py) and its loaders read.
  if (magic != kMagic && magic != kWideMagic)
    fail(path, fmt::format("magic number {} is neither llm.c's {} (GPT-2's uint16 tokens) nor {} "
                           "(Llama 3's uint32); the file is not in llm.c's format (nanoGPT's "
                           "headerless .bin needs dataset.format: nanogpt)",
                           magic, kMagic, kWideMagic));
  const int32_t expected_version = magic == kMagic ? 1 : 7;
  if (version != expected_version)
    fail(path, fmt::format("header version {} with magic {}: llm.c writes version {} with it; "
                           "the file is corrupt or from another writer",
                           version, magic, expected_version));
  width_ = magic == kMagic ? 2 : 4;
  if (count < 0) fail(path, fmt::format("the header says {} tokens; the file is corrupt", count));
  const size_t body = bytes - kHeaderBytes;
  if (body % static_cast<size_t>(width_) != 0)
    fail(path, fmt::format("{} bytes after the header is not a whole number of {}-byte "
                           "tokens; the file is truncated",
                           body, width_));
  if (body / static_cast<size_t>(width_) != static_cast<size_t>(count))
    fail(path, fmt::format("the header says {} tokens but the file holds {}; the file is "
                           "truncated or its header is wrong (write it again with llm.c's "
                           "write_datafile)",
                           count, body / static_cast<size_t>(width_)));
  tokens_data_ = data + kHeaderBytes;
  tokens_ = count;
}

int64_t TokenFile::token(int64_t i) const {
  const uint8_t* at = tokens_data_ + i * width_;
  if (width_ == 2) return static_cast<int64_t>(at[0] | (at[1] << 8));
  return static_cast<int64_t>(static_cast<uint32_t>(at[0]) | (static_cast<uint32_t>(at[1]) << 8) |
                              (static_cast<uint32_t>(at[2]) << 16) |
                              (static_cast<uint32_t>(at[3]) << 24));
}

void TokenFile::copy(int64_t start, int64_t count, int64_t* out) const {
  if (start < 0 || count < 0 || start + count > tokens_)
    throw std::out_of_range(fmt::format("tokens: {}: tokens [{}, {}) past its {} tokens", path_,
                                        start, start + count, tokens_));
  for (int64_t i = 0; i < count; ++i) out[i] = token(start + i);
}

int64_t TokenFile::max_token() const {
  int64_t largest = -1;
  for (int64_t i = 0; i < tokens_; ++i) largest = std::max(largest, token(i));
  return largest;
}

int64_t TokenFile::first_at_or_above(int64_t limit) const {
  for (int64_t i = 0; i < tokens_; ++i)
    if (token(i) >= limit) return i;
  return -1;
}

}  // namespace trainyard
