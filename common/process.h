// Processes: running a program and reading what it printed, quoting for a shell, this process (its
// executable, host, user and the CPUs it may use), and whether another one lives.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

namespace trainyard {

// What a command printed and how it ended.
struct CommandOutput {
  int exit_code = -1;  // -1: it could not be started; 128 + N: killed by signal N
  std::string out;
  std::string err;
};
// Runs argv (no shell; argv[0] looked up in PATH), stdin from /dev/null, and waits.
CommandOutput run_program(const std::vector<std::string>& argv);

// 'text' for a POSIX shell.
std::string shell_quote(const std::string& text);

// The running executable's path (/proc/self/exe); std::runtime_error when it cannot be read.
std::string self_executable();

// This machine's host name, and the user this process runs as (the uid when it has no name).
std::string host_name();
std::string user_name();

// CPUs this process may run on: those of its affinity mask (taskset, Slurm's --cpus-per-task, a
// container's cpuset), fewer when a cgroup v2 CPU quota (cpu.max: docker --cpus) allows less.
// At least 1.
int usable_cpus();

// How many of the CPUs this process may run on were idle over the last `window` (from
// /proc/stat's per-CPU counts): the others are busy with other processes. -1 when unknown.
double idle_cpus(std::chrono::milliseconds window);

// runtime.threads 0, the default: intra-op threads for each of `ranks` processes of this node —
// the usable CPUs shared among them, at least 1. It asks the machine and this process's allowance,
// never their momentary load, so one file on one machine computes the same figures run after run.
// `why` says how it was chosen.
int machine_cpu_threads(int ranks, std::string& why);

// runtime.threads idle: intra-op threads for each of `ranks` processes starting now — the usable
// CPUs idle over 200 ms, shared among them, at least 1. A thread more than there are free cores
// waits at every parallel region's barrier for one another process holds: steps then take up to
// twice as long, erratically (bench/results/threads-cpu-2026-12-03.md). `why` says how it was
// chosen.
int idle_cpu_threads(int ranks, std::string& why);

// True when process `pid` of this host exists (also when it is another user's).
bool process_alive(int64_t pid);

}  // namespace trainyard
