// `trainyard worker`: one rank of a run, started by the launcher (runner/launcher.h), never by
// hand. It reads the run's resolved config, trains, and reports to the controller over its pipe;
// the exit code says how it ended (0 completed, 2 bad input, 1 failure, 130 stopped).
#include <atomic>
#include <csignal>
#include <fstream>
#include <sstream>

#include <boost/program_options.hpp>

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

}  // namespace

int worker_command(const std::vector<std::string>& args) {
  po::options_description options =
      command_options("trainyard worker --config FILE --variant NAME (started by `trainyard run`)");
  std::string config, variant, output_prefix, continue_from;
  int64_t pause_after_epochs = 0;
  options.add_options()("config", po::value(&config), "resolved run config")(
      "variant", po::value(&variant), "variant name")(
      "output-prefix", po::value(&output_prefix),
      "where the run writes weights and training state")(
      "continue-from", po::value(&continue_from),
      "the run's own checkpoint, to go on where it was interrupted")(
      "pause-after-epochs", po::value(&pause_after_epochs),
      "stop after this many epochs, checkpointed (a study's rung)");
  po::variables_map vm;
  if (!parse_command_line(args, options, {}, vm)) return kExitOk;
  std::unique_ptr<RunObserver> channel = launcher_channel();
  if (!channel)
    throw UserError("worker: an internal command, started by `trainyard run` for each rank");
  std::signal(SIGTERM, on_worker_stop);  // the controller stops ranks with SIGTERM, then SIGKILL

  try {
    std::ifstream in(config);
    std::stringstream text;
    text << in.rdbuf();
    if (!in) throw UserError("worker: cannot read " + config);
    RunSpec run = parse_resolved_run(text.str(), variant, plugin_loader());
    RunContext context{.registry = plugin_loader().registry(),
                       .observer = *channel,
                       .stop_requested = &g_worker_stop,
                       .output_prefix = output_prefix,
                       .continue_from = continue_from,
                       .pause_after_epochs = pause_after_epochs};
    MetricValues metrics = train_run(run, context);
    send_result(metrics);
    return kExitOk;
  } catch (...) {
    const Failure failure = failure_of(std::current_exception());
    send_error(failure.message);
    return failure.exit_code;
  }
}

}  // namespace trainyard
