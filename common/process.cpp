#include "common/process.h"

#include <fcntl.h>
#include <poll.h>
#include <pwd.h>
#include <sched.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <stdexcept>
#include <thread>

extern char** environ;

namespace trainyard {

CommandOutput run_program(const std::vector<std::string>& argv) {
  CommandOutput result;
  int out_pipe[2], err_pipe[2];
  if (pipe2(out_pipe, O_CLOEXEC) != 0) return result;
  if (pipe2(err_pipe, O_CLOEXEC) != 0) {
    close(out_pipe[0]);
    close(out_pipe[1]);
    return result;
  }
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, out_pipe[1], 1);
  posix_spawn_file_actions_adddup2(&actions, err_pipe[1], 2);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  std::vector<char*> args;
  for (const std::string& arg : argv) args.push_back(const_cast<char*>(arg.c_str()));
  args.push_back(nullptr);
  pid_t pid = -1;
  const int spawned = posix_spawnp(&pid, args[0], &actions, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  close(out_pipe[1]);
  close(err_pipe[1]);
  if (spawned == 0) {
    pollfd fds[2] = {{out_pipe[0], POLLIN, 0}, {err_pipe[0], POLLIN, 0}};
    std::string* sinks[2] = {&result.out, &result.err};
    int open = 2;
    while (open > 0) {
      if (poll(fds, 2, -1) < 0) {
        if (errno == EINTR) continue;
        break;
      }
      for (int i = 0; i < 2; ++i) {
        if (fds[i].fd < 0 || !(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
        char buffer[4096];
        const ssize_t n = read(fds[i].fd, buffer, sizeof buffer);
        if (n > 0) {
          sinks[i]->append(buffer, static_cast<size_t>(n));
        } else if (n == 0 || errno != EINTR) {
          fds[i].fd = -1;
          --open;
        }
      }
    }
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  }
  close(out_pipe[0]);
  close(err_pipe[0]);
  return result;
}

std::string shell_quote(const std::string& text) {
  std::string out = "'";
  for (char c : text) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

std::string self_executable() {
  char path[4096];
  const ssize_t n = readlink("/proc/self/exe", path, sizeof path - 1);
  if (n <= 0) throw std::runtime_error("cannot find the trainyard executable (/proc/self/exe)");
  return std::string(path, static_cast<size_t>(n));
}

std::string host_name() {
  char buffer[256] = {};
  gethostname(buffer, sizeof buffer - 1);
  return buffer;
}

std::string user_name() {
  if (const passwd* entry = getpwuid(getuid())) return entry->pw_name;
  return std::to_string(getuid());
}

bool process_alive(int64_t pid) {
  if (pid <= 0) return false;
  return kill(static_cast<pid_t>(pid), 0) == 0 || errno == EPERM;
}

int usable_cpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  int cpus = sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : 0;
  if (cpus <= 0) cpus = static_cast<int>(sysconf(_SC_NPROCESSORS_ONLN));
  // "max 100000" (no quota) or "<quota> <period>" in microseconds: quota / period CPUs' time.
  std::ifstream quota_file("/sys/fs/cgroup/cpu.max");
  std::string quota;
  double period = 0;
  if (quota_file >> quota >> period && quota != "max" && period > 0) {
    const double allowed = std::ceil(std::strtod(quota.c_str(), nullptr) / period);
    if (allowed >= 1 && allowed < cpus) cpus = static_cast<int>(allowed);
  }
  return std::max(cpus, 1);
}

namespace {

// Per CPU of /proc/stat: its idle time (idle + iowait) and its total, in clock ticks.
std::map<int, std::pair<uint64_t, uint64_t>> cpu_times() {
  std::map<int, std::pair<uint64_t, uint64_t>> times;
  std::ifstream stat("/proc/stat");
  std::string line;
  while (std::getline(stat, line)) {
    int cpu = -1;
    unsigned long long v[8] = {};  // user nice system idle iowait irq softirq steal
    if (std::sscanf(line.c_str(), "cpu%d %llu %llu %llu %llu %llu %llu %llu %llu", &cpu, &v[0],
                    &v[1], &v[2], &v[3], &v[4], &v[5], &v[6], &v[7]) != 9)
      continue;  // the "cpu " total line, or another
    uint64_t total = 0;
    for (unsigned long long x : v) total += x;
    times[cpu] = {v[3] + v[4], total};
  }
  return times;
}

}  // namespace

double idle_cpus(std::chrono::milliseconds window) {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) != 0) return -1;
  const auto before = cpu_times();
  std::this_thread::sleep_for(window);
  const auto after = cpu_times();
  double idle = 0;
  bool any = false;
  for (const auto& [cpu, times] : after) {
    const auto earlier = before.find(cpu);
    if (!CPU_ISSET(cpu, &set) || earlier == before.end()) continue;
    // Signed: iowait may go backwards between two reads.
    const double total =
        static_cast<double>(times.second) - static_cast<double>(earlier->second.second);
    if (total <= 0) continue;
    const double idle_ticks =
        static_cast<double>(times.first) - static_cast<double>(earlier->second.first);
    idle += std::clamp(idle_ticks / total, 0.0, 1.0);
    any = true;
  }
  return any ? idle : -1;
}

int machine_cpu_threads(int ranks, std::string& why) {
  ranks = std::max(ranks, 1);
  const int cpus = usable_cpus();
  why = "runtime.threads 0: " + std::to_string(cpus) + " usable CPUs / " + std::to_string(ranks) +
        (ranks == 1 ? " rank" : " ranks");
  return std::max(1, cpus / ranks);
}

int idle_cpu_threads(int ranks, std::string& why) {
  ranks = std::max(ranks, 1);
  const int cpus = usable_cpus();
  const double idle = idle_cpus(std::chrono::milliseconds(200));
  const int free = idle < 0 ? cpus : std::clamp(static_cast<int>(std::lround(idle)), 1, cpus);
  why = "runtime.threads idle: " + std::to_string(free) + " of " + std::to_string(cpus) +
        " usable CPUs idle, / " + std::to_string(ranks) + (ranks == 1 ? " rank" : " ranks");
  return std::max(1, free / ranks);
}

}  // namespace trainyard
