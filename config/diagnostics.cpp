#include "trainyard/diagnostics.h"

#include <filesystem>
#include <fstream>

#include <fmt/format.h>

namespace trainyard {

namespace {

// The text of line `line` (1-based) of `path`, or "" when it cannot be read.
std::string source_line(const std::string& path, int line) {
  std::error_code ec;  // a pipe's text is gone once read, and a device's may never end
  if (!std::filesystem::is_regular_file(path, ec)) return {};
  std::ifstream in(path);
  std::string text;
  for (int i = 1; i <= line && std::getline(in, text); ++i) {
    if (i == line) return text;
  }
  return {};
}

}  // namespace

std::string to_string(const Origin& origin) {
  if (origin.line <= 0) return origin.file;
  if (origin.column <= 0) return fmt::format("{}:{}", origin.file, origin.line);
  return fmt::format("{}:{}:{}", origin.file, origin.line, origin.column);
}

void Diagnostics::error(Origin origin, std::string message) {
  // The same base-file problem shows up once per sweep variant; say it once.
  for (const auto& d : items_)
    if (d.message == message && to_string(d.origin) == to_string(origin)) return;
  items_.push_back({std::move(origin), std::move(message)});
}

std::string Diagnostics::format() const {
  std::string out;
  for (const auto& d : items_) {
    out += fmt::format("{}: error: {}\n", to_string(d.origin), d.message);
    if (d.origin.line > 0) {
      std::string text = source_line(d.origin.file, d.origin.line);
      if (!text.empty()) {
        out += fmt::format("  {}\n", text);
        if (d.origin.column > 0)
          out += fmt::format("  {}^\n", std::string(d.origin.column - 1, ' '));
      }
    }
  }
  out += fmt::format("{} error{}", items_.size(), items_.size() == 1 ? "" : "s");
  return out;
}

void Diagnostics::throw_if_any() const {
  if (!items_.empty()) throw ConfigError(*this);
}

}  // namespace trainyard
