// The WordPiece tokenizer (BERT's uncased vocabulary of the fixtures) on any bytes: invalid UTF-8,
// control and combining characters, very long words.
#include "components/text/wordpiece.h"
#include "fuzz/fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const trainyard::WordPieceTokenizer tokenizer =
      trainyard::WordPieceTokenizer::from_vocab_file(std::string(TRAINYARD_SOURCE_DIR) +
                                                     "/tests/fixtures/vocab.txt");
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  trainyard::fuzz::expect_clean([&] {
    const trainyard::Encoding encoding = tokenizer.encode(text, 64, true);
    if (encoding.input_ids.size() != 64 || encoding.attention_mask.size() != 64) std::abort();
    for (int64_t id : encoding.input_ids)
      if (id < 0 || id >= tokenizer.vocab_size()) std::abort();
    tokenizer.tokenize(text);
  });
  return 0;
}
