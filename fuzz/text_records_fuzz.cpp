// Users' text-classification files (CSV, TSV, JSON Lines): any bytes, read as each format, end in
// records or a UserError. Records read are never empty, their lines rise, and every training
// record has a class id in range; a label not among the training labels is a UserError.
#include <cstdlib>
#include <string_view>

#include "components/data/text_records.h"
#include "fuzz/fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace trainyard;
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  for (const TextFormat format : {TextFormat::csv, TextFormat::tsv, TextFormat::jsonl}) {
    std::vector<TextRecord> records;
    LabelSet labels;
    bool read = false;
    fuzz::expect_clean([&] {
      records = parse_text_records(bytes, "fuzz", format, TextFields{});
      labels = label_set_of(records, "fuzz");
      read = true;
    });
    if (!read) continue;
    if (records.empty() || labels.num_classes() < 1) std::abort();
    int64_t line = 0;
    for (const TextRecord& record : records) {
      if (record.line <= line) std::abort();
      line = record.line;
      // A training record's label is a training label: no error, whatever the bytes.
      try {
        const int64_t id = class_id(labels, record, "fuzz");
        if (id < 0 || id >= labels.num_classes()) std::abort();
      } catch (...) {
        std::abort();
      }
    }
    // Labels the training file does not hold: a UserError or, for integers in range, an id.
    TextRecord other = records.back();
    other.label += "x";
    other.label_is_integer = false;
    fuzz::expect_clean([&] { class_id(labels, other, "fuzz"); });
    other.label = "-1";
    other.label_is_integer = true;
    fuzz::expect_clean([&] { class_id(labels, other, "fuzz"); });
  }
  return 0;
}
