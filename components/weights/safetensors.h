// A reader for the safetensors format (https://github.com/huggingface/safetensors): an 8-byte
// little-endian header length N, N bytes of JSON describing each tensor (dtype, shape, and
// [begin, end) byte offsets into the data that follows), then the data. The file is memory-mapped
// and the header validated in full before any tensor is read: header length bounded, offsets
// inside the file, sizes matching shapes, no overlaps and no holes. Every violation is a UserError
// naming the file and the tensor. No LibTorch here: the loader turns entries into tensors.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "common/files.h"

namespace trainyard {

enum class SafetensorsDtype { F64, F32, F16, BF16, I64, I32, I16, I8, U8, BOOL };

const char* to_string(SafetensorsDtype dtype);
size_t element_size(SafetensorsDtype dtype);

struct SafetensorsEntry {
  std::string name;
  SafetensorsDtype dtype;
  std::vector<int64_t> shape;
  const uint8_t* data = nullptr;  // into the mapping; valid while the file lives
  size_t bytes = 0;
};

class SafetensorsFile {
 public:
  static constexpr uint64_t kMaxHeaderBytes = 100'000'000;  // the format's own limit

  // Maps and validates `path`. Throws UserError on any problem.
  explicit SafetensorsFile(const std::string& path);

  const std::string& path() const { return path_; }
  const std::vector<SafetensorsEntry>& entries() const { return entries_; }  // in file order
  const SafetensorsEntry* find(const std::string& name) const;
  const std::map<std::string, std::string>& metadata() const { return metadata_; }

 private:
  std::string path_;
  std::unique_ptr<MappedFile> file_;  // the entries point into it
  std::vector<SafetensorsEntry> entries_;
  std::map<std::string, std::string> metadata_;
};

// A tensor to write: its bytes are copied out during write_safetensors.
struct SafetensorsTensor {
  std::string name;
  SafetensorsDtype dtype;
  std::vector<int64_t> shape;
  const void* data;
  size_t bytes;
};

// Writes a safetensors file (tensors in the given order, 8-byte aligned header as the reference
// implementation pads it) through a temporary file renamed into place, so a crash never leaves a
// half-written file. Throws std::runtime_error on I/O failure.
void write_safetensors(const std::string& path, const std::vector<SafetensorsTensor>& tensors,
                       const std::map<std::string, std::string>& metadata = {});

}  // namespace trainyard
