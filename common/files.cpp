#include "common/files.h"

#include <ftw.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstdio>

namespace trainyard {

bool remove_tree(const std::string& path) {
  struct stat info;
  if (::lstat(path.c_str(), &info) != 0) return errno == ENOENT;
  auto remove_one = [](const char* entry, const struct stat*, int, struct FTW*) {
    return ::remove(entry);
  };
  return nftw(path.c_str(), remove_one, 16, FTW_DEPTH | FTW_PHYS) == 0;
}

}  // namespace trainyard
