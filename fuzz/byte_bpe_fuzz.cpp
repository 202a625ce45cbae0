// Byte-level BPE on anything. An input whose first byte is even is a tokenizer.json (any JSON, any
// types where the library writes strings, numbers or objects, ids with holes): refused with a
// UserError or read into a tokenizer whose ids lie in its vocabulary. An odd first byte: the rest
// is text for the fixtures' three tokenizers (bytes that are not UTF-8, added tokens, spaces of
// every kind): ids in the vocabulary, the text cut where next_cut says gives the same ids, and with
// GPT-2's settings the ids decode back to the very bytes.
#include "components/text/byte_bpe.h"
#include "fuzz/fuzz_support.h"

namespace {

using trainyard::ByteBpeTokenizer;

void check_ids(const ByteBpeTokenizer& tokenizer, const std::vector<int32_t>& ids) {
  for (int32_t id : ids)
    if (id < 0 || id >= tokenizer.vocab_size()) std::abort();
}

void check_text(const ByteBpeTokenizer& tokenizer, std::string_view text, bool round_trip) {
  std::vector<int32_t> whole, pieces;
  tokenizer.encode_ordinary(text, whole);
  check_ids(tokenizer, whole);
  for (size_t start = 0; start < text.size();) {
    const size_t end = tokenizer.next_cut(text, start + 1);
    tokenizer.encode_ordinary(text.substr(start, end - start), pieces, start > 0);
    start = end;
  }
  if (pieces != whole) std::abort();
  if (round_trip && tokenizer.decode({whole.begin(), whole.end()}) != text) std::abort();
  const trainyard::Encoding encoding = tokenizer.encode(text, 16, true);
  if (encoding.input_ids.size() != 16 || encoding.attention_mask.size() != 16) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string_view rest(reinterpret_cast<const char*>(data) + 1, size - 1);
  if (data[0] % 2 == 0) {
    trainyard::fuzz::expect_clean([&] {
      const ByteBpeTokenizer tokenizer = ByteBpeTokenizer::from_json_text(rest, "fuzz.json");
      check_text(tokenizer, "The MOVIE's great <s>  <mask> naïve\n\n café 😀 12", false);
      tokenizer.decode(tokenizer.encode("x y"));
    });
    return 0;
  }
  static const auto fixture = [](const char* name) {
    return ByteBpeTokenizer::from_tokenizer_json(std::string(TRAINYARD_SOURCE_DIR) +
                                                 "/tests/fixtures/" + name);
  };
  static const ByteBpeTokenizer gpt2 = fixture("bpe_gpt2.json");
  static const ByteBpeTokenizer roberta = fixture("bpe_roberta.json");
  static const ByteBpeTokenizer templated = fixture("bpe_template.json");
  check_text(gpt2, rest, /*round_trip=*/true);
  check_text(roberta, rest, false);
  check_text(templated, rest, false);
  return 0;
}
