// A token file in either format: its header against its size; every token read stays in the file.
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <vector>

#include "components/data/token_file.h"
#include "fuzz/fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using trainyard::TokenFile;
  const std::string& path = trainyard::fuzz::write_input(data, size, ".bin");
  for (TokenFile::Format format : {TokenFile::Format::llmc, TokenFile::Format::nanogpt})
    trainyard::fuzz::expect_clean([&] {
      const TokenFile file(path, format);
      // What the dataset reads: windows inside the file, and the vocabulary check's scan.
      const int64_t n = file.size();
      if (n < 0 || n * file.token_bytes() > static_cast<int64_t>(size)) std::abort();
      std::vector<int64_t> window(static_cast<size_t>(std::min<int64_t>(n, 64)));
      file.copy(0, static_cast<int64_t>(window.size()), window.data());
      const int64_t beyond = file.first_at_or_above(50257);
      if (beyond >= n || (beyond >= 0 && file.token(beyond) < 50257)) std::abort();
      if ((beyond >= 0) != (file.max_token() >= 50257)) std::abort();
    });
  return 0;
}
