// A Hugging Face tokenizer.json (the textfile dataset's vocabulary): any JSON, any types where the
// library writes strings, numbers or objects, ids out of order. Accepted only as the uncased BERT
// family's; then the tokenizer it makes encodes a text to ids inside its vocabulary.
#include "components/text/wordpiece.h"
#include "fuzz/fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace trainyard;
  const std::string& path = fuzz::write_input(data, size, ".json");
  fuzz::expect_clean([&] {
    const WordPieceTokenizer tokenizer = WordPieceTokenizer::from_tokenizer_json(path);
    const Encoding encoding = tokenizer.encode("The MOVIE was great [SEP] naïve café", 16, true);
    if (encoding.input_ids.size() != 16) std::abort();
    for (int64_t id : encoding.input_ids)
      if (id < 0 || id >= tokenizer.vocab_size()) std::abort();
  });
  return 0;
}
