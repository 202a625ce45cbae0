// What a TensorBoard event file is made of, written by hand: protocol-buffer messages (the few wire
// types an Event needs) inside TFRecord framing. A small encoder rather than libprotobuf and
// TensorBoard's .proto files: the messages are a dozen fields whose numbers have not changed since
// TensorFlow 1.0 (tensorboard/compat/proto/event.proto, summary.proto; the hparams plugin's
// plugin_data.proto), the encoding is 60 lines, and it keeps protoc and a generated-code
// dependency out of the build. What it writes is read back by the `tensorboard` package's own
// reader in tests/trackers_test.cpp, and fuzzed against a decoder (fuzz/tfrecord_fuzz.cpp).
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>

namespace trainyard::tfrecord {

// CRC-32C (Castagnoli), as TFRecord checks its lengths and records with.
uint32_t crc32c(std::string_view bytes);
// TFRecord's "masked" CRC: rotated and offset, so that a CRC of data holding CRCs stays sound.
uint32_t masked_crc32c(std::string_view bytes);

// A protocol-buffer message being written field by field (fields in any order; a reader takes
// them as they come). Each call appends one field.
class Message {
 public:
  Message& varint(int field, uint64_t value);         // int32, int64, enum, bool
  Message& float64(int field, double value);          // double
  Message& float32(int field, float value);           // float
  Message& bytes(int field, std::string_view value);  // string, bytes
  Message& message(int field, const Message& value) { return bytes(field, value.data_); }
  const std::string& data() const { return data_; }

 private:
  void key(int field, int wire_type);
  void raw_varint(uint64_t value);
  std::string data_;
};

// One record in TFRecord framing: its length (8 bytes, little-endian), the length's masked CRC,
// the data, the data's masked CRC.
std::string frame(std::string_view data);

}  // namespace trainyard::tfrecord
