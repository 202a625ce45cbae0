// Helpers shared by the test suites: temporary folders and files, and a small registry of fake
// components so config tests need no LibTorch.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "trainyard/registry.h"

namespace trainyard::testing {

// A fresh folder under the system temp dir, removed when the object dies.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  const std::filesystem::path& path() const { return path_; }
  // Writes `text` to `name` inside the folder and returns the full path.
  std::string write(const std::string& name, const std::string& text) const;

 private:
  std::filesystem::path path_;
};

// The bytes of a token file as llm.c's write_datafile writes it: 256 little-endian int32 (magic,
// version, the token count), then the tokens — GPT-2's uint16 (magic 20240520, version 1), or with
// `wide` Llama 3's uint32 (20240801, version 7). `count`, `magic` and `version` (when not -1)
// override the header's, for files that lie about themselves.
std::string llmc_token_file(const std::vector<uint32_t>& tokens, bool wide = false,
                            int64_t count = -1, int32_t magic = -1, int32_t version = -1);

// model "toy" {width: int ≥ 1 = 8, act: relu|gelu}, dataset "toy-data" {root: required string},
// optimizers "adam" {lr > 0} (steps on the device) and "sgd", scheduler "none", precisions
// "32-true", "bf16-mixed", "16-mixed", strategies "single" and "ddp" (multi-process). Products are
// ints.
Registry fake_registry();

}  // namespace trainyard::testing
