// The aclImdb reader's token cache (a safetensors file the reader wrote, perhaps damaged since):
// accepted only when every sequence TextDataset will index lies inside the ids, with ids in the
// vocabulary and labels classes; anything else is refused (the reviews are then tokenised again).
#include "components/data/tokenized_texts.h"
#include "fuzz/fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace trainyard;
  constexpr int64_t kVocab = 1000, kClasses = 2;
  const std::string& path = fuzz::write_input(data, size, ".safetensors");
  fuzz::expect_clean([&] {
    std::string damage;
    const std::optional<TokenizedTexts> texts =
        read_token_cache(path, "fuzz", kVocab, kClasses, &damage);
    if (!texts) return;
    if (!damage.empty()) std::abort();
    // What TextDataset does with it, unchecked.
    int64_t sum = 0;
    for (int64_t i = 0; i < texts->size(); ++i) {
      for (int64_t t = texts->offsets[i]; t < texts->offsets[i + 1]; ++t)
        sum += texts->ids[static_cast<size_t>(t)];
      sum += texts->labels[static_cast<size_t>(i)];
    }
    if (sum < 0) std::abort();
  });
  return 0;
}
