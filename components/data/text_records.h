// Users' text-classification files — CSV, TSV and JSON Lines — read into records of (text, label,
// line), and the training file's labels turned into class ids. LibTorch-free (trainyard_core), so
// that the fuzzer (fuzz/text_records_fuzz.cpp) drives the code the text datasets read with.
//
// A file reads here as it reads in Python, so that a file prepared with pandas or the csv module
// means the same to both (tests/fixtures/make_text_records_differential.py holds the comparison):
//   csv    csv.DictReader(open(path, encoding='utf-8-sig', newline=''), strict=True): ',' between
//          fields; '"' quotes, "" inside quotes is one '"'; quoted fields may hold newlines (kept
//          as written); records end at LF, CRLF or a lone CR; a quote inside an unquoted field is
//          an ordinary character (ab"c); the first record is the header; blank lines are skipped —
//          but a blank first line is the header, with no columns, as DictReader reads it.
//   tsv    the same with '\t' between fields (quoting stays on).
//   jsonl  json.loads on each line (lines end at LF) holding more than spaces, tabs and CRs; each
//          is one object. Duplicate keys: the last wins. NaN, Infinity, -Infinity and numbers too
//          large for a double are numbers (floats), integers of any length up to 4300 digits are
//          integers, as json.loads reads them (a label's text is then str(int): -0 is "0").
// A UTF-8 BOM at the start of the file is dropped; bytes that are not UTF-8 are an error, as
// Python's decoder raises on them.
//
// Where this differs from Python, on purpose (each an error that says what to fix):
//   - a record with more or fewer fields than the header (DictReader pads with None or gathers the
//     rest), a header naming a column twice (DictReader keeps the last), no records at all;
//   - a JSON string holding a lone UTF-16 surrogate ("\ud800": Python makes a str that cannot be
//     written as UTF-8; nlohmann refuses it);
//   - the limits below. A CSV field may be far longer than Python's default csv.field_size_limit()
//     of 131,072 characters (long documents are ordinary training data); JSON nested past
//     kMaxJsonDepth is refused where Python's recursion limit refuses it, near 1000 levels.
//
// Errors: the first malformed record throws UserError "<file>:<line>: <what is wrong>; <the fix>"
// (line 1-based). No input makes these functions throw anything else, allocate without bound or
// crash. The functions are pure: they may run on any thread.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace trainyard {

// Limits (the tokenizer downstream has its own, on sequence length).
inline constexpr int64_t kMaxTextFileBytes = int64_t{4} << 30;  // a whole file: 4 GiB
// One CSV/TSV field, or a JSON text or label, in bytes: 16 MiB.
inline constexpr int64_t kMaxFieldBytes = int64_t{16} << 20;
inline constexpr int64_t kMaxHeaderFields = 10'000;  // columns of a CSV/TSV header
inline constexpr int kMaxJsonDepth = 1000;           // nesting of arrays and objects in a line
inline constexpr int64_t kMaxClassId = 999'999;      // an integer label: 1,000,000 classes at most

enum class TextFormat { csv, tsv, jsonl };

// By extension, in any case: .csv -> csv, .tsv/.tab -> tsv, .jsonl/.ndjson -> jsonl; nullopt for
// any other (the dataset then asks for dataset.format).
std::optional<TextFormat> text_format_of(const std::string& path);
const char* to_string(TextFormat format);

// The names of the two fields a record needs: CSV/TSV column names, JSON keys.
struct TextFields {
  std::string text = "text";
  std::string label = "label";
};

struct TextRecord {
  std::string text;   // UTF-8, as written (no trimming, no newline translation)
  std::string label;  // as written: "positive"; an integer label as its decimal digits ("3")
  // A JSON integer, or a CSV/TSV field of an optional '-' and ASCII digits only ("007", "-1").
  bool label_is_integer = false;
  int64_t line = 0;  // 1-based line of the file where the record starts
};

// Every record of the file at `path`, in file order, never empty. UserError when the file is
// missing, over kMaxTextFileBytes or malformed (see above).
std::vector<TextRecord> read_text_records(const std::string& path, TextFormat format,
                                          const TextFields& fields);
// The same from bytes already in memory; `name` is what messages call the file.
std::vector<TextRecord> parse_text_records(std::string_view bytes, const std::string& name,
                                           TextFormat format, const TextFields& fields);

// Class ids, from the training file's labels alone (so that every other split maps the same way):
//   - every training label an integer: labels are class ids as written, each in 0..kMaxClassId;
//     there are max + 1 classes, named "0".."max" (a class no record uses still has its id);
//   - otherwise labels are names: the distinct labels sorted by bytes (code points, as Python's
//     sorted()); a label's class id is its index there.
struct LabelSet {
  bool integers = false;
  std::vector<std::string> names;  // class id -> label as written
  int64_t num_classes() const { return static_cast<int64_t>(names.size()); }
};
// UserError "<train_name>:<line>: ..." for a negative or too large integer label, or no records.
LabelSet label_set_of(const std::vector<TextRecord>& train, const std::string& train_name);

// The class id of `record` from file `name` (a training, validation or test file). UserError
// "<name>:<line>: label 'x' is not one of the training labels (a, b, c); ..." when it is not a
// training label, or, for integer labels, is not an integer, is negative or is past the largest.
int64_t class_id(const LabelSet& labels, const TextRecord& record, const std::string& name);

}  // namespace trainyard
