#include "components/weights/safetensors.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <stdexcept>
#include <tuple>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "common/files.h"
#include "trainyard/error.h"

namespace trainyard {

namespace {

struct DtypeName {
  const char* name;
  SafetensorsDtype dtype;
  size_t size;
};
const DtypeName kDtypes[] = {
    {"F64", SafetensorsDtype::F64, 8}, {"F32", SafetensorsDtype::F32, 4},
    {"F16", SafetensorsDtype::F16, 2}, {"BF16", SafetensorsDtype::BF16, 2},
    {"I64", SafetensorsDtype::I64, 8}, {"I32", SafetensorsDtype::I32, 4},
    {"I16", SafetensorsDtype::I16, 2}, {"I8", SafetensorsDtype::I8, 1},
    {"U8", SafetensorsDtype::U8, 1},   {"BOOL", SafetensorsDtype::BOOL, 1},
};

[[noreturn]] void fail(const std::string& path, const std::string& what) {
  throw UserError(fmt::format("weights {}: {}", path, what));
}

struct Span {
  uint64_t begin, end;
  std::string name;
};

}  // namespace

const char* to_string(SafetensorsDtype dtype) {
  for (const auto& d : kDtypes)
    if (d.dtype == dtype) return d.name;
  return "?";
}

size_t element_size(SafetensorsDtype dtype) {
  for (const auto& d : kDtypes)
    if (d.dtype == dtype) return d.size;
  return 0;
}

namespace {

// The header's JSON, from the file's first 8 bytes (its little-endian length) on; `header_bytes`
// is set to that length.
nlohmann::json read_header(const std::string& path, const uint8_t* bytes, size_t size,
                           uint64_t& header_bytes) {
  if (size < 8)
    fail(path,
         fmt::format("{} bytes is too short for a safetensors file (8-byte header length first); "
                     "the file is truncated or not safetensors",
                     size));
  // torch.save's formats, by their first bytes: a zip archive (since PyTorch 1.6) or a pickle
  // (protocol 2 to 5) — where a safetensors header's JSON would begin with '{'.
  const bool json_follows = size > 8 && bytes[8] == '{';
  if (!json_follows && ((bytes[0] == 'P' && bytes[1] == 'K' && bytes[2] == 3 && bytes[3] == 4) ||
                        (bytes[0] == 0x80 && bytes[1] >= 2 && bytes[1] <= 5)))
    fail(path,
         "is a PyTorch checkpoint (torch.save's zip or pickle), not safetensors; a PyTorch "
         ".bin/.pt file must be converted first: save_file(torch.load(path), out) with "
         "safetensors.torch (docs/data.md)");
  header_bytes = 0;
  for (int i = 7; i >= 0; --i) header_bytes = (header_bytes << 8) | bytes[i];  // little-endian
  if (header_bytes > SafetensorsFile::kMaxHeaderBytes)
    fail(path,
         fmt::format("header length {} exceeds the format's limit of {} bytes; the file is "
                     "corrupt or not safetensors (a PyTorch .bin/.pt file must be converted first)",
                     header_bytes, SafetensorsFile::kMaxHeaderBytes));
  if (header_bytes > size - 8)
    fail(path, fmt::format(
                   "header length {} runs past the end of the {}-byte file; the file is truncated",
                   header_bytes, size));
  nlohmann::json header;
  try {
    header = nlohmann::json::parse(bytes + 8, bytes + 8 + header_bytes);
  } catch (const nlohmann::json::exception& e) {
    fail(path, fmt::format("the header is not valid JSON: {}", e.what()));
  }
  if (!header.is_object()) fail(path, "the header must be a JSON object of tensor entries");
  return header;
}

// Tensor `name`'s header entry, checked: a known dtype, a shape, and data offsets inside the
// `data_bytes` bytes at `data` that hold exactly the shape's bytes.
SafetensorsEntry read_entry(const std::string& path, const std::string& name,
                            const nlohmann::json& value, const uint8_t* data, uint64_t data_bytes) {
  auto bad = [&](const std::string& what) {
    fail(path, fmt::format("tensor '{}': {}", name, what));
  };
  if (!value.is_object() || !value.contains("dtype") || !value.contains("shape") ||
      !value.contains("data_offsets"))
    bad("entry must have dtype, shape and data_offsets");
  SafetensorsEntry entry;
  entry.name = name;
  const auto& dtype = value["dtype"];
  const DtypeName* found = nullptr;
  for (const auto& d : kDtypes)
    if (dtype.is_string() && dtype.get<std::string>() == d.name) found = &d;
  if (!found)
    bad(fmt::format(
        "unsupported dtype {}; supported: F64, F32, F16, BF16, I64, I32, I16, I8, U8, BOOL",
        dtype.dump()));
  entry.dtype = found->dtype;
  const auto& shape = value["shape"];
  if (!shape.is_array()) bad("shape must be a list of sizes");
  uint64_t elements = 1;
  for (const auto& dim : shape) {
    if (!dim.is_number_unsigned())
      bad(fmt::format("shape {} must hold non-negative integers", shape.dump()));
    uint64_t d = dim.get<uint64_t>();
    if (d != 0 && elements > UINT64_MAX / d / 8)
      bad(fmt::format("shape {} is impossibly large", shape.dump()));
    elements *= d;
    entry.shape.push_back(static_cast<int64_t>(d));
  }
  const auto& offsets = value["data_offsets"];
  if (!offsets.is_array() || offsets.size() != 2 || !offsets[0].is_number_unsigned() ||
      !offsets[1].is_number_unsigned())
    bad("data_offsets must be [begin, end]");
  uint64_t begin = offsets[0].get<uint64_t>(), end = offsets[1].get<uint64_t>();
  if (begin > end) bad(fmt::format("data_offsets [{}, {}] end before they begin", begin, end));
  if (end > data_bytes)
    bad(fmt::format(
        "data_offsets [{}, {}] run past the {} data bytes of the file; the file is truncated",
        begin, end, data_bytes));
  if (end - begin != elements * found->size)
    bad(fmt::format("{} bytes of data, but shape {} of {} needs {}", end - begin, shape.dump(),
                    found->name, elements * found->size));
  entry.data = data + begin;
  entry.bytes = end - begin;
  return entry;
}

// The tensors' data must tile the data bytes: no overlap, no gap, nothing left over.
void check_tiling(const std::string& path, std::vector<Span> spans, uint64_t data_bytes) {
  // Empty tensors first among those starting at one offset: the reference writes [24, 24] for a
  // tensor with a zero in its shape next to [24, 27] (found by the differential test).
  std::sort(spans.begin(), spans.end(), [](const Span& a, const Span& b) {
    return std::tie(a.begin, a.end) < std::tie(b.begin, b.end);
  });
  uint64_t covered = 0;
  for (const auto& span : spans) {
    if (span.begin < covered)
      fail(path, fmt::format("tensor '{}' overlaps the tensor before it (bytes {} to {})",
                             span.name, span.begin, covered));
    if (span.begin > covered)
      fail(path, fmt::format("bytes {} to {} before tensor '{}' belong to no tensor", covered,
                             span.begin, span.name));
    covered = span.end;
  }
  if (covered != data_bytes)
    fail(path, fmt::format("the last {} data bytes belong to no tensor", data_bytes - covered));
}

}  // namespace

SafetensorsFile::SafetensorsFile(const std::string& path) : path_(path) {
  try {
    file_ = std::make_unique<MappedFile>(path);
  } catch (const std::runtime_error& e) {
    fail(path, e.what());
  }
  const size_t size = file_->size();
  const uint8_t* bytes = file_->data();
  uint64_t header_bytes = 0;
  const nlohmann::json header = read_header(path, bytes, size, header_bytes);
  const uint8_t* data = bytes + 8 + header_bytes;
  const uint64_t data_bytes = size - 8 - header_bytes;
  std::vector<Span> spans;
  for (auto it = header.begin(); it != header.end(); ++it) {
    const std::string& name = it.key();
    const auto& value = it.value();
    if (name == "__metadata__") {
      if (!value.is_object()) fail(path, "__metadata__ must be an object of strings");
      for (auto m = value.begin(); m != value.end(); ++m)
        metadata_[m.key()] =
            m.value().is_string() ? m.value().get<std::string>() : m.value().dump();
      continue;
    }
    SafetensorsEntry entry = read_entry(path, name, value, data, data_bytes);
    const auto begin = static_cast<uint64_t>(entry.data - data);
    spans.push_back({begin, begin + entry.bytes, name});
    entries_.push_back(std::move(entry));
  }
  check_tiling(path, std::move(spans), data_bytes);
  std::stable_sort(entries_.begin(), entries_.end(),
                   [](const SafetensorsEntry& a, const SafetensorsEntry& b) {
                     return std::tie(a.data, a.bytes) < std::tie(b.data, b.bytes);
                   });
}

const SafetensorsEntry* SafetensorsFile::find(const std::string& name) const {
  for (const auto& entry : entries_)
    if (entry.name == name) return &entry;
  return nullptr;
}

void write_safetensors(const std::string& path, const std::vector<SafetensorsTensor>& tensors,
                       const std::map<std::string, std::string>& metadata) {
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  uint64_t offset = 0;
  for (const auto& t : tensors) {
    header[t.name] = {{"dtype", to_string(t.dtype)},
                      {"shape", t.shape},
                      {"data_offsets", {offset, offset + t.bytes}}};
    offset += t.bytes;
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');  // pad so the data starts 8-byte aligned
  write_file_atomically(path, [&](std::ostream& out) {
    uint64_t length = text.size();
    for (int i = 0; i < 8; ++i) out.put(static_cast<char>((length >> (8 * i)) & 0xff));
    out << text;
    for (const auto& t : tensors)
      out.write(static_cast<const char*>(t.data), static_cast<std::streamsize>(t.bytes));
  });
}

}  // namespace trainyard
