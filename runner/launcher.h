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
#include <string>

#include "db/store.h"
#include "runner/config/run_spec.h"
#include "runner/engine/engine.h"
#include "runner/nodes.h"

namespace trainyard {

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
};

enum class LaunchOutcome { completed, failed, interrupted };

struct LaunchResult {
  LaunchOutcome outcome = LaunchOutcome::failed;
  FailureClass failure = FailureClass::none;  // why, when not completed
  MetricValues metrics;                       // rank 0's final metrics, when completed
  std::string error;  // "rank 1 exited with code 1: ...", with the last lines of its log
};

// Blocks until every rank of this node has exited. `observer` receives the log lines, setup and
// epochs of the node's first rank (rank 0 on node 0).
LaunchResult launch_run(const LaunchSpec& spec, RunObserver& observer,
                        const std::atomic<bool>& stop_requested);

// The worker's side of the pipe: `trainyard worker` writes its reports through this observer.
// Returns nullptr when the process was not started by the launcher.
std::unique_ptr<RunObserver> launcher_channel();
void send_result(const MetricValues& metrics);
void send_error(const std::string& message);

// The class of a rank's failure from how it ended (wait status) and what it reported.
FailureClass classify_failure(int wait_status, const std::string& reported_error);

}  // namespace trainyard
