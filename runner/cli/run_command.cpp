// `trainyard run FILE`: validate, then (unless --dry-run) train the runs into the database.
#include <csignal>
#include <filesystem>

#include <boost/program_options.hpp>
#include <fmt/format.h>

#include "components/builtin.h"
#include "runner/cli/commands.h"
#include "runner/cli/options.h"
#include "runner/controller.h"

namespace trainyard {

namespace po = boost::program_options;
namespace fs = std::filesystem;

namespace {

std::atomic<bool> g_stop_requested{false};

// First Ctrl-C: finish the current step, mark the run interrupted, stop. Second: the default
// action (terminate at once).
extern "C" void on_stop_signal(int signal) {
  g_stop_requested.store(true);
  std::signal(signal, SIG_DFL);
}

void print_dry_run(const Experiment& experiment) {
  fmt::print("experiment '{}' from {}: {} run{}\n", experiment.name, experiment.file, experiment.runs.size(),
             experiment.runs.size() == 1 ? "" : "s");
  for (size_t i = 0; i < experiment.runs.size(); ++i) {
    const RunSpec& run = experiment.runs[i];
    fmt::print("\n--- run {}/{}: {} (config {})\n{}", i + 1, experiment.runs.size(), run.variant,
               run.config_hash, run.config_yaml);
  }
}

}  // namespace

int run_command(const std::vector<std::string>& args) {
  po::options_description options("trainyard run FILE [options]");
  std::string file, db_path = default_database_path();
  std::vector<std::string> overrides;
  options.add_options()("help,h", "show this help")
      ("set", po::value(&overrides)->composing(), "override a key: --set train.epochs=1 (repeatable)")
      ("db", po::value(&db_path), "database file (default: $TRAINYARD_DB or runs/trainyard.db)")
      ("force", "rerun runs whose config already completed")
      ("dry-run", "print the resolved runs and exit; touches nothing")
      ("file", po::value(&file), "experiment file");
  po::positional_options_description positional;
  positional.add("file", 1);
  po::variables_map vm;
  if (!parse_command_line(args, options, positional, vm)) return kExitOk;
  if (file.empty()) throw UserError("run: name an experiment file, e.g. trainyard run experiments/quickstart.yaml");

  // Validation comes first and writes nothing: a bad file leaves the database untouched.
  Experiment experiment = load_experiment(file, overrides, builtin_registry());
  if (vm.count("dry-run")) {
    print_dry_run(experiment);
    return kExitOk;
  }

  fs::path db(db_path);
  if (db.has_parent_path()) fs::create_directories(db.parent_path());
  Store store(db_path);
  std::signal(SIGINT, on_stop_signal);
  std::signal(SIGTERM, on_stop_signal);
  std::string log_dir = fs::absolute(db.has_parent_path() ? db.parent_path() / "logs" : fs::path("logs")).string();
  Controller controller(store, builtin_registry(), log_dir, g_stop_requested);
  BatchSummary summary = controller.run_experiment(experiment, vm.count("force") > 0);

  fmt::print(stderr, "\n{}: {} completed, {} already completed, {} skipped, {} failed{}\n", experiment.name,
             summary.completed, summary.already_completed, summary.skipped, summary.failed,
             summary.interrupted ? ", interrupted" : "");
  fmt::print("database: {}\nlogs: {}\nnext: trainyard report --db {} -o report.html\n",
             fs::absolute(db_path).string(), fs::absolute(log_dir).string(), db_path);
  return summary.exit_code();
}

}  // namespace trainyard
