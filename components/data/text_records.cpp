#include "components/data/text_records.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <utility>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "common/text.h"
#include "trainyard/error.h"

namespace trainyard {

namespace {

constexpr std::string_view kBom = "\xEF\xBB\xBF";

// --- messages ----------------------------------------------------------------------------------

[[noreturn]] void fail(const std::string& name, int64_t line, const std::string& what_and_fix) {
  throw UserError(fmt::format("{}:{}: {}", name, line, what_and_fix));
}

// `text` fit for one line of a message: at most about `max_bytes`, control characters and bytes
// that are not UTF-8 escaped (nlohmann's token strings may end inside a character).
std::string shown(std::string_view text, size_t max_bytes = 60) {
  std::string out;
  for (size_t i = 0; i < text.size();) {
    if (out.size() >= max_bytes) return out + "...";
    const auto c = static_cast<unsigned char>(text[i]);
    size_t length = c < 0x80                ? 1
                    : c >= 0xC2 && c < 0xE0 ? 2
                    : c >= 0xE0 && c < 0xF0 ? 3
                    : c >= 0xF0 && c < 0xF5 ? 4
                                            : 0;
    for (size_t k = 1; k < length; ++k)
      if (i + k >= text.size() || (static_cast<unsigned char>(text[i + k]) & 0xC0) != 0x80)
        length = 0;
    if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (length == 0 || c < 0x20 || c == 0x7F) {
      out += fmt::format("\\x{:02x}", c);
    } else {
      out.append(text.substr(i, length));
      i += length;
      continue;
    }
    ++i;
  }
  return out;
}

std::string in_quotes(std::string_view text) { return "'" + shown(text) + "'"; }

// "a, b, c" for at most 20 names, then how many there are in all.
std::string name_list(const std::vector<std::string>& names) {
  std::vector<std::string> items;
  for (size_t i = 0; i < names.size() && i < 20; ++i) items.push_back(shown(names[i], 40));
  std::string list = join(items);
  if (names.size() > 20) list += fmt::format(", ... ({} in all)", names.size());
  return list;
}

std::string did_you_mean(const std::string& word, const std::vector<std::string>& candidates) {
  std::vector<std::string> near;  // of a length that can be close: edit distance is quadratic
  for (const std::string& candidate : candidates)
    if (candidate.size() <= 2 * word.size() + 2) near.push_back(candidate);
  const std::string close = closest_match(word, near);
  return close.empty() ? "" : fmt::format(" (did you mean '{}'?)", shown(close));
}

// --- bytes ---------------------------------------------------------------------------------------

// The offset of the first byte that Python's strict UTF-8 decoder refuses (a stray continuation
// byte, an overlong form, a surrogate, a code point past U+10FFFF, a cut sequence), or npos.
size_t invalid_utf8_at(std::string_view bytes) {
  const auto at = [&](size_t i) { return static_cast<unsigned char>(bytes[i]); };
  for (size_t i = 0; i < bytes.size();) {
    const unsigned char c = at(i);
    if (c < 0x80) {
      ++i;
      continue;
    }
    size_t length = 0;
    unsigned char low = 0x80, high = 0xBF;  // the second byte's range
    if (c >= 0xC2 && c <= 0xDF) {
      length = 2;
    } else if (c >= 0xE0 && c <= 0xEF) {
      length = 3;
      if (c == 0xE0) low = 0xA0;   // overlong
      if (c == 0xED) high = 0x9F;  // surrogates
    } else if (c >= 0xF0 && c <= 0xF4) {
      length = 4;
      if (c == 0xF0) low = 0x90;   // overlong
      if (c == 0xF4) high = 0x8F;  // past U+10FFFF
    } else {
      return i;
    }
    if (i + 1 >= bytes.size() || at(i + 1) < low || at(i + 1) > high) return i;
    for (size_t k = 2; k < length; ++k)
      if (i + k >= bytes.size() || (at(i + k) & 0xC0) != 0x80) return i;
    i += length;
  }
  return std::string_view::npos;
}

// The 1-based line and column (in bytes) of `offset`: lines end at LF, and also at CR (alone or
// before LF) when `cr_ends_lines` (the csv module's reading).
std::pair<int64_t, int64_t> line_and_column(std::string_view text, size_t offset,
                                            bool cr_ends_lines) {
  int64_t line = 1;
  size_t line_start = 0;
  for (size_t i = 0; i < offset; ++i) {
    const bool ends = text[i] == '\n' || (cr_ends_lines && text[i] == '\r' &&
                                          (i + 1 >= text.size() || text[i + 1] != '\n'));
    if (ends) {
      ++line;
      line_start = i + 1;
    }
  }
  return {line, static_cast<int64_t>(offset - line_start) + 1};
}

bool is_digit(char c) { return c >= '0' && c <= '9'; }

// An optional '-' and one or more ASCII digits: what a CSV/TSV integer label looks like.
bool is_integer_text(std::string_view text) {
  if (!text.empty() && text[0] == '-') text.remove_prefix(1);
  return !text.empty() && std::all_of(text.begin(), text.end(), is_digit);
}

// --- CSV and TSV ---------------------------------------------------------------------------------

// The csv module's reader (Modules/_csv.c, parse_process_char) with the excel dialect and
// strict=True, over bytes: every character it treats specially is ASCII, so bytes and code
// points agree. Lines are split as open(..., newline='') splits them, and the end of each line is
// the reader's EOL event.
class DelimitedReader {
 public:
  DelimitedReader(std::string_view text, char delimiter, const std::string& name)
      : text_(text), delimiter_(delimiter), name_(name) {}

  std::vector<TextRecord> read(const TextFields& fields);

 private:
  enum class State { start_record, start_field, in_field, in_quoted, quote_in_quoted, eat_crnl };
  static constexpr int kEol = -1;

  bool next_row();
  void process(int c);
  void add(int c);
  void save_field();
  std::string delimiter_name() const { return delimiter_ == '\t' ? "a tab" : "','"; }
  size_t column_of(const std::vector<std::string>& header, const std::string& field,
                   const char* role, const char* option) const;

  std::string_view text_;
  char delimiter_;
  const std::string& name_;
  size_t pos_ = 0;
  int64_t line_ = 1;  // the physical line being read
  State state_ = State::start_record;
  std::vector<std::string> row_;  // the record's first max_fields_ fields
  size_t extra_fields_ = 0;       // and how many more it has, counted, not kept
  size_t max_fields_ = kMaxHeaderFields;
  std::string field_;
  bool quoted_ = false;
  int64_t row_line_ = 0, field_line_ = 0;
};

// The next record's fields into row_ (none for a blank line); false at the end of the file.
bool DelimitedReader::next_row() {
  if (pos_ >= text_.size()) return false;
  row_.clear();
  extra_fields_ = 0;
  field_.clear();
  state_ = State::start_record;
  row_line_ = line_;
  while (true) {
    while (pos_ < text_.size()) {
      const char c = text_[pos_++];
      process(static_cast<unsigned char>(c));
      if (c == '\n') break;
      if (c == '\r') {
        if (pos_ < text_.size() && text_[pos_] == '\n') process(text_[pos_++]);
        break;
      }
    }
    process(kEol);
    ++line_;
    if (state_ == State::start_record) return true;
    if (pos_ >= text_.size())  // only an open quoted field carries a record past its line
      fail(name_, field_line_,
           "the quoted field that starts here is still open at the end of the file; end it with "
           "'\"', and write each '\"' inside it as two (\"\")");
  }
}

void DelimitedReader::process(int c) {
  const bool line_end = c == '\n' || c == '\r' || c == kEol;
  switch (state_) {
    case State::start_record:
      if (c == kEol) return;  // a blank line: a record of no fields
      if (c == '\n' || c == '\r') {
        state_ = State::eat_crnl;
        return;
      }
      state_ = State::start_field;
      [[fallthrough]];
    case State::start_field:
      field_line_ = line_;
      if (line_end) {
        save_field();
        state_ = c == kEol ? State::start_record : State::eat_crnl;
      } else if (c == '"') {
        quoted_ = true;
        state_ = State::in_quoted;
      } else if (c == delimiter_) {
        save_field();
      } else {
        add(c);
        state_ = State::in_field;
      }
      return;
    case State::in_field:
      if (line_end) {
        save_field();
        state_ = c == kEol ? State::start_record : State::eat_crnl;
      } else if (c == delimiter_) {
        save_field();
        state_ = State::start_field;
      } else {
        add(c);  // a '"' here is an ordinary character, as in Python (ab"c)
      }
      return;
    case State::in_quoted:
      if (c == '"') {
        state_ = State::quote_in_quoted;
      } else if (c != kEol) {
        add(c);  // newlines too, as written
      }
      return;
    case State::quote_in_quoted:
      if (c == '"') {  // "" inside quotes
        add(c);
        state_ = State::in_quoted;
      } else if (c == delimiter_) {
        save_field();
        state_ = State::start_field;
      } else if (line_end) {
        save_field();
        state_ = c == kEol ? State::start_record : State::eat_crnl;
      } else {
        // The whole character the byte starts, for the message (the text is valid UTF-8).
        size_t end = pos_;
        while (end < text_.size() && (static_cast<unsigned char>(text_[end]) & 0xC0) == 0x80) ++end;
        fail(name_, line_,
             fmt::format("{} after the closing quote of a quoted field, where {} or the line's "
                         "end must follow; write each '\"' inside quotes as two (\"\"), or quote "
                         "the whole field",
                         in_quotes(text_.substr(pos_ - 1, end - pos_ + 1)), delimiter_name()));
      }
      return;
    case State::eat_crnl:  // the LF of a CRLF, then the line's end
      if (c == kEol) state_ = State::start_record;
      return;
  }
}

void DelimitedReader::add(int c) {
  if (static_cast<int64_t>(field_.size()) >= kMaxFieldBytes)
    fail(name_, field_line_,
         fmt::format("a field longer than {} (the limit){}; split the text, or check the file's "
                     "quoting",
                     format_bytes(static_cast<double>(kMaxFieldBytes)),
                     quoted_ ? ": a quote opened here and never closed?" : ""));
  field_.push_back(static_cast<char>(c));
}

void DelimitedReader::save_field() {
  if (row_.size() < max_fields_)
    row_.push_back(std::move(field_));
  else
    ++extra_fields_;
  field_.clear();
  quoted_ = false;
}

size_t DelimitedReader::column_of(const std::vector<std::string>& header, const std::string& field,
                                  const char* role, const char* option) const {
  const auto found = std::find(header.begin(), header.end(), field);
  if (found != header.end()) return static_cast<size_t>(found - header.begin());
  fail(name_, row_line_,
       fmt::format("no column {} in the header (its columns: {}); name the column that holds the "
                   "{} with {}{}",
                   in_quotes(field), name_list(header), role, option, did_you_mean(field, header)));
}

std::vector<TextRecord> DelimitedReader::read(const TextFields& fields) {
  if (!next_row())
    fail(name_, 1,
         fmt::format("no records: the file is empty; the first line names the columns ({}), each "
                     "line after it is one record",
                     fields.text + std::string(delimiter_ == '\t' ? "\\t" : ",") + fields.label));
  const std::vector<std::string> header = row_;
  const int64_t header_line = row_line_;
  if (extra_fields_ > 0)
    fail(name_, header_line,
         fmt::format("the header has {} columns, more than the limit of {}; is the first line a "
                     "header, and the delimiter {}?",
                     header.size() + extra_fields_, kMaxHeaderFields, delimiter_name()));
  if (header.empty())
    fail(name_, header_line,
         fmt::format("the first line, the header, is blank; it must name the columns, such as "
                     "{}{}{}",
                     fields.text, delimiter_ == '\t' ? "\\t" : ",", fields.label));
  std::vector<std::string> sorted = header;
  std::sort(sorted.begin(), sorted.end());
  if (const auto twice = std::adjacent_find(sorted.begin(), sorted.end()); twice != sorted.end())
    fail(name_, header_line,
         fmt::format("the header names the column {} twice; give each column its own name",
                     in_quotes(*twice)));
  const size_t text_column = column_of(header, fields.text, "texts", "dataset.text_field");
  const size_t label_column = column_of(header, fields.label, "labels", "dataset.label_field");

  std::vector<TextRecord> records;
  max_fields_ = header.size();
  while (next_row()) {
    if (row_.empty()) continue;  // a blank line, which DictReader skips
    const size_t count = row_.size() + extra_fields_;
    if (count != header.size())
      fail(name_, row_line_,
           fmt::format("a record of {}, where the header (line {}) has {}; quote a field "
                       "that holds {} or a line break (\"a{}b\"), and give each record one field "
                       "per column",
                       plural(static_cast<int64_t>(count), "field"), header_line, header.size(),
                       delimiter_name(), delimiter_ == '\t' ? "\\t" : ","));
    TextRecord record;
    record.label = row_[label_column];
    record.label_is_integer = is_integer_text(record.label);
    record.text = std::move(row_[text_column]);
    record.line = row_line_;
    records.push_back(std::move(record));
  }
  if (records.empty())
    fail(name_, header_line,
         "no records: the file holds the header and nothing after it; add one record per line");
  return records;
}

// --- JSON Lines ----------------------------------------------------------------------------------

// What a JSON value is, for messages and the two fields' checks.
enum class JsonKind { none, string, integer, floating, boolean, null, object, array };

const char* describe(JsonKind kind) {
  switch (kind) {
    case JsonKind::string:
      return "a string";
    case JsonKind::integer:
      return "an integer";
    case JsonKind::floating:
      return "a number with a fraction or exponent";
    case JsonKind::boolean:
      return "a boolean";
    case JsonKind::null:
      return "null";
    case JsonKind::object:
      return "an object";
    case JsonKind::array:
      return "an array";
    case JsonKind::none:
      break;
  }
  return "nothing";
}

struct JsonValue {
  JsonKind kind = JsonKind::none;
  std::string text;  // a string's value; a number, boolean or null as written
};

// A number token json.loads reads that nlohmann refuses or reads only as a double: NaN, Infinity,
// -Infinity, every float (nlohmann refuses those that overflow, Python makes them inf) and
// integers past int64 (up to Python's 4300 digits). Each is rewritten in the line to a finite
// float of the same length, so that nlohmann's columns stay right, and kept here as written.
struct RewrittenNumber {
  int64_t index = 0;  // among the line's number tokens, in order: the SAX parser's numbering
  bool integer = false;
  std::string written;
};

struct PythonNumbers {
  std::string line;  // the rewritten line, or empty when nothing was rewritten
  std::vector<RewrittenNumber> numbers;
};

// The length of the number json.loads's scanner reads at `at` (its regular expression
// -?(0|[1-9]\d*)(\.\d+)?([eE][-+]?\d+)?), 0 when none; whether it is a float, and its integer
// digits.
size_t python_number_at(std::string_view s, size_t at, bool& is_float, size_t& digits) {
  size_t i = at;
  if (i < s.size() && s[i] == '-') ++i;
  const size_t first_digit = i;
  if (i < s.size() && s[i] == '0') {
    ++i;
  } else if (i < s.size() && s[i] >= '1' && s[i] <= '9') {
    while (i < s.size() && is_digit(s[i])) ++i;
  } else {
    return 0;
  }
  digits = i - first_digit;
  is_float = false;
  if (i + 1 < s.size() && s[i] == '.' && is_digit(s[i + 1])) {
    i += 2;
    while (i < s.size() && is_digit(s[i])) ++i;
    is_float = true;
  }
  if (i < s.size() && (s[i] == 'e' || s[i] == 'E')) {
    size_t k = i + 1;
    if (k < s.size() && (s[k] == '+' || s[k] == '-')) ++k;
    if (k < s.size() && is_digit(s[k])) {
      while (k < s.size() && is_digit(s[k])) ++k;
      i = k;
      is_float = true;
    }
  }
  return i - at;
}

// Python's numbers of `line` that nlohmann would not read as Python does, rewritten (see
// RewrittenNumber). Only tokens between JSON's separators are touched: in a line that is JSON to
// Python those are exactly its values, and in any other line they stay as wrong for nlohmann as
// they were for Python. UserError for an integer past Python's 4300 digits.
PythonNumbers python_numbers(std::string_view line, const std::string& name, int64_t line_number) {
  PythonNumbers out;
  const auto separated = [](char c) { return std::string_view(" \t\r\n[]{},:").find(c); };
  int64_t index = 0;
  bool in_string = false;
  for (size_t i = 0; i < line.size();) {
    const char c = line[i];
    if (in_string) {
      if (c == '\\') {
        i += 2;
        continue;
      }
      in_string = c != '"';
      ++i;
      continue;
    }
    if (c == '"') {
      in_string = true;
      ++i;
      continue;
    }
    const bool after_separator =
        i == 0 || std::string_view(" \t\r[{,:").find(line[i - 1]) != std::string_view::npos;
    size_t length = 0, digits = 0;
    bool is_float = true;
    const std::string_view rest = line.substr(i);
    if (!after_separator) {
    } else if (rest.starts_with("NaN")) {
      length = 3;
    } else if (rest.starts_with("Infinity")) {
      length = 8;
    } else if (rest.starts_with("-Infinity")) {
      length = 9;
    } else {
      length = python_number_at(line, i, is_float, digits);
    }
    if (length == 0) {
      ++i;
      continue;
    }
    const size_t end = i + length;
    if (end < line.size() && separated(line[end]) == std::string_view::npos) {
      i = end;  // "1x", "NaNa": an error to both
      continue;
    }
    if (!is_float && digits > 4300)
      fail(name, line_number,
           fmt::format("not JSON (column {}: an integer of {} digits, more than json.loads reads, "
                       "4300); write it as a string",
                       i + 1, digits));
    if (is_float || digits > 18) {
      if (out.line.empty()) out.line = std::string(line);
      const size_t sign = line[i] == '-' ? 1 : 0;
      out.line.replace(i + sign, length - sign, "0." + std::string(length - sign - 2, '0'));
      out.numbers.push_back(
          {.index = index, .integer = !is_float, .written = std::string(rest.substr(0, length))});
    }
    ++index;
    i = end;
  }
  return out;
}

// nlohmann's SAX interface over one line: the kind of the top-level value, the keys of the
// top-level object (the last value of a repeated key wins, as in json.loads), and the values of
// the text and label keys.
class JsonLineHandler {
 public:
  using json = nlohmann::json;

  JsonLineHandler(const TextFields& fields, const std::vector<RewrittenNumber>& rewritten)
      : fields_(fields), rewritten_(rewritten) {}

  bool null() { return value(JsonKind::null, ""); }
  bool boolean(bool b) { return value(JsonKind::boolean, b ? "true" : "false"); }
  bool number_integer(json::number_integer_t v) {
    return number(JsonKind::integer, std::to_string(v));
  }
  bool number_unsigned(json::number_unsigned_t v) {
    return number(JsonKind::integer, std::to_string(v));
  }
  bool number_float(json::number_float_t, const std::string& written) {
    // Every float was rewritten (python_numbers), so this one is in the list.
    while (next_rewritten_ < rewritten_.size() && rewritten_[next_rewritten_].index < numbers_)
      ++next_rewritten_;
    if (next_rewritten_ < rewritten_.size() && rewritten_[next_rewritten_].index == numbers_) {
      const RewrittenNumber& n = rewritten_[next_rewritten_];
      return number(n.integer ? JsonKind::integer : JsonKind::floating, n.written);
    }
    return number(JsonKind::floating, written);
  }
  bool string(std::string& s) { return value(JsonKind::string, s); }
  bool binary(json::binary_t&) { return value(JsonKind::null, ""); }  // not in JSON text
  bool start_object(size_t) { return open(JsonKind::object); }
  bool start_array(size_t) { return open(JsonKind::array); }
  bool end_object() { return close(); }
  bool end_array() { return close(); }
  bool key(std::string& k) {
    if (depth_ == 1) {
      keys_.push_back(k);
      for_text_ = k == fields_.text;
      for_label_ = k == fields_.label;
    }
    return true;
  }
  bool parse_error(size_t position, const std::string&, const nlohmann::detail::exception& e) {
    std::string what = e.what();
    if (const size_t id_end = what.find("] "); id_end != std::string::npos)
      what.erase(0, id_end + 2);
    if (what.starts_with("parse error at line 1, "))
      what.erase(0, std::string_view("parse error at line 1, ").size());
    else
      what = fmt::format("column {}: {}", position, what);
    error_ = shown(what, 200);
    return false;
  }

  const std::string& error() const { return error_; }
  JsonKind top() const { return top_; }
  const std::vector<std::string>& keys() const { return keys_; }
  JsonValue& text() { return text_; }
  JsonValue& label() { return label_; }

 private:
  bool number(JsonKind kind, const std::string& written) {
    ++numbers_;
    return value(kind, written);
  }
  bool value(JsonKind kind, const std::string& written) {
    if (depth_ == 0) top_ = kind;
    if (depth_ != 1) return true;
    if (for_text_)
      text_ = {kind, kind == JsonKind::object || kind == JsonKind::array ? "" : written};
    if (for_label_)
      label_ = {kind, kind == JsonKind::object || kind == JsonKind::array ? "" : written};
    for_text_ = for_label_ = false;
    return true;
  }
  bool open(JsonKind kind) {
    value(kind, "");
    if (++depth_ > kMaxJsonDepth) {
      error_ = fmt::format("values nested deeper than {} levels, the limit", kMaxJsonDepth);
      return false;
    }
    return true;
  }
  bool close() {
    --depth_;
    return true;
  }

  const TextFields& fields_;
  const std::vector<RewrittenNumber>& rewritten_;
  size_t next_rewritten_ = 0;
  int64_t numbers_ = 0;
  int depth_ = 0;
  bool for_text_ = false, for_label_ = false;
  JsonKind top_ = JsonKind::none;
  std::vector<std::string> keys_;
  JsonValue text_, label_;
  std::string error_;
};

std::string json_string(const std::string& text) {
  return nlohmann::json(text).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

// {"text": "a review", "label": "positive"}, with the file's key names.
std::string json_example(const TextFields& fields) {
  return fmt::format("{{{}: \"a review\", {}: \"positive\"}}", json_string(fields.text),
                     json_string(fields.label));
}

std::optional<TextRecord> json_record(std::string_view line, int64_t line_number,
                                      const std::string& name, const TextFields& fields) {
  if (line.find_first_not_of(" \t\r") == std::string_view::npos) return std::nullopt;
  const auto fix = [&] {
    return fmt::format("each line must hold one JSON object, such as {}", json_example(fields));
  };
  if (line.starts_with(kBom))
    fail(name, line_number,
         fmt::format("not JSON (column 1: a byte order mark, U+FEFF, starts the line); remove it "
                     "(only the file's start may have one); {}",
                     fix()));
  const PythonNumbers numbers = python_numbers(line, name, line_number);
  const std::string_view json = numbers.line.empty() ? line : std::string_view(numbers.line);
  JsonLineHandler handler(fields, numbers.numbers);
  if (!nlohmann::json::sax_parse(json.begin(), json.end(), &handler))
    fail(name, line_number, fmt::format("not JSON ({}); {}", handler.error(), fix()));
  if (handler.top() != JsonKind::object)
    fail(name, line_number,
         fmt::format("{}, not a JSON object; {}", describe(handler.top()), fix()));

  const auto check = [&](const JsonValue& value, const std::string& field, const char* field_name,
                         const char* role, const char* option) {
    if (value.kind == JsonKind::none) {
      std::vector<std::string> keys;  // each once, in order
      for (const std::string& key : handler.keys()) {
        if (keys.size() == 100) break;
        if (std::find(keys.begin(), keys.end(), key) == keys.end()) keys.push_back(key);
      }
      fail(name, line_number,
           fmt::format("no key {} in the object (its keys: {}); name the key that holds the {} "
                       "with {}{}",
                       in_quotes(field), keys.empty() ? "none" : name_list(keys), role, option,
                       did_you_mean(field, keys)));
    }
    if (static_cast<int64_t>(value.text.size()) > kMaxFieldBytes)
      fail(name, line_number,
           fmt::format("the {} is longer than {} (the limit); split it", field_name,
                       format_bytes(static_cast<double>(kMaxFieldBytes))));
  };
  check(handler.text(), fields.text, "text", "texts", "dataset.text_field");
  check(handler.label(), fields.label, "label", "labels", "dataset.label_field");
  JsonValue& text = handler.text();
  JsonValue& label = handler.label();
  if (text.kind != JsonKind::string)
    fail(name, line_number,
         fmt::format("the text, {}, is {}{}, not a string; write each text as a JSON string",
                     in_quotes(fields.text), describe(text.kind),
                     text.text.empty() ? "" : " (" + shown(text.text) + ")"));
  if (label.kind != JsonKind::string && label.kind != JsonKind::integer)
    fail(name, line_number,
         fmt::format("the label, {}, is {}{}; write each label as a string (\"positive\") or an "
                     "integer class id (3)",
                     in_quotes(fields.label), describe(label.kind),
                     label.text.empty() ? "" : " (" + shown(label.text) + ")"));
  return TextRecord{.text = std::move(text.text),
                    .label = std::move(label.text),
                    .label_is_integer = label.kind == JsonKind::integer,
                    .line = line_number};
}

std::vector<TextRecord> read_json_lines(std::string_view text, const std::string& name,
                                        const TextFields& fields) {
  std::vector<TextRecord> records;
  int64_t line_number = 1;
  for (size_t start = 0;; ++line_number) {
    const size_t end = std::min(text.find('\n', start), text.size());
    if (auto record = json_record(text.substr(start, end - start), line_number, name, fields))
      records.push_back(std::move(*record));
    if (end == text.size()) break;
    start = end + 1;
  }
  if (records.empty())
    fail(name, 1,
         fmt::format("no records: the file holds no JSON lines; write one object a line, such as "
                     "{}",
                     json_example(fields)));
  return records;
}

// --- labels --------------------------------------------------------------------------------------

// The class id an integer label names, or -1 when negative and kMaxClassId + 1 when past it.
int64_t integer_label(std::string_view label) {
  const bool negative = label.starts_with('-');
  if (negative) label.remove_prefix(1);
  while (label.size() > 1 && label[0] == '0') label.remove_prefix(1);
  if (label.size() > 7) return negative ? -1 : kMaxClassId + 1;
  int64_t value = 0;
  for (char c : label) value = value * 10 + (c - '0');
  if (negative && value > 0) return -1;
  return std::min(value, kMaxClassId + 1);
}

std::string class_range(const LabelSet& labels) {
  return fmt::format("class ids 0..{}", labels.num_classes() - 1);
}

}  // namespace

std::optional<TextFormat> text_format_of(const std::string& path) {
  const std::string extension = lower(std::filesystem::path(path).extension().string());
  if (extension == ".csv") return TextFormat::csv;
  if (extension == ".tsv" || extension == ".tab") return TextFormat::tsv;
  if (extension == ".jsonl" || extension == ".ndjson") return TextFormat::jsonl;
  return std::nullopt;
}

const char* to_string(TextFormat format) {
  switch (format) {
    case TextFormat::csv:
      return "csv";
    case TextFormat::tsv:
      return "tsv";
    case TextFormat::jsonl:
      return "jsonl";
  }
  return "?";
}

std::vector<TextRecord> parse_text_records(std::string_view bytes, const std::string& name,
                                           TextFormat format, const TextFields& fields) {
  if (static_cast<int64_t>(bytes.size()) > kMaxTextFileBytes)
    fail(name, 1,
         fmt::format("the file is {}, over the limit of {}; split it into several files",
                     format_bytes(static_cast<double>(bytes.size())),
                     format_bytes(static_cast<double>(kMaxTextFileBytes))));
  if (bytes.starts_with(kBom)) bytes.remove_prefix(kBom.size());
  if (const size_t bad = invalid_utf8_at(bytes); bad != std::string_view::npos) {
    const auto [line, column] = line_and_column(bytes, bad, format != TextFormat::jsonl);
    fail(name, line,
         fmt::format("bytes that are not UTF-8 (0x{:02x} at column {}); save the file as UTF-8",
                     static_cast<unsigned char>(bytes[bad]), column));
  }
  switch (format) {
    case TextFormat::csv:
      return DelimitedReader(bytes, ',', name).read(fields);
    case TextFormat::tsv:
      return DelimitedReader(bytes, '\t', name).read(fields);
    case TextFormat::jsonl:
      return read_json_lines(bytes, name, fields);
  }
  return {};
}

std::vector<TextRecord> read_text_records(const std::string& path, TextFormat format,
                                          const TextFields& fields) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec))
    throw UserError(fmt::format("{}: no such file; check the path", path));
  const auto size = std::filesystem::file_size(path, ec);
  if (ec) throw UserError(fmt::format("{}: cannot read the file's size: {}", path, ec.message()));
  if (static_cast<int64_t>(size) > kMaxTextFileBytes)
    fail(path, 1,
         fmt::format("the file is {}, over the limit of {}; split it into several files",
                     format_bytes(static_cast<double>(size)),
                     format_bytes(static_cast<double>(kMaxTextFileBytes))));
  std::string bytes(size, '\0');
  std::ifstream in(path, std::ios::binary);
  if (!in.read(bytes.data(), static_cast<std::streamsize>(size)))
    throw UserError(fmt::format("{}: cannot read the file", path));
  return parse_text_records(bytes, path, format, fields);
}

LabelSet label_set_of(const std::vector<TextRecord>& train, const std::string& train_name) {
  if (train.empty()) fail(train_name, 1, "no records, so no labels; add records to the file");
  LabelSet labels;
  labels.integers = std::all_of(train.begin(), train.end(),
                                [](const TextRecord& r) { return r.label_is_integer; });
  if (labels.integers) {
    int64_t largest = 0;
    for (const TextRecord& record : train) {
      const int64_t id = integer_label(record.label);
      if (id < 0 || id > kMaxClassId)
        fail(train_name, record.line,
             fmt::format("label {} is {}; integer labels are class ids from 0 to at most {} "
                         "(max + 1 classes): number the classes from 0, or write the labels as "
                         "names (\"positive\")",
                         shown(record.label), id < 0 ? "negative" : "too large", kMaxClassId));
      largest = std::max(largest, id);
    }
    for (int64_t id = 0; id <= largest; ++id) labels.names.push_back(std::to_string(id));
    return labels;
  }
  for (const TextRecord& record : train) labels.names.push_back(record.label);
  std::sort(labels.names.begin(), labels.names.end());
  labels.names.erase(std::unique(labels.names.begin(), labels.names.end()), labels.names.end());
  return labels;
}

int64_t class_id(const LabelSet& labels, const TextRecord& record, const std::string& name) {
  const std::string fix =
      "correct the label, or add records of it to the training file (its labels make the classes)";
  if (labels.integers) {
    if (!record.label_is_integer)
      fail(name, record.line,
           fmt::format("label {} is not one of the training labels ({}): those are integers; {}",
                       in_quotes(record.label), class_range(labels), fix));
    const int64_t id = integer_label(record.label);
    if (id < 0 || id >= labels.num_classes())
      fail(name, record.line,
           fmt::format("label {} is not one of the training labels ({}); {}", shown(record.label),
                       class_range(labels), fix));
    return id;
  }
  const auto found = std::lower_bound(labels.names.begin(), labels.names.end(), record.label);
  if (found == labels.names.end() || *found != record.label)
    fail(name, record.line,
         fmt::format("label {} is not one of the training labels ({}); {}", in_quotes(record.label),
                     name_list(labels.names), fix));
  return found - labels.names.begin();
}

}  // namespace trainyard
