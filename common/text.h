// Small string helpers shared by the config, the CLI and the reports.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace trainyard {

// The candidate closest to `word` by edit distance, or "" when none is close enough to be a
// plausible typo. Drives every "did you mean ...?" hint.
std::string closest_match(std::string_view word, const std::vector<std::string>& candidates);

// "a, b, c" — for messages that list the known names.
std::string join(const std::vector<std::string>& items, std::string_view separator = ", ");
// The text up to its first newline: an error's headline.
std::string first_line(const std::string& text);
// The message of a LibTorch error's what(), which carries a C++ backtrace and, for an error raised
// in TorchScript's interpreter, its traceback: the line naming the Python exception, else the
// first.
std::string error_summary(const std::string& what);

std::vector<std::string> split(std::string_view text, char separator);

// `text` without leading and trailing spaces and tabs.
std::string trim(std::string_view text);
// `text` without the whitespace (newlines too) around it: what a command printed.
std::string strip(std::string_view text);
// `text` with ASCII letters in lower case.
std::string lower(std::string text);
// `text` in lines of at most `width` characters (UTF-8 code points), broken at spaces (a word
// longer than a line stands alone); width 0: one line.
std::vector<std::string> wrap(std::string_view text, size_t width);

// Human-readable durations and sizes: "2m 05s", "1.2 GiB".
std::string format_duration(double seconds);
// A training rate as a run's terminal lines say it: "2890 samples/s", or for a language model
// (`tokens_per_sample` > 0, its context) "184960 tokens/s".
std::string format_rate(double samples_per_s,
                        int64_t tokens_per_sample);  // "42 ms", "4.2s", "2m 05s", "3h 07m"
// "9h", "90m", "1h30m", "45s", "2d": seconds; nullopt when not a duration of that form.
std::optional<double> parse_duration(const std::string& text);

// "1 epoch", "3 epochs": `count` and `noun`, in `nouns` (default: noun + "s") unless count is 1.
std::string plural(int64_t count, std::string_view noun, std::string_view nouns = "");
std::string format_bytes(double bytes);
// "80GiB", "80 GB", "512M", "1.5TiB", "1000000": bytes (K, M, G, T and KiB... are powers of 1024;
// KB, MB, GB, TB powers of 1000); nullopt when not a size of that form or not above 0.
std::optional<double> parse_bytes(const std::string& text);

// 64-bit FNV-1a as 16 hex digits: a stable content hash (not cryptographic) for configs.
std::string stable_hash(std::string_view text);

}  // namespace trainyard
