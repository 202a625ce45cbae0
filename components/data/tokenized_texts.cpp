#include "components/data/tokenized_texts.h"

#include <cstring>
#include <filesystem>

#include <fmt/format.h>

#include "components/weights/safetensors.h"
#include "trainyard/error.h"

namespace trainyard {

void TokenizedTexts::add(const std::vector<int64_t>& sequence, int64_t label) {
  for (int64_t id : sequence) ids.push_back(static_cast<int32_t>(id));
  offsets.push_back(static_cast<int64_t>(ids.size()));
  labels.push_back(label);
}

std::string check_tokenized_texts(const TokenizedTexts& texts, int64_t vocab_size,
                                  int64_t num_classes) {
  if (texts.offsets.size() != texts.labels.size() + 1)
    return fmt::format("{} offsets for {} texts (one more than the texts is right)",
                       texts.offsets.size(), texts.labels.size());
  if (texts.offsets.front() != 0) return "the first offset is not 0";
  for (size_t i = 1; i < texts.offsets.size(); ++i)
    if (texts.offsets[i] < texts.offsets[i - 1])
      return fmt::format("offset {} ({}) is before the one preceding it", i, texts.offsets[i]);
  if (texts.offsets.back() != static_cast<int64_t>(texts.ids.size()))
    return fmt::format("the last offset ({}) is not the number of token ids ({})",
                       texts.offsets.back(), texts.ids.size());
  for (size_t i = 0; i < texts.ids.size(); ++i)
    if (texts.ids[i] < 0 || texts.ids[i] >= vocab_size)
      return fmt::format("token id {} (at {}) is outside the vocabulary of {}", texts.ids[i], i,
                         vocab_size);
  for (size_t i = 0; i < texts.labels.size(); ++i)
    if (texts.labels[i] < 0 || texts.labels[i] >= num_classes)
      return fmt::format("label {} (of text {}) is not a class of {}", texts.labels[i], i,
                         num_classes);
  return "";
}

std::optional<TokenizedTexts> read_token_cache(const std::string& path, const std::string& key,
                                               int64_t vocab_size, int64_t num_classes,
                                               std::string* damage) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return std::nullopt;
  TokenizedTexts texts;
  try {
    const SafetensorsFile file(path);
    const auto meta = file.metadata().find("key");
    if (meta == file.metadata().end() || meta->second != key) return std::nullopt;  // other inputs
    // Each entry one-dimensional, of its own dtype: bytes reinterpreted as another would be
    // garbage that checks cannot tell from tokens.
    auto copy = [&](const char* name, SafetensorsDtype dtype, auto& out) {
      const SafetensorsEntry* entry = file.find(name);
      if (!entry || entry->dtype != dtype || entry->shape.size() != 1)
        throw UserError(fmt::format("no one-dimensional {} entry '{}'", to_string(dtype), name));
      out.resize(entry->bytes / sizeof(out[0]));
      if (entry->bytes > 0) std::memcpy(out.data(), entry->data, entry->bytes);
    };
    copy("ids", SafetensorsDtype::I32, texts.ids);
    copy("offsets", SafetensorsDtype::I64, texts.offsets);
    copy("labels", SafetensorsDtype::I64, texts.labels);
    if (texts.offsets.empty()) throw UserError("no offsets");
  } catch (const UserError& e) {
    if (damage) *damage = e.what();
    return std::nullopt;
  }
  if (std::string problem = check_tokenized_texts(texts, vocab_size, num_classes);
      !problem.empty()) {
    if (damage) *damage = path + ": " + problem;
    return std::nullopt;
  }
  return texts;
}

void write_token_cache(const std::string& path, const std::string& key,
                       const TokenizedTexts& texts) {
  std::error_code ec;
  std::filesystem::create_directories(std::filesystem::path(path).parent_path(), ec);
  write_safetensors(path,
                    {{"ids",
                      SafetensorsDtype::I32,
                      {static_cast<int64_t>(texts.ids.size())},
                      texts.ids.data(),
                      texts.ids.size() * 4},
                     {"offsets",
                      SafetensorsDtype::I64,
                      {static_cast<int64_t>(texts.offsets.size())},
                      texts.offsets.data(),
                      texts.offsets.size() * 8},
                     {"labels",
                      SafetensorsDtype::I64,
                      {texts.size()},
                      texts.labels.data(),
                      texts.labels.size() * 8}},
                    {{"key", key}});
}

}  // namespace trainyard
