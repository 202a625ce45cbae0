// An experiment file through the whole config machinery — YAML, `extends`, sweeps (variants, grids,
// repeats), `--set` overrides, validation against a registry (the tests' fake components, which
// need no LibTorch). The input is the file; after a line "--set", each further line is one
// override.
#include "fuzz/fuzz_support.h"
#include "runner/config/experiment.h"
#include "tests/test_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const trainyard::Registry registry = trainyard::testing::fake_registry();
  std::string text(reinterpret_cast<const char*>(data), size);
  std::vector<std::string> overrides;
  if (const size_t marker = text.find("\n--set\n"); marker != std::string::npos) {
    std::string rest = text.substr(marker + 7);
    text.resize(marker + 1);
    size_t begin = 0;
    while (begin < rest.size()) {
      const size_t end = rest.find('\n', begin);
      overrides.push_back(rest.substr(begin, end == std::string::npos ? end : end - begin));
      if (end == std::string::npos) break;
      begin = end + 1;
    }
  }
  const std::string& path = trainyard::fuzz::write_input(
      reinterpret_cast<const uint8_t*>(text.data()), text.size(), ".yaml");
  trainyard::fuzz::expect_clean([&] { trainyard::load_batch({path}, overrides, registry); });
  return 0;
}
