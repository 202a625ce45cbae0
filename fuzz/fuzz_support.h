// What the fuzz targets share: the input written to a file (the readers take paths), and the one
// kind of exception a reader may throw on bad input.
#pragma once

#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>

#include "trainyard/error.h"

namespace trainyard::fuzz {

// A file of this process's own in a RAM-backed folder, rewritten with every input.
inline const std::string& input_path(const char* suffix) {
  static const std::string path = [&] {
    const char* shm = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
    return std::string(shm) + "/trainyard-fuzz-" + std::to_string(getpid()) + suffix;
  }();
  return path;
}

inline const std::string& write_input(const uint8_t* data, size_t size, const char* suffix) {
  const std::string& path = input_path(suffix);
  std::ofstream(path, std::ios::binary | std::ios::trunc)
      .write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  return path;
}

// Bad input must end in a UserError (a clear message, exit 2); anything else escaping a reader is a
// bug: abort, so libFuzzer keeps the input.
template <class Read>
void expect_clean(Read read) {
  try {
    read();
  } catch (const UserError&) {
  } catch (const std::exception& e) {
    std::fprintf(stderr, "not a UserError: %s\n", e.what());
    std::abort();
  }
}

}  // namespace trainyard::fuzz
