// The launcher: runs one run in worker processes — `trainyard worker`, one per rank — and
// supervises them from the controller, with no MPI and no torchrun. Each rank gets torchrun's
// environment contract (RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, NODE_RANK, MASTER_ADDR,
// MASTER_PORT: a free port on one node, the agreed one across nodes), writes its output to its own
// log file, and reports to the controller over a pipe as JSON lines; rank 0's reports become the
// run's records. When any rank exits non-zero or dies from a signal, the others get SIGTERM, then
// SIGKILL after a grace period; a stop request (Ctrl-C) does the same and marks the run
// interrupted. Workers die with the controller (PR_SET_PDEATHSIG): no orphans.
#pragma once

#include <atomic>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "db/store.h"
#include "runner/config/run_spec.h"
#include "runner/engine/engine.h"
#include "runner/nodes.h"
#include "runner/worker_messages.h"

namespace trainyard {

// A run trained in a Slurm job of its own: a study's trials side by side under `trainyard submit
// --slurm` (runner/cli/slurm_study_command.cpp). Its one rank starts through `srun` — which asks
// Slurm for the job, waits in the queue for it, and relays what the rank writes to its stdout on
// the job's node back here — so the rank's reports arrive on the same pipe as a local rank's, and
// its output goes to its log on the shared file system. A stop reaches the rank through srun as
// SIGUSR2 (srun turns SIGTERM into SIGKILL; the worker takes SIGUSR2 as SIGTERM); after the grace,
// srun is killed and its job cancelled. srun exits with 128 + the signal that ended the rank, taken
// as the rank's own end; srun that ends before the rank said a word could not start the job (a
// crash: tried again). srun runs without the SLURM_* variables of the job it is started in, which
// would make it a step of that job instead of a job of its own.
struct SlurmJobLaunch {
  std::vector<std::string> srun_options;  // the job's CPUs, GPUs, partition, time, ...
  std::vector<std::string> setup_lines;   // --setup: shell lines run on the job's node first
  int cpus = 1;  // the job's CPUs (--cpus-per-task): runtime.threads 0 or idle takes them all
  // Its name, the run's own: what finds it again (to cancel it once srun is killed, or when a
  // study's job that died left it behind).
  std::string job_name{};
};

struct LaunchSpec {
  std::string config_path;  // the run's resolved config, written by the controller
  std::string variant;
  std::string log_prefix;  // rank R logs to <log_prefix>-rank<R>.log
  std::string
      output_prefix;  // files the run writes: <prefix>.safetensors (weights), <prefix>.state/
  int devices = 1;    // ranks on this node
  NodeSpec node;      // this node's place; ranks are node_rank * devices + local rank
  int port = 0;       // MASTER_PORT; 0: a free port (one node only)
  // runtime.threads: a count the ranks use, or 0 (also when the caller does not know the run's:
  // a Slurm task) chosen by the machine, or idle, measured once for all ranks (default_threads in
  // the .cpp).
  ThreadCount threads{};
  // Between SIGTERM and SIGKILL: long enough for one process to write its checkpoint.
  int grace_seconds = 15;
  // The run's own checkpoint to continue from after an interruption (RunContext::continue_from);
  // its ranks' logs are then appended to.
  std::string continue_from{};
  int64_t pause_after_epochs = 0;  // RunContext::pause_after_epochs; 0: every epoch
  // Runs training side by side on this machine (a study's slots, sweep.search.parallel): threads
  // the machine chooses (runtime.threads 0 or idle) are its CPUs shared among them.
  int sharing = 1;
  // What a warm engine must share with the run to train it (WarmEngine): the plugin libraries it
  // loaded and the device side it set up. Empty: the run never goes to a warm engine.
  std::string engine_key{};
  // The GPU its ranks see (CUDA_VISIBLE_DEVICES): a study's slot's own; "": as this process does.
  std::string cuda_device{};
  // Set: the run's one rank starts in a Slurm job of its own (SlurmJobLaunch), not here.
  std::optional<SlurmJobLaunch> slurm_job{};
};

enum class LaunchOutcome { completed, failed, interrupted };

struct LaunchResult {
  LaunchOutcome outcome = LaunchOutcome::failed;
  FailureClass failure = FailureClass::none;  // why, when not completed
  MetricValues metrics;                       // rank 0's final metrics, when completed
  std::string error;  // "rank 1 exited with code 1: ...", with the last lines of its log
  // How the run's process came to be (the run's "engine process" attribute): "fresh", "warm: its
  // run N" when a warm engine that had trained N-1 runs before took it, or "a Slurm job of its
  // own".
  std::string process = "fresh";
};

// A warm engine: one `trainyard worker --serve` kept alive across the single-process runs of a
// batch or a study, so that a run after the first pays its own set-up but not a process start
// (loading LibTorch, the CUDA side and the plugins: 0.4 s and more; bench/startup.sh). It trains a
// run only when the run's engine_key is the one it was started for; a run it cannot train, or one
// that did not complete or pause at its rung (failed, killed, timed out, out of memory, stopped),
// ends it, and the next run starts a fresh one. What the worker puts back between runs:
// reset_process_state (runner/engine/engine.h). Ended by its destructor.
class WarmEngine {
 public:
  WarmEngine();
  ~WarmEngine();
  WarmEngine(const WarmEngine&) = delete;
  WarmEngine& operator=(const WarmEngine&) = delete;

  int runs_trained() const;  // by the process alive now; 0 with none
  void end();                // ends the process now, if there is one

  struct Process;  // launcher.cpp's

 private:
  friend LaunchResult launch_run(const LaunchSpec&, RunObserver&, const std::atomic<bool>&,
                                 WarmEngine*);
  std::unique_ptr<Process> process_;
};

// Blocks until every rank of this node has ended the run. `observer` receives the log lines, setup
// and epochs of the node's first rank (rank 0 on node 0). With `warm`, a single-process run with an
// engine_key goes to its process (started first when it has none, or one for another key).
LaunchResult launch_run(const LaunchSpec& spec, RunObserver& observer,
                        const std::atomic<bool>& stop_requested, WarmEngine* warm = nullptr);

// The worker's side of the pipe: `trainyard worker` writes its reports through this observer.
// Returns nullptr when the process was not started by the launcher.
std::unique_ptr<RunObserver> launcher_channel();
void send_result(const MetricValues& metrics);
void send_error(const std::string& message);
// A warm worker's side: the next run the launcher asks for (blocks), nullopt when the launcher has
// closed its end; and the end of a run, with the exit code a worker of its own would exit with.
std::optional<WorkerRequest> next_worker_request();
void send_done(int exit_code);

// The class of a rank's failure from how it ended (wait status) and what it reported.
FailureClass classify_failure(int wait_status, const std::string& reported_error);

}  // namespace trainyard
