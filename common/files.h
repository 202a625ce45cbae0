// File-system helpers the standard library cannot be trusted with in a program linked against
// LibTorch: libtorch.so exports its own copy of std::filesystem::remove_all, which jumps to a null
// pointer when called from our binaries (ARCHITECTURE.md, "LibTorch's std::filesystem").
#pragma once

#include <string>

namespace trainyard {

// Removes a file or a folder with everything in it; true when it is gone (or never was).
bool remove_tree(const std::string& path);

}  // namespace trainyard
