// A training-state folder as a continuing run reads it: trainer_state.json and the marks of its
// safetensors files, and ranks.safetensors' entry names. The input is the folder's files one after
// another, split at lines "--8<-- <file name>".
#include <filesystem>
#include <fstream>

#include "components/weights/safetensors.h"
#include "fuzz/fuzz_support.h"
#include "runner/engine/trainer_state.h"

namespace fs = std::filesystem;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace trainyard;
  static const std::string dir = fuzz::input_path(".state");
  fs::remove_all(dir);
  fs::create_directories(dir);
  const std::string input(reinterpret_cast<const char*>(data), size);
  const std::string cut = "--8<-- ";
  std::string name = kTrainerStateFile;
  size_t begin = 0;
  while (true) {
    const size_t next = input.find("\n" + cut, begin);
    const size_t end = next == std::string::npos ? input.size() : next;
    if (name.find('/') == std::string::npos && !name.empty() && name != "." && name != "..")
      std::ofstream(fs::path(dir) / name, std::ios::binary | std::ios::app)
          .write(input.data() + begin, static_cast<std::streamsize>(end - begin));
    if (next == std::string::npos) break;
    const size_t line_end = input.find('\n', next + 1 + cut.size());
    name = input.substr(
        next + 1 + cut.size(),
        (line_end == std::string::npos ? input.size() : line_end) - (next + 1 + cut.size()));
    begin = line_end == std::string::npos ? input.size() : line_end + 1;
  }
  fuzz::expect_clean([&] {
    const TrainerState state = read_trainer_state(dir);
    // The trainer's arithmetic on it (UBSan checks it does not overflow).
    const int64_t samples = state.batch * state.batch_size * state.world_size;
    if (samples < 0 || state.world_size < 1 || state.world_size > kMaxStateRanks) std::abort();
    const std::string ranks = (fs::path(dir) / kRanksStateFile).string();
    if (!fs::exists(ranks)) return;
    const SafetensorsFile file(ranks);
    for (const auto& entry : file.entries()) {
      std::string rest;
      const int64_t rank = rank_of_state_entry(entry.name, ranks, rest);
      if (rank < 0 || rank >= kMaxStateRanks) std::abort();
    }
  });
  return 0;
}
