#include "components/text/tokenizer_json.h"

#include <filesystem>
#include <fstream>

#include <fmt/format.h>

#include "common/files.h"
#include "common/text.h"
#include "trainyard/error.h"

namespace trainyard {

TokenizerJson TokenizerJson::read(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw UserError(fmt::format("tokenizer: cannot read {}", path));
  std::error_code ec;
  // GPT-2's is 1.4 MB, BERT's under 1 MB; a 250k vocabulary's some 20 MB.
  constexpr uintmax_t kMaxBytes = 256ull << 20;
  if (const uintmax_t size = std::filesystem::file_size(path, ec); !ec && size > kMaxBytes)
    throw UserError(fmt::format("tokenizer: {} is {} bytes, more than a tokenizer.json's {}", path,
                                size, kMaxBytes));
  std::string text;
  if (!read_at_most(in, kMaxBytes, text))  // a device or a pipe: its size said nothing
    throw UserError(fmt::format("tokenizer: {} goes on past {} bytes, more than a tokenizer.json's",
                                path, kMaxBytes));
  return parse(text, path);
}

TokenizerJson TokenizerJson::parse(std::string_view text, const std::string& source) {
  nlohmann::json root = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (root.is_discarded() || !root.is_object())
    throw UserError(fmt::format("tokenizer: {} is not a JSON object (a tokenizer.json)", source));
  return TokenizerJson(source, std::string(text), std::move(root));
}

std::string TokenizerJson::text_hash() const { return stable_hash(text_); }

const nlohmann::json& TokenizerJson::member(const nlohmann::json& object, const char* key) {
  static const nlohmann::json null;
  return object.is_object() && object.contains(key) ? object[key] : null;
}

std::string TokenizerJson::type_of(const nlohmann::json& section) {
  if (section.is_null()) return "none";
  if (!section.is_object() || !section.contains("type") || !section["type"].is_string())
    return "unknown";
  return section["type"].get<std::string>();
}

}  // namespace trainyard
