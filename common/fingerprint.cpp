#include "common/fingerprint.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <sstream>
#include <stdexcept>
#include <vector>

#include <fmt/format.h>

#include "common/files.h"

namespace trainyard {

namespace fs = std::filesystem;

namespace {

constexpr const char* kVersion = "trainyard-fingerprint 1";

struct FileEntry {
  std::string relative;  // "" for a fingerprinted file itself
  std::string path;
  int64_t size = 0;
  int64_t mtime_ns = 0;
};

FileEntry stat_entry(const std::string& relative, const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0)
    throw std::runtime_error(fmt::format("cannot read {}: {}", path, std::strerror(errno)));
  return {relative, path, static_cast<int64_t>(st.st_size),
          static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec};
}

// Every regular file under `root` (itself, when it is a file), sorted by relative path.
std::vector<FileEntry> list_files(const fs::path& root) {
  std::error_code ec;
  if (fs::is_regular_file(root, ec)) return {stat_entry("", root.string())};
  if (!fs::is_directory(root, ec))
    throw std::runtime_error(fmt::format("no such file or folder: {}", root.string()));
  std::vector<FileEntry> out;
  fs::recursive_directory_iterator it(root, ec), end;
  if (ec) throw std::runtime_error(fmt::format("cannot list {}: {}", root.string(), ec.message()));
  for (; it != end; it.increment(ec)) {
    if (ec)
      throw std::runtime_error(fmt::format("cannot list {}: {}", root.string(), ec.message()));
    const fs::directory_entry& entry = *it;
    if (entry.path().filename() == ".trainyard-cache") {  // ours, and it changes
      it.disable_recursion_pending();
      continue;
    }
    std::error_code type_ec;
    // A symbolic link counts as the file it names. The relative name lexically: fs::relative
    // would resolve every component of every path, a stat per level per file.
    if (entry.is_regular_file(type_ec))
      out.push_back(
          stat_entry(entry.path().lexically_relative(root).generic_string(), entry.path()));
  }
  std::sort(out.begin(), out.end(),
            [](const FileEntry& a, const FileEntry& b) { return a.relative < b.relative; });
  return out;
}

// Hashes `length` bytes of the open file from `offset`.
void hash_range(int fd, const FileEntry& file, int64_t offset, int64_t length, Sha256& sha) {
  std::vector<char> buffer(std::min<int64_t>(length, 1 << 20));
  while (length > 0) {
    const ssize_t got =
        ::pread(fd, buffer.data(), std::min<int64_t>(length, buffer.size()), offset);
    if (got < 0)
      throw std::runtime_error(fmt::format("cannot read {}: {}", file.path, std::strerror(errno)));
    if (got == 0)
      throw std::runtime_error(fmt::format("{} became shorter while it was read", file.path));
    sha.update(buffer.data(), static_cast<size_t>(got));
    offset += got;
    length -= got;
  }
}

// The file's bytes: all of them, or with `budget` bytes, its start, middle and end.
void hash_file(const FileEntry& file, int64_t budget, Sha256& sha) {
  const int fd = ::open(file.path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    throw std::runtime_error(fmt::format("cannot read {}: {}", file.path, std::strerror(errno)));
  try {
    if (budget < 0 || file.size <= budget) {
      hash_range(fd, file, 0, file.size, sha);
    } else {
      const int64_t chunk = std::max<int64_t>(budget / 3, 1);
      for (const int64_t offset : {int64_t{0}, (file.size - chunk) / 2, file.size - chunk})
        hash_range(fd, file, offset, chunk, sha);
    }
  } catch (...) {
    ::close(fd);
    throw;
  }
  ::close(fd);
}

Fingerprint compute(const std::vector<FileEntry>& files) {
  Fingerprint out;
  Sha256 sha;
  sha.update(kVersion);
  for (const auto& file : files) {
    sha.update(fmt::format("\n{}\n{}", file.relative, file.size));
    out.bytes += file.size;
  }
  out.files = static_cast<int64_t>(files.size());
  out.sampled = out.bytes > kWholeBytes;
  if (!out.sampled) {
    for (const auto& file : files) hash_file(file, -1, sha);
  } else {
    const int64_t n = out.files;
    const int64_t chosen = std::min(n, kSampledFiles);
    const int64_t budget = kSampledBytes / chosen;
    for (int64_t k = 0; k < chosen; ++k) {
      const int64_t index = k * n / chosen;
      sha.update(fmt::format("\n#{}\n", index));
      hash_file(files[static_cast<size_t>(index)], budget, sha);
    }
  }
  out.hash = sha.hex().substr(0, 32);
  return out;
}

// What the cache is keyed by: every file's name, size and modification time.
std::string listing_key(const std::vector<FileEntry>& files) {
  Sha256 sha;
  sha.update(kVersion);
  for (const auto& file : files)
    sha.update(fmt::format("\n{}\n{}\n{}", file.relative, file.size, file.mtime_ns));
  return sha.hex();
}

fs::path cache_file(const fs::path& root) {
  std::error_code ec;
  if (fs::is_directory(root, ec)) return root / ".trainyard-cache" / "fingerprint";
  return root.parent_path() / ".trainyard-cache" / (root.filename().string() + ".fingerprint");
}

// The cached fingerprint, when its key is `key`.
bool read_cache(const fs::path& file, const std::string& key, Fingerprint& out) {
  std::ifstream in(file);
  std::string version, cached_key;
  if (!std::getline(in, version) || version != kVersion || !std::getline(in, cached_key) ||
      cached_key != key)
    return false;
  int sampled = 0;
  if (!(in >> out.hash >> out.files >> out.bytes >> sampled) || out.hash.size() != 32) return false;
  out.sampled = sampled != 0;
  out.from_cache = true;
  return true;
}

void write_cache(const fs::path& file, const std::string& key, const Fingerprint& fingerprint) {
  try {
    std::error_code ec;
    fs::create_directories(file.parent_path(), ec);
    if (ec) return;
    write_file_atomically(
        file.string(),
        fmt::format("{}\n{}\n{} {} {} {}\n", kVersion, key, fingerprint.hash, fingerprint.files,
                    fingerprint.bytes, fingerprint.sampled ? 1 : 0));
  } catch (const std::exception&) {
    // Read-only data (a shared dataset): fingerprinted again next time.
  }
}

}  // namespace

std::string Fingerprint::describe() const {
  std::string size;
  if (bytes < 10000)
    size = fmt::format("{} bytes", bytes);
  else if (bytes < 10'000'000)
    size = fmt::format("{} kB", (bytes + 500) / 1000);
  else if (bytes < 10'000'000'000)
    size = fmt::format("{} MB", (bytes + 500'000) / 1'000'000);
  else
    size = fmt::format("{} GB", (bytes + 500'000'000) / 1'000'000'000);
  return fmt::format("{} ({} file{}, {}{})", hash, files, files == 1 ? "" : "s", size,
                     sampled ? ", sampled" : "");
}

Fingerprint content_fingerprint(const std::string& path) {
  static std::mutex mutex;
  static std::map<std::string, Fingerprint> known;  // by absolute path: one walk per process
  std::error_code ec;
  const fs::path root = fs::absolute(path, ec).lexically_normal();
  std::lock_guard<std::mutex> lock(mutex);
  if (auto it = known.find(root.string()); it != known.end()) return it->second;
  const std::vector<FileEntry> files = list_files(root);
  const std::string key = listing_key(files);
  const fs::path cache = cache_file(root);
  Fingerprint fingerprint;
  if (!read_cache(cache, key, fingerprint)) {
    fingerprint = compute(files);
    write_cache(cache, key, fingerprint);
  }
  known[root.string()] = fingerprint;
  return fingerprint;
}

}  // namespace trainyard
