// trainyard: a declarative experiment runner for deep-learning training.
// Dispatches to the subcommand table (runner/cli/commands.cpp) and is where errors become messages
// and exit codes (failure_of, trainyard/error.h, shared with the worker): 2 for a problem the user
// can fix, 1 for a failure, 75 for a batch stopped at its --time-limit, 130 for an interrupt.
#include <fmt/format.h>

#include "common/text.h"
#include "runner/cli/commands.h"
#include "trainyard/error.h"

namespace trainyard {

namespace {

void print_usage() {
  fmt::print(
      "trainyard {} — declarative experiment runner for deep-learning training\n\n"
      "usage: trainyard COMMAND [options]   (trainyard COMMAND --help for its "
      "options)\n\ncommands:\n",
      TRAINYARD_VERSION);
  for (const auto& command : commands()) fmt::print("  {:<10} {}\n", command.name, command.summary);
}

int dispatch(const std::vector<std::string>& argv) {
  if (argv.empty() || argv[0] == "--help" || argv[0] == "-h" || argv[0] == "help") {
    if (argv.size() > 1 && argv[0] == "help") return dispatch({argv[1], "--help"});
    print_usage();
    return argv.empty() ? kExitUserError : kExitOk;
  }
  if (argv[0] == "--version") {
    fmt::print("trainyard {}\n", TRAINYARD_VERSION);
    return kExitOk;
  }
  std::vector<std::string> names;
  for (const auto& command : commands()) {
    if (command.name == argv[0]) return command.handler({argv.begin() + 1, argv.end()});
    names.push_back(command.name);
  }
  std::string guess = closest_match(argv[0], names);
  throw UserError(fmt::format("unknown command '{}'{}; commands: {}", argv[0],
                              guess.empty() ? "" : " (did you mean '" + guess + "'?)",
                              join(names)));
}

}  // namespace

}  // namespace trainyard

int main(int argc, char** argv) {
  using namespace trainyard;
  try {
    return dispatch(std::vector<std::string>(argv + 1, argv + argc));
  } catch (...) {
    const Failure failure = failure_of(std::current_exception());
    switch (failure.exit_code) {
      case kExitUserError:
        fmt::print(stderr, "{}{}\n", failure.labelled ? "" : "error: ", failure.message);
        break;
      case kExitInterrupted:
        fmt::print(stderr, "{}\n", failure.message);
        break;
      default:
        fmt::print(stderr, "trainyard: {}\n", failure.message);
    }
    return failure.exit_code;
  }
}
