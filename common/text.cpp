#include "common/text.h"

#include <cctype>
#include <cstdlib>

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace trainyard {

namespace {

// Edit distance where swapping two neighbours counts as one edit ("epcohs" -> "epochs"), the
// commonest typo (optimal string alignment distance).
size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<std::vector<size_t>> d(a.size() + 1, std::vector<size_t>(b.size() + 1));
  for (size_t i = 0; i <= a.size(); ++i) d[i][0] = i;
  for (size_t j = 0; j <= b.size(); ++j) d[0][j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1])
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
    }
  }
  return d[a.size()][b.size()];
}

}  // namespace

std::string closest_match(std::string_view word, const std::vector<std::string>& candidates) {
  std::string best;
  size_t best_distance = SIZE_MAX;
  for (const auto& candidate : candidates) {
    size_t d = edit_distance(word, candidate);
    if (d < best_distance) {
      best_distance = d;
      best = candidate;
    }
  }
  // Allow about one edit per three characters: "epcohs" -> "epochs", but not "lr" -> "seed".
  size_t allowed = std::max<size_t>(1, word.size() / 3);
  return best_distance <= allowed ? best : std::string();
}

std::string join(const std::vector<std::string>& items, std::string_view separator) {
  std::string out;
  for (size_t i = 0; i < items.size(); ++i) {
    if (i) out += separator;
    out += items[i];
  }
  return out;
}

std::string strip(std::string_view text) {
  const size_t begin = text.find_first_not_of(" \t\r\n");
  if (begin == std::string_view::npos) return "";
  return std::string(text.substr(begin, text.find_last_not_of(" \t\r\n") - begin + 1));
}

std::string lower(std::string text) {
  for (char& c : text) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return text;
}

std::vector<std::string> wrap(std::string_view text, size_t width) {
  auto length = [](std::string_view s) {  // code points: continuation bytes do not count
    return static_cast<size_t>(std::count_if(
        s.begin(), s.end(), [](char c) { return (static_cast<unsigned char>(c) & 0xC0) != 0x80; }));
  };
  std::vector<std::string> lines;
  std::string line;
  for (const std::string& word : split(text, ' ')) {
    if (word.empty()) continue;
    if (!line.empty() && width > 0 && length(line) + 1 + length(word) > width) {
      lines.push_back(line);
      line.clear();
    }
    line += (line.empty() ? "" : " ") + word;
  }
  if (!line.empty() || lines.empty()) lines.push_back(line);
  return lines;
}

std::string trim(std::string_view text) {
  const size_t begin = text.find_first_not_of(" \t");
  if (begin == std::string_view::npos) return "";
  return std::string(text.substr(begin, text.find_last_not_of(" \t") - begin + 1));
}

std::vector<std::string> split(std::string_view text, char separator) {
  std::vector<std::string> parts;
  size_t start = 0;
  while (true) {
    size_t end = text.find(separator, start);
    parts.emplace_back(text.substr(start, end - start));
    if (end == std::string_view::npos) break;
    start = end + 1;
  }
  return parts;
}

std::string format_rate(double samples_per_s, int64_t tokens_per_sample) {
  char buffer[64];
  if (tokens_per_sample > 0)
    std::snprintf(buffer, sizeof buffer, "%.0f tokens/s",
                  samples_per_s * static_cast<double>(tokens_per_sample));
  else
    std::snprintf(buffer, sizeof buffer, "%.0f samples/s", samples_per_s);
  return buffer;
}

std::string format_duration(double seconds) {
  char buffer[64];
  if (seconds < 1) {
    std::snprintf(buffer, sizeof buffer, "%.0f ms", seconds * 1000);
  } else if (seconds < 60) {
    std::snprintf(buffer, sizeof buffer, "%.1fs", seconds);
  } else if (seconds < 3600) {
    int total = static_cast<int>(std::lround(seconds));
    std::snprintf(buffer, sizeof buffer, "%dm %02ds", total / 60, total % 60);
  } else {
    int total = static_cast<int>(std::lround(seconds / 60));
    std::snprintf(buffer, sizeof buffer, "%dh %02dm", total / 60, total % 60);
  }
  return buffer;
}

std::string plural(int64_t count, std::string_view noun, std::string_view nouns) {
  if (count == 1) return "1 " + std::string(noun);
  return std::to_string(count) + " " +
         (nouns.empty() ? std::string(noun) + "s" : std::string(nouns));
}

std::string format_bytes(double bytes) {
  static const char* const units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int unit = 0;
  while (bytes >= 1024 && unit < 4) {
    bytes /= 1024;
    ++unit;
  }
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, unit == 0 ? "%.0f %s" : "%.1f %s", bytes, units[unit]);
  return buffer;
}

std::optional<double> parse_bytes(const std::string& text) {
  const std::string trimmed = trim(text);
  // Decimal digits and a point only (strtod would read "0x10" and "inf").
  if (trimmed.empty() ||
      !(std::isdigit(static_cast<unsigned char>(trimmed[0])) || trimmed[0] == '.') ||
      trimmed.find_first_of("xXeE") != std::string::npos)
    return std::nullopt;
  char* end = nullptr;
  const double number = std::strtod(trimmed.c_str(), &end);
  if (end == trimmed.c_str() || !std::isfinite(number) || number <= 0) return std::nullopt;
  const std::string unit = lower(trim(end));
  static const std::pair<const char*, double> kUnits[] = {{"", 1},
                                                          {"b", 1},
                                                          {"k", 1024.0},
                                                          {"kib", 1024.0},
                                                          {"m", 1 << 20},
                                                          {"mib", 1 << 20},
                                                          {"g", 1 << 30},
                                                          {"gib", 1 << 30},
                                                          {"t", 1099511627776.0},
                                                          {"tib", 1099511627776.0},
                                                          {"kb", 1e3},
                                                          {"mb", 1e6},
                                                          {"gb", 1e9},
                                                          {"tb", 1e12}};
  for (const auto& [name, scale] : kUnits)
    if (unit == name)
      return number * scale >= 1 ? std::optional<double>(number * scale) : std::nullopt;
  return std::nullopt;
}

std::string stable_hash(std::string_view text) {
  uint64_t hash = 14695981039346656037ull;  // FNV-1a 64-bit offset basis
  for (unsigned char c : text) {
    hash ^= c;
    hash *= 1099511628211ull;
  }
  char buffer[17];
  std::snprintf(buffer, sizeof buffer, "%016llx", static_cast<unsigned long long>(hash));
  return buffer;
}

std::optional<double> parse_duration(const std::string& text) {
  double total = 0;
  size_t i = 0;
  if (text.empty()) return std::nullopt;
  while (i < text.size()) {
    size_t digits = i;
    while (digits < text.size() &&
           (std::isdigit(static_cast<unsigned char>(text[digits])) || text[digits] == '.'))
      ++digits;
    if (digits == i || digits == text.size()) return std::nullopt;  // a number, then its unit
    const double value = std::strtod(text.substr(i, digits - i).c_str(), nullptr);
    switch (text[digits]) {
      case 'd':
        total += value * 86400;
        break;
      case 'h':
        total += value * 3600;
        break;
      case 'm':
        total += value * 60;
        break;
      case 's':
        total += value;
        break;
      default:
        return std::nullopt;
    }
    i = digits + 1;
  }
  return total;
}

std::string first_line(const std::string& text) { return text.substr(0, text.find('\n')); }

std::string error_summary(const std::string& what) {
  for (const std::string& line : split(what, '\n'))
    if (line.rfind("RuntimeError: ", 0) == 0) return trim(line.substr(14));
  const std::string first = trim(first_line(what));
  return first.empty() ? what : first;
}

}  // namespace trainyard
