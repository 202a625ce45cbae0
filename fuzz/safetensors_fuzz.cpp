// safetensors: header length, JSON header, dtypes, shapes and offsets against the file's size.
#include "components/weights/safetensors.h"
#include "fuzz/fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string& path = trainyard::fuzz::write_input(data, size, ".safetensors");
  trainyard::fuzz::expect_clean([&] {
    trainyard::SafetensorsFile file(path);
    size_t total = 0;
    for (const auto& entry : file.entries()) {
      // Every byte an entry claims must be readable (ASan checks the mapping's bounds).
      for (size_t i = 0; i < entry.bytes; i += 4096) total += entry.data[i];
      if (entry.bytes > 0) total += entry.data[entry.bytes - 1];
    }
    if (total == 1) std::fprintf(stderr, " ");  // keep the reads
  });
  return 0;
}
