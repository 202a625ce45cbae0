#include "trackers/tfrecord.h"

#include <array>
#include <cstring>

namespace trainyard::tfrecord {

namespace {

// The reflected Castagnoli polynomial's byte table (the crc32c library's and RFC 3720's).
constexpr std::array<uint32_t, 256> crc32c_table() {
  std::array<uint32_t, 256> table{};
  for (uint32_t i = 0; i < 256; ++i) {
    uint32_t crc = i;
    for (int bit = 0; bit < 8; ++bit) crc = (crc >> 1) ^ (crc & 1 ? 0x82F63B78u : 0);
    table[i] = crc;
  }
  return table;
}
constexpr std::array<uint32_t, 256> kCrc32cTable = crc32c_table();

void append_little_endian(std::string& out, uint64_t value, int bytes) {
  for (int i = 0; i < bytes; ++i) out.push_back(static_cast<char>((value >> (8 * i)) & 0xff));
}

}  // namespace

uint32_t crc32c(std::string_view bytes) {
  uint32_t crc = 0xFFFFFFFFu;
  for (unsigned char c : bytes) crc = kCrc32cTable[(crc ^ c) & 0xff] ^ (crc >> 8);
  return crc ^ 0xFFFFFFFFu;
}

uint32_t masked_crc32c(std::string_view bytes) {
  const uint32_t crc = crc32c(bytes);
  return ((crc >> 15) | (crc << 17)) + 0xa282ead8u;
}

void Message::raw_varint(uint64_t value) {
  while (value >= 0x80) {
    data_.push_back(static_cast<char>((value & 0x7f) | 0x80));
    value >>= 7;
  }
  data_.push_back(static_cast<char>(value));
}

// The wire types: 0 varint, 1 fixed 64 bits, 2 length-delimited, 5 fixed 32 bits.
void Message::key(int field, int wire_type) {
  raw_varint((static_cast<uint64_t>(field) << 3) | static_cast<uint64_t>(wire_type));
}

Message& Message::varint(int field, uint64_t value) {
  key(field, 0);
  raw_varint(value);
  return *this;
}

Message& Message::float64(int field, double value) {
  key(field, 1);
  uint64_t bits;
  std::memcpy(&bits, &value, sizeof bits);
  append_little_endian(data_, bits, 8);
  return *this;
}

Message& Message::float32(int field, float value) {
  key(field, 5);
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof bits);
  append_little_endian(data_, bits, 4);
  return *this;
}

Message& Message::bytes(int field, std::string_view value) {
  key(field, 2);
  raw_varint(value.size());
  data_.append(value);
  return *this;
}

std::string frame(std::string_view data) {
  std::string length;
  append_little_endian(length, data.size(), 8);
  std::string out = length;
  append_little_endian(out, masked_crc32c(length), 4);
  out.append(data);
  append_little_endian(out, masked_crc32c(data), 4);
  return out;
}

}  // namespace trainyard::tfrecord
