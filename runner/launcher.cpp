#include "runner/launcher.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <fstream>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "common/process.h"
#include "common/text.h"
#include "runner/engine/engine.h"
#include "runner/worker_messages.h"
#include "trainyard/error.h"

namespace trainyard {

namespace {

constexpr int kFailureGraceSeconds = 3;  // SIGTERM to SIGKILL for the peers of a failed rank
// What asks a rank in a Slurm job of its own to stop: srun forwards it unchanged (SIGTERM it turns
// into SIGKILL). The worker takes it as SIGTERM.
constexpr int kSlurmStopSignal = SIGUSR2;
constexpr int kChannelFd = 3;  // the worker's end of its pipe, as the launcher hands it over
const char* const kChannelVariable = "TRAINYARD_CHANNEL_FD";
// A warm worker's end of its requests (a socket: the launcher writes with MSG_NOSIGNAL, so a worker
// gone between two runs is an error to handle, not a SIGPIPE).
constexpr int kRequestFd = 4;
const char* const kRequestVariable = "TRAINYARD_REQUEST_FD";
// A warm worker told to end (its requests closed) exits at once; after this, SIGKILL.
constexpr auto kWarmEndGrace = std::chrono::seconds(5);

int free_port() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  address.sin_port = 0;
  socklen_t length = sizeof address;
  int port = 29500;
  if (fd >= 0 && bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) == 0 &&
      getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) == 0)
    port = ntohs(address.sin_port);
  if (fd >= 0) close(fd);
  return port;
}

std::string last_lines(const std::string& path, size_t count) {
  std::ifstream in(path);
  std::deque<std::string> lines;
  std::string line;
  while (std::getline(in, line)) {
    lines.push_back(line);
    if (lines.size() > count) lines.pop_front();
  }
  std::string out;
  for (const auto& l : lines) out += "\n  " + l;
  return out;
}

struct Rank {
  int rank = 0;   // global
  int local = 0;  // on this node
  pid_t pid = -1;
  int channel = -1;  // read end of the pipe
  std::string buffer;
  std::string log_path;
  bool exited = false;
  int status = 0;
  std::string error;  // what the rank itself reported before failing
  // A warm worker's (`worker --serve`): the launcher's end of its requests; whether its process was
  // reaped (it ended, not only its run); and the exit code its run ended with, once it says.
  int requests = -1;
  bool reaped = false;
  std::optional<int> done;
  bool reported = false;  // it sent a message
};

// The wait status of a process that exited with `code`: what a warm worker's run ending with that
// code would have given, had the run had a process of its own.
int exit_status(int code) { return (code & 0xff) << 8; }

// Starts rank `r`: its output goes to its log file, its reports to the pipe on fd 3.
// The ranks' intra-op threads, for every rank of this node alike: runtime.threads' count; else the
// count the run recorded in the checkpoint it continues from (so that it computes what it would
// have); else the machine's usable CPUs (runtime.threads 0), or with idle the CPUs idle now,
// measured before any rank starts (a rank measuring beside its starting siblings would count them).
std::pair<int, std::string> default_threads(const LaunchSpec& spec) {
  if (spec.threads.count > 0) return {static_cast<int>(spec.threads.count), "runtime.threads"};
  if (!spec.continue_from.empty()) {
    std::ifstream file(spec.continue_from + "/trainer_state.json");
    const nlohmann::json state = nlohmann::json::parse(file, nullptr, /*allow_exceptions=*/false);
    if (state.is_object() && state.contains("intra_op_threads") &&
        state["intra_op_threads"].is_number_integer() && state["intra_op_threads"].get<int>() > 0)
      return {state["intra_op_threads"].get<int>(),
              spec.threads.idle ? "runtime.threads idle: as the run chose when it started"
                                : "runtime.threads 0: as the run chose when it started"};
  }
  if (spec.slurm_job)
    return {spec.slurm_job->cpus,
            fmt::format("runtime.threads {}: the CPUs of the run's Slurm job (--cpus-per-task)",
                        spec.threads.idle ? "idle" : "0")};
  std::string why;
  const int ranks = spec.devices * std::max(1, spec.sharing);
  // Side by side, the CPUs idle now are the other slots' to come: each takes its share of all.
  const int threads = spec.threads.idle && spec.sharing <= 1 ? idle_cpu_threads(ranks, why)
                                                             : machine_cpu_threads(ranks, why);
  if (spec.sharing > 1)
    why = fmt::format(
        "runtime.threads {}: the CPUs shared by {} trials side by side "
        "(sweep.search.parallel), {} for each of this run's {}",
        spec.threads.idle ? "idle" : "0", spec.sharing, threads,
        spec.devices == 1 ? "rank" : std::to_string(spec.devices) + " ranks");
  return {threads, why};
}

// Opens rank r's log file for its output: a run continuing after an interruption adds to its
// ranks' logs; else they start empty.
int open_log(const Rank& r, const LaunchSpec& spec) {
  int keep = spec.continue_from.empty() ? O_TRUNC : O_APPEND;
  // In a Slurm job of its own, the rank on the job's node adds to the file as srun does here.
  if (spec.slurm_job) keep |= O_APPEND;
  int log = ::open(r.log_path.c_str(), O_WRONLY | O_CREAT | keep | O_CLOEXEC, 0644);
  if (log < 0)
    throw std::runtime_error(fmt::format("cannot write {}: {}", r.log_path, std::strerror(errno)));
  return log;
}

// The command line of rank `r`'s process: `trainyard worker` with the run's arguments (or
// `--serve`); for a run in a Slurm job of its own, srun starting it there, its output sent to the
// rank's log on that node and its reports (fd 3 there) to srun's stdout, which srun relays here.
std::vector<std::string> rank_command(const Rank& r, const LaunchSpec& spec,
                                      const std::string& executable, bool serve) {
  std::vector<std::string> worker = {executable, "worker"};
  if (serve) {
    worker.push_back("--serve");
  } else {
    worker.insert(worker.end(), {"--config", spec.config_path, "--variant", spec.variant,
                                 "--output-prefix", spec.output_prefix});
    if (!spec.continue_from.empty())
      worker.insert(worker.end(), {"--continue-from", spec.continue_from});
    if (spec.pause_after_epochs > 0)
      worker.insert(worker.end(),
                    {"--pause-after-epochs", std::to_string(spec.pause_after_epochs)});
  }
  if (!spec.slurm_job) return worker;
  std::vector<std::string> command = {"srun", "--job-name=" + spec.slurm_job->job_name};
  command.insert(command.end(), spec.slurm_job->srun_options.begin(),
                 spec.slurm_job->srun_options.end());
  // The rank ignores Slurm's SIGUSR1 as a local one does; SIGUSR2 is srun's stop (watch_ranks).
  std::string script = "trap '' USR1\nexec 3>&1 >>\"$0\" 2>&1\n";
  for (const std::string& line : spec.slurm_job->setup_lines) script += line + "\n";
  script += "exec \"$@\"\n";
  command.insert(command.end(), {"/bin/bash", "-c", script, r.log_path});
  command.insert(command.end(), worker.begin(), worker.end());
  return command;
}

// The file `name` runs: itself when it is a path, else the first executable of the name on PATH
// (as execvp finds it, but before fork: execvp may allocate).
std::string program_path(const std::string& name) {
  if (name.find('/') != std::string::npos) return name;
  const char* path = std::getenv("PATH");
  for (const std::string& folder : split(path ? path : "/usr/bin:/bin", ':')) {
    const std::string candidate = (folder.empty() ? "." : folder) + "/" + name;
    if (access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  throw std::runtime_error(fmt::format("{} is not on PATH ({}): is Slurm installed on this node?",
                                       name, path ? path : ""));
}

// Whether `name` is a variable that would make srun a step of the job this process runs in
// (Slurm's own, and the srun and sbatch option variables) rather than a job of its own. SLURM_CONF
// says which cluster, and stays.
bool makes_srun_a_step(std::string_view name) {
  return (name.starts_with("SLURM_") || name.starts_with("SRUN_") || name.starts_with("SBATCH_")) &&
         name != "SLURM_CONF";
}

// Rank r's environment: this process's with torchrun's contract and the launcher's variables set
// (and, for a run in a Slurm job of its own, without the variables of the job this runs in).
std::vector<std::string> rank_environment(const Rank& r, const LaunchSpec& spec, int port,
                                          const std::pair<int, std::string>& threads, bool serve) {
  std::vector<std::pair<std::string, std::string>> set = {
      {"RANK", std::to_string(r.rank)},
      {"WORLD_SIZE", std::to_string(spec.node.nnodes * spec.devices)},
      {"LOCAL_RANK", std::to_string(r.local)},
      {"LOCAL_WORLD_SIZE", std::to_string(spec.devices)},
      {"NODE_RANK", std::to_string(spec.node.node_rank)},
      {"MASTER_ADDR", spec.node.master_addr},
      {"MASTER_PORT", std::to_string(port)},
      {kChannelVariable, std::to_string(kChannelFd)},
      {kThreadsVariable, std::to_string(threads.first)},
      {kThreadsWhyVariable, threads.second}};
  if (serve) set.emplace_back(kRequestVariable, std::to_string(kRequestFd));
  if (!spec.cuda_device.empty()) set.emplace_back("CUDA_VISIBLE_DEVICES", spec.cuda_device);
  std::vector<std::string> env;
  for (char** entry = environ; *entry; ++entry) {
    const std::string_view text(*entry);
    const std::string_view name = text.substr(0, text.find('='));
    const bool replaced = std::any_of(set.begin(), set.end(),
                                      [&](const auto& variable) { return variable.first == name; });
    if (!replaced && !(spec.slurm_job && makes_srun_a_step(name))) env.emplace_back(text);
  }
  for (const auto& [name, value] : set) env.push_back(name + "=" + value);
  return env;
}

// Starts rank `r` for the run of `spec`, or, with `serve`, a warm worker that waits for its
// requests (`worker --serve`; its output goes to this run's log until its first request).
void spawn(Rank& r, const LaunchSpec& spec, const std::string& executable, int port,
           const std::pair<int, std::string>& threads, bool serve) {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0)
    throw std::runtime_error(std::string("pipe: ") + std::strerror(errno));
  int requests[2] = {-1, -1};
  if (serve && socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, requests) != 0)
    throw std::runtime_error(std::string("socketpair: ") + std::strerror(errno));
  // Everything the child needs, made before fork: a process with threads (a study's slots) may
  // only do async-signal-safe work between fork and exec.
  const std::vector<std::string> command = rank_command(r, spec, executable, serve);
  const std::string program = program_path(command.front());
  std::vector<const char*> argv;
  for (const std::string& argument : command) argv.push_back(argument.c_str());
  argv.push_back(nullptr);
  const std::vector<std::string> env = rank_environment(r, spec, port, threads, serve);
  std::vector<const char*> envp;
  for (const std::string& variable : env) envp.push_back(variable.c_str());
  envp.push_back(nullptr);
  const std::string cannot_start = "trainyard: cannot start " + command.front() + "\n";
  int log = open_log(r, spec);
  const pid_t parent = getpid();
  pid_t pid = fork();
  if (pid < 0) throw std::runtime_error(std::string("fork: ") + std::strerror(errno));
  if (pid == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);  // never outlive the controller
    if (getppid() != parent) _exit(1);
    signal(SIGINT, SIG_IGN);  // Ctrl-C reaches the controller, which stops the ranks itself
    // Slurm's warning (SIGUSR1) is for the task that started the ranks: Slurm signals every
    // process of a step, and SIGUSR1's default action would kill a rank before it checkpoints.
    signal(SIGUSR1, SIG_IGN);
    // srun's own words ("queued and waiting for resources") go to the log; its stdout is what the
    // rank reports on the job's node.
    dup2(spec.slurm_job ? fds[1] : log, STDOUT_FILENO);
    dup2(log, STDERR_FILENO);
    dup2(fds[1], kChannelFd);
    if (serve) dup2(requests[1], kRequestFd);
    execve(program.c_str(), const_cast<char* const*>(argv.data()),
           const_cast<char* const*>(envp.data()));
    if (write(STDERR_FILENO, cannot_start.data(), cannot_start.size()) < 0) _exit(127);
    _exit(127);
  }
  close(fds[1]);
  close(log);
  r.pid = pid;
  r.channel = fds[0];
  if (serve) {
    close(requests[1]);
    r.requests = requests[0];
  }
}

// Asks warm worker r to train the run of `spec`; false when it is gone.
bool request_run(Rank& r, const LaunchSpec& spec, const std::pair<int, std::string>& threads) {
  const std::string line = worker_request_message({.config_path = spec.config_path,
                                                   .variant = spec.variant,
                                                   .output_prefix = spec.output_prefix,
                                                   .continue_from = spec.continue_from,
                                                   .pause_after_epochs = spec.pause_after_epochs,
                                                   .log_path = r.log_path,
                                                   .threads = threads.first,
                                                   .threads_why = threads.second}) +
                           "\n";
  for (size_t written = 0; written < line.size();) {
    const ssize_t n = send(r.requests, line.data() + written, line.size() - written, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    written += static_cast<size_t>(n);
  }
  return true;
}

std::string describe_exit(const Rank& r) {
  if (WIFSIGNALED(r.status))
    return fmt::format("rank {} was killed by signal {} ({})", r.rank, WTERMSIG(r.status),
                       strsignal(WTERMSIG(r.status)));
  return fmt::format("rank {} exited with code {}", r.rank, WEXITSTATUS(r.status));
}

bool failed(const Rank& r) {
  return r.exited && !(WIFEXITED(r.status) && WEXITSTATUS(r.status) == 0);
}

// Reads what rank r wrote and dispatches its complete lines: errors to the rank, and rank 0's
// (local) messages to the observer, its result to `result`. Returns 0 at end of file.
ssize_t drain(Rank& r, RunObserver& observer, LaunchResult& result, bool& got_result) {
  char chunk[65536];
  ssize_t n;
  while ((n = read(r.channel, chunk, sizeof chunk)) > 0) {
    r.buffer.append(chunk, static_cast<size_t>(n));
    size_t newline;
    while ((newline = r.buffer.find('\n')) != std::string::npos) {
      std::string line = r.buffer.substr(0, newline);
      r.buffer.erase(0, newline + 1);
      const std::optional<WorkerMessage> message = parse_worker_message(line);
      if (!message) continue;  // not a message: half a line, garbage
      r.reported = true;
      if (message->error) r.error = *message->error;
      if (message->done) r.done = *message->done;
      if (r.local != 0) continue;
      if (message->log) observer.on_log(*message->log);
      if (message->setup) observer.on_setup(*message->setup);
      if (message->epoch) observer.on_epoch(*message->epoch, message->values);
      if (message->step) observer.on_step(*message->step, message->values);
      if (message->progress) observer.on_progress(*message->progress);
      if (message->result) {
        result.metrics = *message->result;
        got_result = true;
      }
    }
  }
  return n;
}

}  // namespace

struct WarmEngine::Process {
  Rank rank;
  std::string key;  // the engine_key of the runs it trains
  int runs = 0;
};

WarmEngine::WarmEngine() = default;
WarmEngine::~WarmEngine() { end(); }

int WarmEngine::runs_trained() const { return process_ ? process_->runs : 0; }

void WarmEngine::end() {
  if (!process_) return;
  Rank& r = process_->rank;
  if (r.requests >= 0) close(r.requests);  // a warm worker exits at the end of its requests
  const auto deadline = std::chrono::steady_clock::now() + kWarmEndGrace;
  while (r.pid > 0 && !r.reaped && waitpid(r.pid, &r.status, WNOHANG) != r.pid) {
    if (std::chrono::steady_clock::now() > deadline) {
      kill(r.pid, SIGKILL);
      waitpid(r.pid, &r.status, 0);
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  if (r.channel >= 0) close(r.channel);
  process_.reset();
}

namespace {

// Hands the run to the warm engine's process (started first when it has none, or one for another
// key, or one that ended while it waited), its log at `rank`'s; `rank` is then that process.
// Returns how the run's process is recorded: "fresh", or "warm: its run N".
std::string hand_to_warm_engine(WarmEngine& warm, std::unique_ptr<WarmEngine::Process>& process,
                                Rank& rank, const LaunchSpec& spec, const std::string& executable,
                                int port, const std::pair<int, std::string>& threads) {
  if (process && process->key != spec.engine_key) warm.end();
  for (int attempt = 0;; ++attempt) {
    const bool start = !process;
    if (start) {
      process = std::make_unique<WarmEngine::Process>();
      process->key = spec.engine_key;
    }
    process->rank.log_path = rank.log_path;
    if (start)
      spawn(process->rank, spec, executable, port, threads, /*serve=*/true);
    else
      close(open_log(rank, spec));  // created, or emptied unless the run continues
    if (request_run(process->rank, spec, threads)) break;
    // Gone between two runs (killed while it waited): a fresh one, once.
    warm.end();
    if (attempt > 0) throw std::runtime_error("a warm worker ended before it took its run");
  }
  const std::string word =
      process->runs > 0 ? fmt::format("warm: its run {}", process->runs + 1) : "fresh";
  rank = std::move(process->rank);
  process->rank = Rank();
  return word;
}

// After the run: the warm process stays for the next run only after one that completed or paused
// at its rung; after any other end (a failure that may have left state behind, a kill, a stop) the
// next run gets a fresh process.
void keep_or_end_warm_engine(WarmEngine& warm, std::unique_ptr<WarmEngine::Process>& process,
                             Rank& rank, bool stays) {
  process->rank = std::move(rank);
  if (!stays) {
    warm.end();
    return;
  }
  Rank& kept = process->rank;
  kept.exited = false;
  kept.done.reset();
  kept.status = 0;
  kept.error.clear();
  ++process->runs;
}

// What watching the ranks found: a result reported, a stop (interrupted, or paused at the study's
// rung), or the first failure, described.
struct RanksEnd {
  bool got_result = false, interrupted = false, paused = false;
  std::string first_failure;
};

// Watches the ranks until every one has ended the run: their reports go to `observer` and
// `result`; the first failure stops the others (a short grace, then SIGKILL), as does a stop
// request (the run's grace).
RanksEnd watch_ranks(std::vector<Rank>& ranks, const LaunchSpec& spec, RunObserver& observer,
                     const std::atomic<bool>& stop_requested, LaunchResult& result) {
  RanksEnd end;
  bool stopping = false;
  // srun turns a SIGTERM into SIGKILL for its task (no checkpoint), but forwards SIGUSR2 as it is:
  // a rank in a Slurm job of its own is asked to stop with SIGUSR2, which the worker takes as
  // SIGTERM. Killed, srun's job is cancelled too: srun killed may leave it to run on.
  bool job_cancelled = false;
  auto stop_all = [&](int signal) {
    if (spec.slurm_job && signal == SIGTERM) signal = kSlurmStopSignal;
    for (auto& r : ranks)
      if (!r.exited) kill(r.pid, signal);
    if (spec.slurm_job && signal == SIGKILL && !job_cancelled) {
      run_program({"scancel", "--me", "--name=" + spec.slurm_job->job_name});
      job_cancelled = true;
    }
  };
  auto deadline = std::chrono::steady_clock::time_point::max();
  for (auto& r : ranks) fcntl(r.channel, F_SETFL, O_NONBLOCK);
  while (true) {
    std::vector<pollfd> polls;
    for (auto& r : ranks)
      if (r.channel >= 0) polls.push_back({r.channel, POLLIN, 0});
    if (!polls.empty())
      poll(polls.data(), polls.size(), 100);
    else
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    for (auto& r : ranks) {
      if (r.channel >= 0 && drain(r, observer, result, end.got_result) == 0) {
        close(r.channel);
        r.channel = -1;
      }
    }
    observer.on_tick();
    // Ranks that failed since the last look. A rank killed by a signal is the cause when several
    // went down together: its peers then fail on the broken connection.
    const Rank* cause = nullptr;
    for (auto& r : ranks) {
      if (r.exited) continue;
      if (r.done) {  // a warm worker's run ended; the process stays, or ends after the run
        r.status = exit_status(*r.done);
      } else if (waitpid(r.pid, &r.status, WNOHANG) == r.pid) {
        r.reaped = true;
        // srun exits with 128 + the signal that ended its task: the rank's own end.
        if (spec.slurm_job && WIFEXITED(r.status) && WEXITSTATUS(r.status) > 128 &&
            WEXITSTATUS(r.status) < 128 + NSIG)
          r.status = WEXITSTATUS(r.status) - 128;
      } else {
        continue;
      }
      r.exited = true;
      // A rank that stopped at the epoch it was told to pause after (a study's rung) has not
      // failed: every rank stops there, its checkpoint written.
      if (spec.pause_after_epochs > 0 && WIFEXITED(r.status) &&
          WEXITSTATUS(r.status) == kExitInterrupted && !stop_requested.load()) {
        end.paused = true;
        continue;
      }
      if (failed(r) && (!cause || (WIFSIGNALED(r.status) && !WIFSIGNALED(cause->status))))
        cause = &r;
    }
    // A rank that ended as the stop came (Slurm signals srun itself when it cancels, preempts or
    // requeues the job it runs in) was stopped, not failed: the stop below says so.
    if (cause && !stopping && !stop_requested.load()) {
      result.failure = classify_failure(cause->status, cause->error);
      // srun gave up before the rank said a word: its job never started (the log has srun's
      // reason: a partition or QOS refused, the controller unreachable). Tried again, as a crash.
      if (spec.slurm_job && !cause->reported) result.failure = FailureClass::crashed;
      std::string reported = cause->error.empty() ? "" : ": " + cause->error;
      end.first_failure = describe_exit(*cause) + reported + "; last lines of " + cause->log_path +
                          ":" + last_lines(cause->log_path, 10);
      stopping = true;
      stop_all(SIGTERM);
      // The other ranks cannot checkpoint without the failed one (and may be blocked in a
      // collective with it): a short grace.
      deadline = std::chrono::steady_clock::now() +
                 std::chrono::seconds(std::min(spec.grace_seconds, kFailureGraceSeconds));
    }
    if (stop_requested.load() && !stopping) {
      // A run whose result came has completed: a stop requested while its ranks exit (a batch's
      // --time-limit passing in that moment) does not make it interrupted, nor signals them — but
      // a rank that hangs on its way out is still killed after the grace.
      stopping = true;
      end.interrupted = !end.got_result;
      if (end.interrupted) stop_all(SIGTERM);
      deadline = std::chrono::steady_clock::now() + std::chrono::seconds(spec.grace_seconds);
    }
    if (stopping && std::chrono::steady_clock::now() > deadline) stop_all(SIGKILL);
    bool all_done = true;
    for (auto& r : ranks) all_done = all_done && r.exited && (r.channel < 0 || r.done);
    if (all_done) return end;
  }
}

// The run's outcome and error, from how its ranks ended.
void set_outcome(const RanksEnd& end, const std::vector<Rank>& ranks, const LaunchSpec& spec,
                 LaunchResult& result) {
  if (end.paused && !end.interrupted && end.first_failure.empty()) {
    result.outcome = LaunchOutcome::interrupted;
    result.failure = FailureClass::interrupted;
    result.error = fmt::format("paused after epoch {}", spec.pause_after_epochs);
  } else if (end.interrupted && end.first_failure.empty()) {
    result.outcome = LaunchOutcome::interrupted;
    result.failure = FailureClass::interrupted;
    result.error = "interrupted by a signal (Ctrl-C or SIGTERM)";
  } else if (!end.first_failure.empty()) {
    result.outcome = LaunchOutcome::failed;
    // A single process that reported its own error (bad data, bad weights) says it best; with
    // several ranks, which rank failed comes first.
    const bool alone = spec.devices * spec.node.nnodes == 1;
    result.error =
        alone && !ranks[0].error.empty() && failed(ranks[0]) ? ranks[0].error : end.first_failure;
  } else if (end.got_result) {
    result.outcome = LaunchOutcome::completed;
  } else {
    result.failure = FailureClass::error;
    result.error = fmt::format("rank {} exited without reporting a result; see {}", ranks[0].rank,
                               ranks[0].log_path);
  }
}

}  // namespace

LaunchResult launch_run(const LaunchSpec& spec, RunObserver& observer,
                        const std::atomic<bool>& stop_requested, WarmEngine* warm) {
  const std::string executable = self_executable();
  const int port = spec.port > 0 ? spec.port : free_port();
  const std::pair<int, std::string> threads = default_threads(spec);
  std::vector<Rank> ranks(static_cast<size_t>(spec.devices));
  for (int r = 0; r < spec.devices; ++r) {
    ranks[r].rank = spec.node.node_rank * spec.devices + r;
    ranks[r].local = r;
    ranks[r].log_path = fmt::format("{}-rank{}.log", spec.log_prefix, ranks[r].rank);
  }
  // A warm engine trains single-process runs with a key; it is ended before any other run, which
  // would otherwise share the machine (and a GPU) with it.
  if (spec.slurm_job && (spec.devices != 1 || spec.node.nnodes != 1))
    throw std::logic_error("a run of several ranks cannot train in a Slurm job of its own here");
  const bool serve = warm && !spec.engine_key.empty() && spec.devices == 1 &&
                     spec.node.nnodes == 1 && !spec.slurm_job;
  if (warm && !serve) warm->end();
  LaunchResult result;
  result.process = spec.slurm_job ? "a Slurm job of its own" : "fresh";
  if (serve)
    result.process =
        hand_to_warm_engine(*warm, warm->process_, ranks[0], spec, executable, port, threads);
  else
    for (auto& r : ranks) spawn(r, spec, executable, port, threads, /*serve=*/false);
  const RanksEnd end = watch_ranks(ranks, spec, observer, stop_requested, result);
  set_outcome(end, ranks, spec, result);
  if (serve) {
    const Rank& r = ranks[0];
    const bool stays = r.done && !r.reaped && !end.interrupted &&
                       (result.outcome == LaunchOutcome::completed ||
                        (end.paused && result.outcome == LaunchOutcome::interrupted));
    keep_or_end_warm_engine(*warm, warm->process_, ranks[0], stays);
  }
  return result;
}

FailureClass classify_failure(int wait_status, const std::string& reported_error) {
  if (WIFSIGNALED(wait_status)) return FailureClass::crashed;
  switch (WEXITSTATUS(wait_status)) {
    case kExitUserError:
      return FailureClass::bad_input;
    case kExitInterrupted:
      return FailureClass::interrupted;
    default:
      break;
  }
  if (says_out_of_memory(reported_error)) return FailureClass::out_of_memory;
  std::string message = reported_error;
  std::transform(message.begin(), message.end(), message.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  auto says = [&](const char* text) { return message.find(text) != std::string::npos; };
  // c10d's collectives and TCPStore rendezvous.
  if (says("timed out") || says("timeout") || says("rendezvous")) return FailureClass::timed_out;
  return FailureClass::error;
}

// --- the worker's end -------------------------------------------------------------------------

namespace {

int channel_fd() {
  const char* value = std::getenv(kChannelVariable);
  return value ? std::atoi(value) : -1;
}

void send(const std::string& message) {
  int fd = channel_fd();
  if (fd < 0) return;
  const std::string line = message + "\n";
  for (size_t written = 0; written < line.size();) {
    ssize_t n = write(fd, line.data() + written, line.size() - written);
    if (n <= 0) return;  // the controller is gone; PR_SET_PDEATHSIG ends this process
    written += static_cast<size_t>(n);
  }
}

class ChannelObserver : public RunObserver {
 public:
  void on_log(const std::string& line) override {
    std::fprintf(stderr, "%s\n", line.c_str());
    send(log_message(line));
  }
  void on_setup(const std::map<std::string, std::string>& attributes) override {
    send(setup_message(attributes));
  }
  void on_epoch(int64_t epoch, const MetricValues& values) override {
    send(epoch_message(epoch, values));
  }
  void on_step(int64_t step, const MetricValues& values) override {
    send(step_message(step, values));
  }
  void on_progress(const TrainingProgress& p) override {
    std::fprintf(stderr, "%s\n", p.line.c_str());
    send(progress_message(p));
  }
};

}  // namespace

std::unique_ptr<RunObserver> launcher_channel() {
  if (channel_fd() < 0) return nullptr;
  return std::make_unique<ChannelObserver>();
}

void send_result(const MetricValues& metrics) { send(result_message(metrics)); }
void send_error(const std::string& message) { send(error_message(message)); }
void send_done(int exit_code) { send(done_message(exit_code)); }

std::optional<WorkerRequest> next_worker_request() {
  const char* value = std::getenv(kRequestVariable);
  if (!value) throw UserError("worker --serve: an internal command, started by `trainyard run`");
  const int fd = std::atoi(value);
  static std::string buffer;  // what came after the last whole request
  while (true) {
    if (const size_t newline = buffer.find('\n'); newline != std::string::npos) {
      const std::string line = buffer.substr(0, newline);
      buffer.erase(0, newline + 1);
      std::optional<WorkerRequest> request = parse_worker_request(line);
      if (!request) throw std::runtime_error("worker --serve: not a run request: " + line);
      return request;
    }
    char chunk[4096];
    const ssize_t n = read(fd, chunk, sizeof chunk);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return std::nullopt;  // the launcher closed its end (or is gone)
    buffer.append(chunk, static_cast<size_t>(n));
  }
}

}  // namespace trainyard
