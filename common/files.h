// File-system helpers: a file written whole or not at all, and removal of a folder tree, which the
// standard library cannot be trusted with in a program linked against LibTorch: libtorch.so
// exports its own copy of std::filesystem::remove_all, which jumps to a null pointer when called
// from our binaries (ARCHITECTURE.md, "LibTorch's std::filesystem").
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <istream>
#include <ostream>
#include <string>
#include <string_view>

struct evp_md_ctx_st;  // OpenSSL's EVP_MD_CTX

namespace trainyard {

// Removes a file or a folder with everything in it; true when it is gone (or never was).
bool remove_tree(const std::string& path);

// What to do about a full disk, said after what could not be written: the one wording the store's
// errors and the file writers share.
inline constexpr const char* kDiskFullAdvice =
    "the disk holding it is full: free space, then `trainyard run` again continues the batch "
    "(what was recorded is kept)";

// "cannot <what> <path>: <the system's reason for `error` (an errno)>", with kDiskFullAdvice when
// the disk or the user's quota is full (ENOSPC, EDQUOT).
std::string file_error(const std::string& what, const std::string& path, int error);

// Writes `path` whole or not at all: `write` fills "<path>.tmp", which is then renamed over `path`,
// so a reader never sees half a file, whenever the writer dies. std::runtime_error naming the file
// when it cannot be written.
void write_file_atomically(const std::string& path,
                           const std::function<void(std::ostream&)>& write);
void write_file_atomically(const std::string& path, const std::string& text);

// A regular file mapped read-only while the object lives: its bytes are paged in as they are read,
// never read whole. std::runtime_error saying what went wrong (the system's reason, "not a regular
// file", "cannot map the file: ..."); the caller names the file and its format.
class MappedFile {
 public:
  explicit MappedFile(const std::string& path);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const uint8_t* data() const { return static_cast<const uint8_t*>(mapping_); }
  size_t size() const { return size_; }

 private:
  void* mapping_ = nullptr;  // none for an empty file: nothing to map
  size_t size_ = 0;
};

// SHA-256 over bytes given in pieces: update() as often as needed, then hex() once.
class Sha256 {
 public:
  Sha256();
  ~Sha256();
  Sha256(const Sha256&) = delete;
  Sha256& operator=(const Sha256&) = delete;
  void update(const void* data, size_t size);
  void update(std::string_view text) { update(text.data(), text.size()); }
  std::string hex();  // the digest in lowercase hex; ends the hashing

 private:
  ::evp_md_ctx_st* context_;
};

// The SHA-256 of the file's bytes, in lowercase hex; std::runtime_error naming the file when it
// cannot be read.
std::string file_sha256(const std::string& path);

// Reads `in` to its end into `bytes`, or stops once it has more than `limit` bytes: false then. A
// size from stat() cannot stand guard alone: a device (/dev/zero) or a pipe (`<(...)`) reports 0
// and never ends, or ends late.
bool read_at_most(std::istream& in, size_t limit, std::string& bytes);

// "<size> <mtime seconds>.<nanoseconds>", or "missing": what a per-process cache of something read
// from the file keys on, so that an edited file is read again.
std::string file_state(const std::string& path);

}  // namespace trainyard
