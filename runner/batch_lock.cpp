#include "runner/batch_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

#include <fmt/format.h>

#include "common/clock.h"
#include "common/process.h"
#include "common/text.h"
#include "db/store.h"
#include "trainyard/error.h"

namespace trainyard {

BatchLock::BatchLock(const std::string& db_path, const std::string& advice) {
  const std::string path = db_path + ".lock";
  fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd_ < 0) throw UserError(fmt::format("cannot open {}: {}", path, std::strerror(errno)));
  if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
    char holder[256] = {};
    const ssize_t n = ::pread(fd_, holder, sizeof holder - 1, 0);
    ::close(fd_);
    fd_ = -1;
    const std::string who = n > 0 ? trim(first_line(holder)) : "another process";
    throw UserError(fmt::format(
        "{} is in use by another `trainyard run` ({}); {}", db_path, who,
        !advice.empty() ? advice
                        : fmt::format("one batch per database: wait for it (`trainyard status "
                                      "--db {}` shows it), or record this batch in another "
                                      "database with --db",
                                      db_path)));
  }
  const std::string holder =
      fmt::format("pid {} on {}, since {}\n", getpid(), host_name(), utc_now());
  if (::ftruncate(fd_, 0) != 0 || ::pwrite(fd_, holder.data(), holder.size(), 0) < 0) {
    // The lock holds without the note; only the message of a refused second batch is poorer.
  }
}

BatchLock::~BatchLock() {
  if (fd_ >= 0) ::close(fd_);  // releases the flock
}

}  // namespace trainyard
