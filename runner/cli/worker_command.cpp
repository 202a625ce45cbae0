// `trainyard worker`: one rank of a run, started by the launcher (runner/launcher.h), never by
// hand. It reads the run's resolved config, trains, and reports to the controller over its pipe;
// the exit code says how it ended (0 completed, 2 bad input, 1 failure, 130 stopped).
//
// `trainyard worker --serve` is a warm engine: it trains the runs the launcher sends it one after
// another (a request per line on fd 4), each as a worker started for it alone would — its output
// into the run's log, its end said by a `done` message with that exit code — and stays for the
// next while each run completes or pauses at its rung. A run that ends any other way ends the
// process too (the launcher starts a fresh one for the next run).
#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

#include <fmt/format.h>
#include <boost/program_options.hpp>

#include "common/process.h"
#include "components/builtin.h"
#include "runner/cli/commands.h"
#include "runner/cli/options.h"
#include "runner/config/experiment.h"
#include "runner/launcher.h"

namespace trainyard {

namespace po = boost::program_options;

namespace {

std::atomic<bool> g_worker_stop{false};

extern "C" void on_worker_stop(int) { g_worker_stop.store(true); }

struct RunArguments {
  std::string config, variant, output_prefix, continue_from;
  int64_t pause_after_epochs = 0;
};

// Trains one run and reports its result or error over the channel; returns the exit code the run
// ends with.
int train_one(const RunArguments& arguments, RunObserver& channel) {
  try {
    std::ifstream in(arguments.config);
    std::stringstream text;
    text << in.rdbuf();
    if (!in) throw UserError("worker: cannot read " + arguments.config);
    RunSpec run = parse_resolved_run(text.str(), arguments.variant, plugin_loader());
    RunContext context{.registry = plugin_loader().registry(),
                       .observer = channel,
                       .stop_requested = &g_worker_stop,
                       .output_prefix = arguments.output_prefix,
                       .continue_from = arguments.continue_from,
                       .pause_after_epochs = arguments.pause_after_epochs};
    // A rank in a Slurm job (an array task's, or a study's trial in a job of its own) says which,
    // and where: the run's "slurm job" and "host" attributes.
    if (const char* job = std::getenv("SLURM_JOB_ID"))
      channel.on_setup({{"slurm job", job}, {"host", host_name()}});
    MetricValues metrics = train_run(run, context);
    send_result(metrics);
    return kExitOk;
  } catch (...) {
    const Failure failure = failure_of(std::current_exception());
    send_error(failure.message);
    return failure.exit_code;
  }
}

// The process's output goes to the run's log from here on (the launcher created or truncated it).
void write_output_to(const std::string& log_path) {
  std::fflush(stdout);
  std::fflush(stderr);
  const int log = ::open(log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (log < 0)
    throw std::runtime_error(
        fmt::format("worker: cannot write {}: {}", log_path, std::strerror(errno)));
  dup2(log, STDOUT_FILENO);
  dup2(log, STDERR_FILENO);
  close(log);
}

// The warm engine's loop: one run per request until the launcher closes its end. Stays only after
// a run that completed, or paused at its rung without being told to stop.
int serve(RunObserver& channel) {
  while (std::optional<WorkerRequest> request = next_worker_request()) {
    write_output_to(request->log_path);
    setenv(kThreadsVariable, std::to_string(request->threads).c_str(), 1);
    setenv(kThreadsWhyVariable, request->threads_why.c_str(), 1);
    g_worker_stop.store(false);
    reset_process_state();
    const int code = train_one({.config = request->config_path,
                                .variant = request->variant,
                                .output_prefix = request->output_prefix,
                                .continue_from = request->continue_from,
                                .pause_after_epochs = request->pause_after_epochs},
                               channel);
    std::fflush(stdout);
    std::fflush(stderr);
    send_done(code);
    const bool paused =
        code == kExitInterrupted && request->pause_after_epochs > 0 && !g_worker_stop.load();
    if (code != kExitOk && !paused) return code;
  }
  return kExitOk;
}

}  // namespace

int worker_command(const std::vector<std::string>& args) {
  po::options_description options = command_options(
      "trainyard worker --config FILE --variant NAME | --serve (started by `trainyard run`)");
  RunArguments arguments;
  options.add_options()("config", po::value(&arguments.config), "resolved run config")(
      "variant", po::value(&arguments.variant), "variant name")(
      "output-prefix", po::value(&arguments.output_prefix),
      "where the run writes weights and training state")(
      "continue-from", po::value(&arguments.continue_from),
      "the run's own checkpoint, to go on where it was interrupted")(
      "pause-after-epochs", po::value(&arguments.pause_after_epochs),
      "stop after this many epochs, checkpointed (a study's rung)")(
      "serve", "train the runs the launcher sends, one after another (a warm engine)");
  po::variables_map vm;
  if (!parse_command_line(args, options, {}, vm)) return kExitOk;
  std::unique_ptr<RunObserver> channel = launcher_channel();
  if (!channel)
    throw UserError("worker: an internal command, started by `trainyard run` for each rank");
  std::signal(SIGTERM, on_worker_stop);  // the controller stops ranks with SIGTERM, then SIGKILL
  // A rank in a Slurm job of its own is stopped through srun, which forwards SIGUSR2 unchanged but
  // turns SIGTERM into SIGKILL (runner/launcher.h, SlurmJobLaunch).
  std::signal(SIGUSR2, on_worker_stop);
  if (vm.count("serve")) return serve(*channel);
  return train_one(arguments, *channel);
}

}  // namespace trainyard
