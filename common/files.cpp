#include "common/files.h"

#include <fcntl.h>
#include <ftw.h>
#include <openssl/evp.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <memory>
#include <stdexcept>

namespace trainyard {

MappedFile::MappedFile(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw std::runtime_error(std::strerror(errno));
  struct stat info {};
  if (fstat(fd, &info) != 0 || !S_ISREG(info.st_mode)) {
    ::close(fd);
    throw std::runtime_error("not a regular file");
  }
  size_ = static_cast<size_t>(info.st_size);
  if (size_ > 0) mapping_ = mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd, 0);
  const int map_error = errno;
  ::close(fd);
  if (mapping_ == MAP_FAILED) {
    mapping_ = nullptr;
    throw std::runtime_error(std::string("cannot map the file: ") + std::strerror(map_error));
  }
}

MappedFile::~MappedFile() {
  if (mapping_) munmap(mapping_, size_);
}

bool remove_tree(const std::string& path) {
  struct stat info;
  if (::lstat(path.c_str(), &info) != 0) return errno == ENOENT;
  auto remove_one = [](const char* entry, const struct stat*, int, struct FTW*) {
    return ::remove(entry);
  };
  return nftw(path.c_str(), remove_one, 16, FTW_DEPTH | FTW_PHYS) == 0;
}

std::string file_error(const std::string& what, const std::string& path, int error) {
  std::string message = "cannot " + what + " " + path + ": " + std::strerror(error);
  if (error == ENOSPC || error == EDQUOT) message += "; " + std::string(kDiskFullAdvice);
  return message;
}

void write_file_atomically(const std::string& path,
                           const std::function<void(std::ostream&)>& write) {
  const std::string temporary = path + ".tmp";
  {
    std::ofstream out(temporary, std::ios::binary | std::ios::trunc);
    if (!out) throw std::runtime_error(file_error("write", path, errno));
    errno = 0;
    write(out);
    out.flush();
    // The stream keeps no reason: the failed write's errno is the one left (0: none known).
    if (!out) throw std::runtime_error(file_error("write", temporary, errno ? errno : EIO));
  }
  if (std::rename(temporary.c_str(), path.c_str()) != 0)
    throw std::runtime_error(file_error("rename", temporary + " to " + path, errno));
}

void write_file_atomically(const std::string& path, const std::string& text) {
  write_file_atomically(path, [&](std::ostream& out) { out << text; });
}

Sha256::Sha256() : context_(EVP_MD_CTX_new()) {
  if (!context_ || EVP_DigestInit_ex(context_, EVP_sha256(), nullptr) != 1)
    throw std::runtime_error("OpenSSL's SHA-256 is unavailable");
}

Sha256::~Sha256() { EVP_MD_CTX_free(context_); }

void Sha256::update(const void* data, size_t size) { EVP_DigestUpdate(context_, data, size); }

std::string Sha256::hex() {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  EVP_DigestFinal_ex(context_, digest, &length);
  static const char kHex[] = "0123456789abcdef";
  std::string hex;
  for (unsigned int i = 0; i < length; ++i) {
    hex += kHex[digest[i] >> 4];
    hex += kHex[digest[i] & 15];
  }
  return hex;
}

bool read_at_most(std::istream& in, size_t limit, std::string& bytes) {
  bytes.clear();
  char chunk[64 * 1024];
  while (in.read(chunk, sizeof chunk) || in.gcount() > 0) {
    bytes.append(chunk, static_cast<size_t>(in.gcount()));
    if (bytes.size() > limit) return false;
  }
  return true;
}

std::string file_state(const std::string& path) {
  struct stat info {};
  if (::stat(path.c_str(), &info) != 0) return "missing";
  return std::to_string(info.st_size) + " " + std::to_string(info.st_mtim.tv_sec) + "." +
         std::to_string(info.st_mtim.tv_nsec);
}

std::string file_sha256(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read " + path + ": " + std::strerror(errno));
  Sha256 sha;
  char buffer[1 << 16];
  while (in.read(buffer, sizeof buffer) || in.gcount() > 0)
    sha.update(buffer, static_cast<size_t>(in.gcount()));
  if (in.bad()) throw std::runtime_error("cannot read " + path + ": " + std::strerror(errno));
  return sha.hex();
}

}  // namespace trainyard
