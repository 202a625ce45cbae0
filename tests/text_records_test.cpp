// Users' text-classification files (components/data/text_records.h): CSV, TSV and JSON Lines read
// as Python's csv and json modules read them, every malformed file refused naming its line, and
// the training labels' class ids. MatchesPythonsCsvAndJson compares ~250 files with what Python
// read from them (tests/fixtures/make_text_records_differential.py).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <regex>

#include <nlohmann/json.hpp>

#include "components/data/text_records.h"
#include "tests/test_support.h"
#include "trainyard/error.h"

namespace trainyard {
namespace {

namespace fs = std::filesystem;

std::vector<TextRecord> parse(std::string_view bytes, TextFormat format = TextFormat::csv,
                              const TextFields& fields = {}) {
  return parse_text_records(bytes, "t", format, fields);
}

template <class Read>
std::string error_of(Read read) {
  try {
    read();
  } catch (const UserError& e) {
    return e.what();
  }
  return "no error";
}

// The message of the UserError `read` throws must start "t:<line>: " and contain `text`.
#define EXPECT_ERROR_AT(read, line, text)                                            \
  do {                                                                               \
    const std::string message = error_of([&] { read; });                             \
    EXPECT_TRUE(message.starts_with("t:" + std::to_string(line) + ": ")) << message; \
    EXPECT_NE(message.find(text), std::string::npos) << "error: " << message;        \
  } while (0)

// (text, label, line) of each record, for compact comparisons.
using Row = std::tuple<std::string, std::string, int64_t>;
std::vector<Row> rows(const std::vector<TextRecord>& records) {
  std::vector<Row> out;
  for (const TextRecord& r : records) out.emplace_back(r.text, r.label, r.line);
  return out;
}

// --- formats -----------------------------------------------------------------------------------

TEST(TextRecordsTest, FormatsFollowTheExtension) {
  EXPECT_EQ(text_format_of("a/train.csv"), TextFormat::csv);
  EXPECT_EQ(text_format_of("train.CSV"), TextFormat::csv);
  EXPECT_EQ(text_format_of("t.tsv"), TextFormat::tsv);
  EXPECT_EQ(text_format_of("t.tab"), TextFormat::tsv);
  EXPECT_EQ(text_format_of("t.jsonl"), TextFormat::jsonl);
  EXPECT_EQ(text_format_of("t.ndjson"), TextFormat::jsonl);
  EXPECT_EQ(text_format_of("t.json"), std::nullopt);
  EXPECT_EQ(text_format_of("t.csv.gz"), std::nullopt);
  EXPECT_STREQ(to_string(TextFormat::tsv), "tsv");
}

// --- CSV and TSV -------------------------------------------------------------------------------

TEST(TextRecordsTest, DropsAByteOrderMark) {
  const auto records = parse("\xEF\xBB\xBFtext,label\nhi,pos\n");
  EXPECT_EQ(rows(records), (std::vector<Row>{{"hi", "pos", 2}}));
  EXPECT_EQ(rows(parse("\xEF\xBB\xBF{\"text\": \"a\", \"label\": 1}", TextFormat::jsonl)),
            (std::vector<Row>{{"a", "1", 1}}));
}

TEST(TextRecordsTest, ReadsCrlfLines) {
  EXPECT_EQ(rows(parse("text,label\r\na,1\r\nb,2\r\n")),
            (std::vector<Row>{{"a", "1", 2}, {"b", "2", 3}}));
}

TEST(TextRecordsTest, ReadsLinesEndedByALoneCr) {
  EXPECT_EQ(rows(parse("text,label\ra,1\rb,2")), (std::vector<Row>{{"a", "1", 2}, {"b", "2", 3}}));
}

TEST(TextRecordsTest, KeepsNewlinesInsideQuotesAsWrittenAndCountsLinesAfterThem) {
  const auto records = parse("text,label\n\"one\ntwo\",a\n\"cr\rcrlf\r\nend\",b\nafter,c\n");
  EXPECT_EQ(
      rows(records),
      (std::vector<Row>{{"one\ntwo", "a", 2}, {"cr\rcrlf\r\nend", "b", 4}, {"after", "c", 7}}));
}

TEST(TextRecordsTest, ReadsDoubledQuotesAsOne) {
  EXPECT_EQ(rows(parse("text,label\n\"say \"\"hi\"\"\",a\n\"\"\"\",b\n")),
            (std::vector<Row>{{"say \"hi\"", "a", 2}, {"\"", "b", 3}}));
}

TEST(TextRecordsTest, ReadsAQuoteInsideAnUnquotedFieldAsAnOrdinaryCharacter) {
  EXPECT_EQ(rows(parse("text,label\nab\"c,1\n")), (std::vector<Row>{{"ab\"c", "1", 2}}));
}

TEST(TextRecordsTest, KeepsEmptyTexts) {
  EXPECT_EQ(rows(parse("label,text\na,\nb,\"\"\n")),
            (std::vector<Row>{{"", "a", 2}, {"", "b", 3}}));
  EXPECT_EQ(rows(parse("{\"text\": \"\", \"label\": 0}", TextFormat::jsonl)),
            (std::vector<Row>{{"", "0", 1}}));
}

TEST(TextRecordsTest, SkipsBlankLines) {
  EXPECT_EQ(rows(parse("text,label\n\na,1\r\n\r\n\rb,2\n\n")),
            (std::vector<Row>{{"a", "1", 3}, {"b", "2", 6}}));
}

TEST(TextRecordsTest, ReadsTsvWithQuotesStillActive) {
  const auto records = parse("label\ttext\n1\t\"a\tb\"\n2\tc,d\n", TextFormat::tsv);
  EXPECT_EQ(rows(records), (std::vector<Row>{{"a\tb", "1", 2}, {"c,d", "2", 3}}));
}

TEST(TextRecordsTest, CsvLabelsOfDigitsAreIntegers) {
  const auto records = parse("text,label\na,007\nb,-3\nc, 3\nd,+1\ne,-\n");
  std::vector<bool> integer;
  for (const TextRecord& r : records) integer.push_back(r.label_is_integer);
  EXPECT_EQ(integer, (std::vector<bool>{true, true, false, false, false}));
  EXPECT_EQ(records[0].label, "007");
}

TEST(TextRecordsTest, NamesTheFieldsWithTextFields) {
  const auto records = parse("id,sentence,y\n1,hi,pos\n", TextFormat::csv, {"sentence", "y"});
  EXPECT_EQ(rows(records), (std::vector<Row>{{"hi", "pos", 2}}));
}

TEST(TextRecordsTest, RefusesTextAfterAClosingQuote) {
  EXPECT_ERROR_AT(parse("text,label\nok,1\n\"ab\"c,2\n"), 3,
                  "'c' after the closing quote of a quoted field");
  EXPECT_ERROR_AT(parse("text\tlabel\n\"ab\" \t2\n", TextFormat::tsv), 2, "a tab");
}

TEST(TextRecordsTest, RefusesAQuoteStillOpenAtTheEndNamingTheLineItOpened) {
  EXPECT_ERROR_AT(parse("text,label\nok,1\n\"never\nclosed,2\n\n"), 3,
                  "still open at the end of the file");
  EXPECT_ERROR_AT(parse("text,label\nok,\""), 2, "still open");
}

TEST(TextRecordsTest, RefusesRecordsWithMoreOrFewerFieldsThanTheHeader) {
  EXPECT_ERROR_AT(parse("text,label,id\nx,1,7\ny,2\n"), 3,
                  "a record of 2 fields, where the header (line 1) has 3");
  EXPECT_ERROR_AT(parse("text,label\n\"a\nb\",1\nx,1,extra,more\n"), 4, "a record of 4 fields");
  EXPECT_ERROR_AT(parse("text,label\nx,1\n  \n"), 3, "a record of 1 field,");
}

TEST(TextRecordsTest, RefusesAHeaderWithoutTheTextOrLabelColumn) {
  EXPECT_ERROR_AT(parse("Text,label\nx,1\n"), 1,
                  "no column 'text' in the header (its columns: Text, label); name the column "
                  "that holds the texts with dataset.text_field (did you mean 'Text'?)");
  EXPECT_ERROR_AT(parse("text,y\nx,1\n"), 1, "dataset.label_field");
}

TEST(TextRecordsTest, RefusesAHeaderThatNamesAColumnTwice) {
  EXPECT_ERROR_AT(parse("text,label,text\nx,1,y\n"), 1, "names the column 'text' twice");
}

TEST(TextRecordsTest, RefusesABlankFirstLineWhichDictReaderTakesForAnEmptyHeader) {
  EXPECT_ERROR_AT(parse("\ntext,label\nx,1\n"), 1, "the header, is blank");
}

TEST(TextRecordsTest, RefusesAFileWithoutRecords) {
  EXPECT_ERROR_AT(parse(""), 1, "no records");
  EXPECT_ERROR_AT(parse("\xEF\xBB\xBF"), 1, "no records");
  EXPECT_ERROR_AT(parse("text,label\n\n\n"), 1, "no records");
  EXPECT_ERROR_AT(parse("\n \t\r\n", TextFormat::jsonl), 1, "no records");
}

TEST(TextRecordsTest, RefusesBytesThatAreNotUtf8NamingTheLine) {
  EXPECT_ERROR_AT(parse("text,label\r\nok,1\rbad \xFF,2\n"), 3, "not UTF-8 (0xff at column 5)");
  EXPECT_ERROR_AT(parse("text,label\n\xED\xA0\x80,1\n"), 2, "not UTF-8");             // a surrogate
  EXPECT_ERROR_AT(parse("text,label\n\xC0\xAF,1\n"), 2, "not UTF-8");                 // overlong
  EXPECT_ERROR_AT(parse("{}\r{}\n\"\xE2\x82\"", TextFormat::jsonl), 2, "not UTF-8");  // cut
}

TEST(TextRecordsTest, RefusesAFieldOverTheLimit) {
  const std::string text(static_cast<size_t>(kMaxFieldBytes) + 1, 'x');
  EXPECT_ERROR_AT(parse("text,label\nok,1\n\"" + text + "\",2\n"), 3,
                  "a field longer than 16.0 MiB (the limit): a quote opened here");
  EXPECT_ERROR_AT(parse("{\"label\": 1, \"text\": \"" + text + "\"}", TextFormat::jsonl), 1,
                  "the text is longer than 16.0 MiB");
  EXPECT_EQ(parse("text,label\n" + text.substr(1) + ",1\n")[0].text.size(), text.size() - 1);
}

TEST(TextRecordsTest, RefusesAHeaderOverTheColumnLimit) {
  std::string header = "text,label";
  for (int i = 0; i < kMaxHeaderFields; ++i) header += ",c" + std::to_string(i);
  EXPECT_ERROR_AT(parse(header + "\n"), 1, "the header has 10002 columns, more than the limit");
}

TEST(TextRecordsTest, RefusesAFileOverTheSizeLimitBeforeReadingIt) {
  testing::TempDir dir;
  const std::string path = dir.write("big.csv", "");
  fs::resize_file(path, static_cast<uintmax_t>(kMaxTextFileBytes) + 1);  // sparse
  const std::string message = error_of([&] { read_text_records(path, TextFormat::csv, {}); });
  EXPECT_NE(message.find(path + ":1: the file is 4.0 GiB, over the limit of 4.0 GiB"),
            std::string::npos)
      << message;
  EXPECT_NE(
      error_of([&] { read_text_records(path + ".no", TextFormat::csv, {}); }).find("no such file"),
      std::string::npos);
}

// --- JSON Lines --------------------------------------------------------------------------------

TEST(TextRecordsTest, ReadsJsonLinesWithStringAndIntegerLabels) {
  const auto records = parse(
      "{\"text\": \"a\", \"label\": \"pos\"}\n\n \t\r\n{\"label\": -0, \"text\": \"b\\u00e9\"}\r\n"
      "{\"text\": \"c\", \"label\": 12345678901234567890123}\n",
      TextFormat::jsonl);
  EXPECT_EQ(rows(records),
            (std::vector<Row>{
                {"a", "pos", 1}, {"b\xC3\xA9", "0", 4}, {"c", "12345678901234567890123", 5}}));
  EXPECT_FALSE(records[0].label_is_integer);
  EXPECT_TRUE(records[1].label_is_integer);
  EXPECT_TRUE(records[2].label_is_integer);
}

TEST(TextRecordsTest, ReadsJsonAsJsonLoadsDoes) {
  // The last of repeated keys wins; NaN, Infinity and floats past a double's range are numbers.
  const auto records = parse(
      "{\"text\": \"first\", \"label\": 1, \"text\": \"last\", \"x\": [NaN, -Infinity, 1e400]}\n",
      TextFormat::jsonl);
  EXPECT_EQ(rows(records), (std::vector<Row>{{"last", "1", 1}}));
  EXPECT_ERROR_AT(parse("{\"text\": \"a\", \"label\": -NaN}", TextFormat::jsonl), 1, "not JSON");
  EXPECT_ERROR_AT(parse("{\"text\": \"a\", \"label\": NaN}", TextFormat::jsonl), 1,
                  "is a number with a fraction or exponent (NaN)");
}

TEST(TextRecordsTest, RefusesALineThatIsNotJsonNamingTheColumn) {
  EXPECT_ERROR_AT(
      parse("{\"text\": \"a\", \"label\": 1}\n{\"text\": \"b\", \"label\": }", TextFormat::jsonl),
      2, "not JSON (column 24: syntax error");
  EXPECT_ERROR_AT(parse("{\"text\": \"a\", \"label\": 1}\r{}", TextFormat::jsonl), 1, "not JSON");
  EXPECT_ERROR_AT(parse("{\"text\": \"\\ud800\", \"label\": 1}", TextFormat::jsonl), 1, "not JSON");
  EXPECT_ERROR_AT(parse("{\"text\": \"a\", \"label\": 1, \"x\": " + std::string(4301, '9') + "}",
                        TextFormat::jsonl),
                  1, "more than json.loads reads, 4300");
}

TEST(TextRecordsTest, RefusesAByteOrderMarkInsideTheFile) {
  EXPECT_ERROR_AT(parse("{\"text\": \"a\", \"label\": 1}\n\xEF\xBB\xBF{}", TextFormat::jsonl), 2,
                  "byte order mark");
}

TEST(TextRecordsTest, RefusesALineThatIsNotAnObject) {
  EXPECT_ERROR_AT(parse("{\"text\": \"a\", \"label\": 1}\n[1, 2]\n", TextFormat::jsonl), 2,
                  "an array, not a JSON object");
}

TEST(TextRecordsTest, RefusesAnObjectWithoutTheTextOrLabelKey) {
  EXPECT_ERROR_AT(parse("{\"txt\": \"a\", \"label\": 1, \"txt\": \"b\"}", TextFormat::jsonl), 1,
                  "no key 'text' in the object (its keys: txt, label); name the key that holds "
                  "the texts with dataset.text_field (did you mean 'txt'?)");
  EXPECT_ERROR_AT(parse("{\"text\": \"a\"}", TextFormat::jsonl), 1, "dataset.label_field");
}

TEST(TextRecordsTest, RefusesATextThatIsNotAString) {
  EXPECT_ERROR_AT(parse("{\"text\": null, \"label\": 1}", TextFormat::jsonl), 1,
                  "the text, 'text', is null, not a string");
  EXPECT_ERROR_AT(parse("{\"text\": [\"a\"], \"label\": 1}", TextFormat::jsonl), 1, "an array");
}

TEST(TextRecordsTest, RefusesALabelThatIsNeitherAStringNorAnInteger) {
  const std::pair<const char*, const char*> cases[] = {
      {"1.0", "a number with a fraction or exponent (1.0)"},
      {"true", "a boolean (true)"},
      {"null", "null"},
      {"{\"a\": 1}", "an object"},
      {"[1]", "an array"},
  };
  for (const auto& [label, kind] : cases) {
    const std::string line = std::string("{\"text\": \"a\", \"label\": ") + label + "}";
    EXPECT_ERROR_AT(parse(line, TextFormat::jsonl), 1,
                    std::string("the label, 'label', is ") + kind);
  }
}

TEST(TextRecordsTest, RefusesJsonNestedPastTheLimit) {
  const auto nested = [](int depth) {
    return "{\"text\": \"a\", \"label\": 1, \"x\": " + std::string(depth - 1, '[') +
           std::string(depth - 1, ']') + "}";
  };
  EXPECT_EQ(parse(nested(kMaxJsonDepth), TextFormat::jsonl).size(), 1u);
  EXPECT_ERROR_AT(parse(nested(kMaxJsonDepth + 1), TextFormat::jsonl), 1,
                  "nested deeper than 1000 levels");
}

// --- labels ------------------------------------------------------------------------------------

TEST(TextRecordsTest, IntegerLabelsAreClassIdsAsWritten) {
  const auto train = parse("text,label\na,2\nb,0\nc,004\n");
  const LabelSet labels = label_set_of(train, "t");
  EXPECT_TRUE(labels.integers);
  EXPECT_EQ(labels.names, (std::vector<std::string>{"0", "1", "2", "3", "4"}));
  EXPECT_EQ(labels.num_classes(), 5);
  EXPECT_EQ(class_id(labels, train[0], "t"), 2);
  EXPECT_EQ(class_id(labels, train[2], "t"), 4);
}

TEST(TextRecordsTest, StringLabelsAreSortedByBytes) {
  const auto train = parse("text,label\na,neg\nb,Pos\nc,\xC3\xA9t\xC3\xA9\nd,neg\ne,1\n");
  const LabelSet labels = label_set_of(train, "t");
  EXPECT_FALSE(labels.integers);
  EXPECT_EQ(labels.names, (std::vector<std::string>{"1", "Pos", "neg", "\xC3\xA9t\xC3\xA9"}));
  EXPECT_EQ(class_id(labels, train[0], "t"), 2);
  EXPECT_EQ(class_id(labels, train[2], "t"), 3);
  EXPECT_EQ(class_id(labels, train[4], "t"), 0);
}

TEST(TextRecordsTest, RefusesANegativeOrHugeIntegerTrainingLabel) {
  EXPECT_ERROR_AT(label_set_of(parse("text,label\na,1\nb,-2\n"), "t"), 3, "label -2 is negative");
  EXPECT_ERROR_AT(label_set_of(parse("text,label\na,1000000\n"), "t"), 2,
                  "label 1000000 is too large");
  EXPECT_EQ(label_set_of(parse("text,label\na,-0\nb,999999\n"), "t").num_classes(), 1'000'000);
}

TEST(TextRecordsTest, RefusesALabelThatIsNotATrainingLabel) {
  const LabelSet names = label_set_of(parse("text,label\na,neg\nb,pos\n"), "t");
  const auto test = parse("text,label\nx,pos\ny,neutral\n");
  EXPECT_EQ(class_id(names, test[0], "t"), 1);
  EXPECT_ERROR_AT(class_id(names, test[1], "t"), 3,
                  "label 'neutral' is not one of the training labels (neg, pos); correct the "
                  "label, or add records of it to the training file");

  const LabelSet ids = label_set_of(parse("text,label\na,0\nb,1\n"), "t");
  const auto other = parse("text,label\nx,1\ny,2\nz,-1\nw,one\n");
  EXPECT_EQ(class_id(ids, other[0], "t"), 1);
  EXPECT_ERROR_AT(class_id(ids, other[1], "t"), 3,
                  "label 2 is not one of the training labels "
                  "(class ids 0..1)");
  EXPECT_ERROR_AT(class_id(ids, other[2], "t"), 4, "label -1 is not one of the training labels");
  EXPECT_ERROR_AT(class_id(ids, other[3], "t"), 5,
                  "label 'one' is not one of the training "
                  "labels (class ids 0..1): those are integers");
}

// --- the differential against Python ------------------------------------------------------------

TEST(TextRecordsTest, MatchesPythonsCsvAndJson) {
  const fs::path folder =
      fs::path(TRAINYARD_SOURCE_DIR) / "tests/fixtures/text_records_differential";
  std::ifstream in(folder / "expected.json");
  ASSERT_TRUE(in) << "run tests/fixtures/make_text_records_differential.py";
  const nlohmann::json expected = nlohmann::json::parse(in)["files"];
  ASSERT_GE(expected.size(), 200u);
  int compared = 0, errors = 0;
  for (const auto& [name, entry] : expected.items()) {
    SCOPED_TRACE(name);
    const std::string path = (folder / name).string();
    const std::string format = entry["format"];
    const std::optional<TextFormat> by_extension = text_format_of(path);
    ASSERT_TRUE(by_extension);
    ASSERT_EQ(to_string(*by_extension), format);
    const TextFields fields{entry["text_field"], entry["label_field"]};
    if (entry.contains("error")) {
      ++errors;
      const std::string message = error_of([&] { read_text_records(path, *by_extension, fields); });
      EXPECT_TRUE(message.starts_with(path + ":") &&
                  std::regex_search(message.substr(path.size()), std::regex("^:[0-9]+: .+; .+")))
          << "Python refuses the file; we say: " << message;
      continue;
    }
    std::vector<TextRecord> records;
    try {
      records = read_text_records(path, *by_extension, fields);
    } catch (const UserError& e) {
      ADD_FAILURE() << "Python reads the file; we refuse it: " << e.what();
      continue;
    }
    const auto& want = entry["records"];
    if (records.size() != want.size()) {
      ADD_FAILURE() << records.size() << " records, where Python reads " << want.size();
      continue;
    }
    for (size_t i = 0; i < records.size(); ++i) {
      EXPECT_EQ(records[i].text, want[i]["text"]) << "record " << i;
      EXPECT_EQ(records[i].label, want[i]["label"]) << "record " << i;
      EXPECT_EQ(records[i].label_is_integer, want[i]["integer"]) << "record " << i;
      EXPECT_EQ(records[i].line, want[i]["line"]) << "record " << i;
    }
    ++compared;
  }
  std::printf("compared %d files Python reads and %d it refuses\n", compared, errors);
}

}  // namespace
}  // namespace trainyard
