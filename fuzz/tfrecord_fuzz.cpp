// TensorBoard's event files are written by a small hand-written encoder (trackers/tfrecord.h), not
// libprotobuf: any sequence of fields — every wire type, any field number, any value, messages
// nested — must decode back to exactly what was written, by an independent decoder here, and every
// record's framing must carry its length and CRC-32C as TFRecord readers check them (the CRC
// recomputed bit by bit, not by the encoder's table).
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "trackers/tfrecord.h"

namespace {

using trainyard::tfrecord::Message;

struct Field {
  int number;
  int wire_type;
  uint64_t bits;      // varint, or the fixed value's bits
  std::string bytes;  // length-delimited
};

// Reads one varint at `at`; aborts past the end (the encoder never writes a truncated one).
uint64_t read_varint(std::string_view data, size_t& at) {
  uint64_t value = 0;
  for (int shift = 0; shift < 64; shift += 7) {
    if (at >= data.size()) std::abort();
    const uint8_t byte = static_cast<uint8_t>(data[at++]);
    value |= static_cast<uint64_t>(byte & 0x7f) << shift;
    if (!(byte & 0x80)) return value;
  }
  std::abort();
}

uint64_t read_fixed(std::string_view data, size_t& at, int bytes) {
  if (at + static_cast<size_t>(bytes) > data.size()) std::abort();
  uint64_t value = 0;
  for (int i = 0; i < bytes; ++i)
    value |= static_cast<uint64_t>(static_cast<uint8_t>(data[at + i])) << (8 * i);
  at += static_cast<size_t>(bytes);
  return value;
}

std::vector<Field> decode(std::string_view data) {
  std::vector<Field> fields;
  size_t at = 0;
  while (at < data.size()) {
    const uint64_t key = read_varint(data, at);
    Field field{static_cast<int>(key >> 3), static_cast<int>(key & 7), 0, {}};
    switch (field.wire_type) {
      case 0:
        field.bits = read_varint(data, at);
        break;
      case 1:
        field.bits = read_fixed(data, at, 8);
        break;
      case 5:
        field.bits = read_fixed(data, at, 4);
        break;
      case 2: {
        const uint64_t length = read_varint(data, at);
        if (length > data.size() - at) std::abort();
        field.bytes = std::string(data.substr(at, length));
        at += length;
        break;
      }
      default:
        std::abort();
    }
    fields.push_back(std::move(field));
  }
  return fields;
}

uint32_t bitwise_crc32c(std::string_view bytes) {
  uint32_t crc = 0xFFFFFFFFu;
  for (unsigned char c : bytes) {
    crc ^= c;
    for (int bit = 0; bit < 8; ++bit) crc = (crc >> 1) ^ (0x82F63B78u & (0u - (crc & 1)));
  }
  return ~crc;
}

uint32_t masked(uint32_t crc) { return ((crc >> 15) | (crc << 17)) + 0xa282ead8u; }

void check_frame(const std::string& data) {
  const std::string record = trainyard::tfrecord::frame(data);
  if (record.size() != data.size() + 16) std::abort();
  size_t at = 0;
  if (read_fixed(record, at, 8) != data.size()) std::abort();
  if (read_fixed(record, at, 4) != masked(bitwise_crc32c(std::string_view(record).substr(0, 8))))
    std::abort();
  if (record.compare(12, data.size(), data) != 0) std::abort();
  at = 12 + data.size();
  if (read_fixed(record, at, 4) != masked(bitwise_crc32c(data))) std::abort();
}

// Builds a message from the input, nesting when asked, and checks it decodes to what was written.
std::string build(const uint8_t*& data, const uint8_t* end, int depth) {
  Message message;
  std::vector<Field> written;
  bool nested_ends = false;
  while (data < end && !nested_ends) {
    const uint8_t op = *data++;
    const int number = 1 + (op >> 3);  // fields 1 to 32
    auto take = [&](size_t n) {
      uint64_t value = 0;
      for (size_t i = 0; i < n && data < end; ++i)
        value |= static_cast<uint64_t>(*data++) << (8 * i);
      return value;
    };
    switch (op & 7) {
      case 0: {
        const uint64_t value = take(8);
        message.varint(number, value);
        written.push_back({number, 0, value, {}});
        break;
      }
      case 1: {
        const uint64_t bits = take(8);
        double value;
        std::memcpy(&value, &bits, sizeof value);
        message.float64(number, value);
        written.push_back({number, 1, bits, {}});
        break;
      }
      case 2: {
        const uint32_t bits = static_cast<uint32_t>(take(4));
        float value;
        std::memcpy(&value, &bits, sizeof value);
        message.float32(number, value);
        written.push_back({number, 5, bits, {}});
        break;
      }
      case 3: {
        const size_t length = std::min<size_t>(take(1), static_cast<size_t>(end - data));
        const std::string text(reinterpret_cast<const char*>(data), length);
        data += length;
        message.bytes(number, text);
        written.push_back({number, 2, 0, text});
        break;
      }
      case 4: {
        if (depth >= 4) break;
        const std::string inner = build(data, end, depth + 1);  // checked there
        message.bytes(number, inner);  // what message() writes of a nested Message
        written.push_back({number, 2, 0, inner});
        break;
      }
      default:
        nested_ends = depth > 0;  // ends a nested message
        break;
    }
  }
  const std::vector<Field> read = decode(message.data());
  if (read.size() != written.size()) std::abort();
  for (size_t i = 0; i < read.size(); ++i)
    if (read[i].number != written[i].number || read[i].wire_type != written[i].wire_type ||
        read[i].bits != written[i].bits || read[i].bytes != written[i].bytes)
      std::abort();
  check_frame(message.data());
  return message.data();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const uint8_t* at = data;
  build(at, data + size, 0);
  return 0;
}
