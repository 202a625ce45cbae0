// `trainyard run FILE...`: validate every file of the batch, then (unless --dry-run) train the runs
// into the database, continuing interrupted ones.
#include <chrono>
#include <condition_variable>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <mutex>
#include <optional>
#include <thread>

#include <fmt/format.h>
#include <boost/program_options.hpp>

#include "common/process.h"
#include "common/text.h"
#include "components/builtin.h"
#include "config/differences.h"
#include "runner/batch_lock.h"
#include "runner/cli/commands.h"
#include "runner/cli/options.h"
#include "runner/config/option_defaults.h"
#include "runner/controller.h"
#include "runner/engine/engine.h"
#include "runner/nodes.h"
#include "runner/run_plan.h"
#include "runner/search/study.h"

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

// --dry-run: each run's resolved config — the baseline's whole, the others' as their differences
// from it (whole with --verbose) — which runs the database already holds as completed, and each
// variant's memory forecast.
void print_dry_run(const Experiment& experiment, const std::string& db_path, bool verbose,
                   std::optional<double> device_bytes) {
  for (const Study& study : experiment.studies) {
    std::vector<std::string> keys;
    for (const auto& parameter : study.search.space) keys.push_back(parameter.key);
    fmt::print(
        "{}/{}: a study of {} {} trials over {} (proposed as the study goes: their "
        "settings are not known before), then {} of its best settings\n",
        experiment.name, study.variant, study.search.trials, to_string(study.search.method),
        join(keys), plural(study.search.confirm_repeats, "run"));
  }
  if (experiment.runs.empty()) return;
  std::map<std::string, ConfigHistory>
      histories;  // read only when it exists: a dry run creates nothing
  if (fs::exists(db_path)) {
    Store store(db_path);
    histories = read_histories(store, experiment);
  }
  const std::string& baseline_name = experiment.report.baseline.empty()
                                         ? experiment.runs.front().variant
                                         : experiment.report.baseline;
  const RunSpec* baseline = &experiment.runs.front();
  for (const auto& run : experiment.runs)
    if (run.variant == baseline_name && run.repeat == 0) baseline = &run;
  const auto baseline_config = flat_config(baseline->config_yaml);
  fmt::print("experiment '{}' from {}: {} run{} (baseline: {})\n", experiment.name, experiment.file,
             experiment.runs.size(), experiment.runs.size() == 1 ? "" : "s", baseline->variant);
  for (size_t i = 0; i < experiment.runs.size(); ++i) {
    const RunSpec& run = experiment.runs[i];
    std::string done;
    if (const auto history = histories.find(run.config_hash); history != histories.end())
      if (const RunPlan plan = plan_run(history->second, {});
          plan.fate == RunFate::already_completed)
        done = fmt::format(" [already completed as run {}: skipped unless --force]", plan.run->id);
    const std::string repeat =
        run.repeat > 0 ? fmt::format(", repeat {} (seed {})", run.repeat + 1, run.train.seed) : "";
    fmt::print("\n--- run {}/{}: {}{} (config {}){}{}\n", i + 1, experiment.runs.size(),
               run.variant, repeat, run.config_hash, &run == baseline ? " — the baseline" : "",
               done);
    if (verbose || &run == baseline) {
      fmt::print("{}", run.config_yaml);
      if (run.repeat == 0) print_memory_forecast(run, device_bytes);
      continue;
    }
    const auto differences =
        config_differences(flat_config(run.config_yaml), baseline_config,
                           registry_option_defaults(plugin_loader().registry()));
    for (const auto& d : differences) fmt::print("  {}\n", describe_difference(d));
    if (differences.empty()) fmt::print("  the same as the baseline\n");
    if (run.repeat == 0) print_memory_forecast(run, device_bytes);
  }
}

}  // namespace

namespace {

// What `trainyard run` was asked to do, from its command line.
struct RunRequest {
  std::vector<std::string> files;
  std::string db_path;
  std::vector<std::string> overrides, plugins;
  RunSelection selection;
  NodeSpec node;
  BatchPolicy policy;
  int64_t max_runs = 0;
  std::optional<double> limit_seconds;  // --time-limit, in seconds
  std::string time_limit;               // ... as written
  std::optional<double> device_bytes;   // --device-memory
  bool force = false, dry_run = false, verbose = false;
};

// Reads and checks the command line; nothing when it asked for --help.
std::optional<RunRequest> parse_run_request(const std::vector<std::string>& args) {
  po::options_description options = command_options("trainyard run FILE... [options]");
  RunRequest request;
  std::string on_failure = "continue", device_memory;
  add_override_option(options, request.overrides);
  add_plugin_option(options, request.plugins);
  add_database_option(options, request.db_path);
  add_max_runs_option(options, request.max_runs);
  add_selection_options(options, request.selection);
  NodeSpec& node = request.node;
  BatchPolicy& policy = request.policy;
  options.add_options()("force", "rerun runs whose config already completed")(
      "retries", po::value(&policy.retries),
      "try a run again, from its checkpoint, up to N times when it failed in a transient way (a "
      "rank killed by a signal, a collective or rendezvous timed out); never after bad input or "
      "out of memory (default 0)")(
      "on-failure", po::value(&on_failure),
      "continue (default): a failed run is recorded and the batch goes on; stop: no new run "
      "starts after one failed")(
      "time-limit", po::value(&request.time_limit),
      "stop the batch in time, e.g. 9h or 1h30m: the running run checkpoints and is marked "
      "interrupted, runs not started are listed as such; `trainyard run` again continues")(
      "fresh-engine",
      "start a fresh engine process for every run, as a Slurm task does, instead of keeping one "
      "warm across the batch's single-process runs")(
      "dry-run",
      "print each run's differences from the baseline and whether it already completed; writes "
      "nothing but the data folders' fingerprint caches")(
      "verbose", "with --dry-run: every run's whole resolved config")(
      "device-memory", po::value(&device_memory),
      "with --dry-run: the memory of a device (80GiB, 24GB): which variants will not fit, and "
      "what would (default for a CUDA run: this machine's GPU)")(
      "nnodes", po::value(&node.nnodes),
      "nodes of a multi-node run (each runs `trainyard run` with the same file)")(
      "node-rank", po::value(&node.node_rank),
      "this node's number, 0 to nnodes-1; node 0 writes the database")(
      "master-addr", po::value(&node.master_addr),
      "address of node 0, where ranks meet (default 127.0.0.1)")(
      "master-port", po::value(&node.master_port),
      "port on node 0 where ranks meet; run i of the batch uses master-port + i (required with "
      "--nnodes > 1)");
  po::options_description arguments;
  arguments.add_options()("file", po::value(&request.files)->composing(), "experiment files");
  po::positional_options_description positional;
  positional.add("file", -1);
  po::variables_map vm;
  if (!parse_command_line(args, options, positional, vm, arguments)) return std::nullopt;
  request.force = vm.count("force") > 0;
  request.dry_run = vm.count("dry-run") > 0;
  request.policy.fresh_engine = vm.count("fresh-engine") > 0;
  request.verbose = vm.count("verbose") > 0;

  if (request.files.empty())
    throw UserError(
        "run: name one or more experiment files, e.g. trainyard run experiments/quickstart.yaml "
        "(or a glob: experiments/*.yaml)");
  if (!vm.count("nnodes")) {
    auto getenv = [](const char* name) { return std::getenv(name); };
    if (auto slurm = node_spec_from_slurm(getenv))
      node = *slurm;
    else if (auto pod = node_spec_from_torchrun(getenv))
      node = *pod;
  }
  if (node.nnodes < 1) throw UserError("run: --nnodes must be at least 1");
  if (node.node_rank < 0 || node.node_rank >= node.nnodes)
    throw UserError(fmt::format("run: --node-rank {} is outside 0..{} (--nnodes {})",
                                node.node_rank, node.nnodes - 1, node.nnodes));
  if (policy.retries < 0) throw UserError("run: --retries must be 0 or more");
  if (on_failure != "continue" && on_failure != "stop")
    throw UserError(fmt::format("run: --on-failure is continue or stop, not '{}'", on_failure));
  policy.stop_on_failure = on_failure == "stop";
  if (!request.time_limit.empty()) {
    request.limit_seconds = parse_duration(request.time_limit);
    if (!request.limit_seconds)
      throw UserError(
          fmt::format("run: --time-limit '{}' is not a duration; write it as 9h, 90m, 1h30m or 45s",
                      request.time_limit));
    if (*request.limit_seconds <= 0)
      throw UserError(fmt::format(
          "run: --time-limit '{}' leaves no time to train; give a duration over 0, e.g. 45s",
          request.time_limit));
  }
  if (request.verbose && !request.dry_run)
    throw UserError("run: --verbose goes with --dry-run (it prints every run's whole config)");
  if (!device_memory.empty() && !request.dry_run)
    throw UserError("run: --device-memory goes with --dry-run (it checks the forecast)");
  request.device_bytes = device_memory_option("run", device_memory);
  if (node.multi_node() && (node.master_port < 1 || node.master_port > 65535))
    throw UserError(
        "run: a multi-node run needs --master-port P (a free port on node 0, the same on every "
        "node)");
  check_max_runs("run", request.max_runs);
  return request;
}

// --time-limit: a thread that, when the limit passes, stops the batch as Ctrl-C does and notes
// why. Destroying it (the batch ended first) wakes and ends the thread.
class TimeKeeper {
 public:
  explicit TimeKeeper(double seconds) {
    const auto deadline = std::chrono::steady_clock::now() +
                          std::chrono::milliseconds(static_cast<int64_t>(seconds * 1000));
    thread_ = std::jthread([deadline, this](std::stop_token stop) {
      std::mutex mutex;
      std::condition_variable_any wake;
      std::unique_lock lock(mutex);
      wake.wait_until(lock, stop, deadline, [] { return false; });
      if (stop.stop_requested()) return;  // the batch ended first
      reached_.store(true);
      g_stop_requested.store(true);
    });
  }
  const std::atomic<bool>& reached() const { return reached_; }

 private:
  std::atomic<bool> reached_{false};
  std::jthread thread_;  // last: it stops and joins before reached_ goes
};

// The batch's last lines: what happened to its runs, the verdicts, and where to look next.
void print_batch_ending(const RunRequest& request, const std::vector<Experiment>& experiments,
                        const BatchSummary& summary, Store& store, const std::string& log_dir) {
  std::vector<std::string> names;
  for (const auto& experiment : experiments) names.push_back(experiment.name);
  std::string ending;
  if (summary.at_time_limit)
    ending = fmt::format(", stopped at --time-limit {}", request.time_limit);
  else if (summary.interrupted)
    ending = ", interrupted";
  else if (summary.stopped_on_failure)
    ending = ", stopped after a failure (--on-failure stop)";
  fmt::print(
      stderr, "\n{}: {} completed{}, {} already completed, {} skipped, {} failed{}{}{}\n",
      join(names), summary.completed,
      summary.resumed > 0 ? fmt::format(" ({} continued where interrupted)", summary.resumed) : "",
      summary.already_completed, summary.skipped, summary.failed,
      summary.interrupted_runs > 0 ? fmt::format(", {} interrupted", summary.interrupted_runs) : "",
      summary.not_started > 0 ? fmt::format(", {} not started", summary.not_started) : "", ending);
  if (summary.paused > 0 || summary.promoted > 0)
    fmt::print(stderr,
               "studies: {} at a rung by their schedule, {} (continued from their "
               "checkpoints)\n",
               plural(summary.paused, "pause"), plural(summary.promoted, "promotion"));
  if (summary.interrupted && summary.at_time_limit)
    fmt::print(stderr,
               "run the same command again to continue (exit {}: stopped at --time-limit)\n",
               kExitTimeLimit);
  if (summary.nothing_ran())
    fmt::print(stderr,
               "nothing ran: every run was skipped, as this machine cannot run it (exit {})\n",
               kExitNothingRan);
  const NodeSpec& node = request.node;
  if (node.node_rank == 0) print_verdicts(store, experiments);
  if (node.node_rank > 0) {
    fmt::print("logs: {}\n", fs::absolute(log_dir).string());
    return;
  }
  // The report reads the files as this batch did: with its --set (data elsewhere, say).
  std::string sets;
  for (const auto& text : request.overrides) sets += " --set " + shell_quote(text);
  fmt::print("database: {}\nlogs: {}\nnext: trainyard report --db {}{} -o report.html\n",
             fs::absolute(request.db_path).string(), fs::absolute(log_dir).string(),
             request.db_path, sets);
}

// Trains the validated batch into the database: the lock, the signals and the time limit around
// the controller's run_batch.
int train_batch(RunRequest& request, const std::vector<Experiment>& experiments) {
  const NodeSpec& node = request.node;
  const std::string& db_path = request.db_path;
  fs::path db(db_path);
  if (db.has_parent_path()) fs::create_directories(db.parent_path());
  // Only node 0 records the runs; other nodes keep their bookkeeping in memory, and their logs.
  // The database first: a file that is not one is refused before a lock file is made beside it.
  Store store(node.node_rank == 0 ? db_path : ":memory:");
  std::optional<BatchLock> lock;
  if (node.node_rank == 0) lock.emplace(db_path);  // one batch per database
  if (node.multi_node())
    fmt::print(stderr, "node {} of {} (ranks meet at {}:{}){}\n", node.node_rank, node.nnodes,
               node.master_addr, node.master_port,
               node.node_rank == 0 ? "" : "; node 0 records the runs");
  std::signal(SIGINT, on_stop_signal);
  std::signal(SIGTERM, on_stop_signal);
  const std::string log_dir = log_dir_of(db_path);
  std::optional<TimeKeeper> time_keeper;
  if (request.limit_seconds) {
    time_keeper.emplace(*request.limit_seconds);
    request.policy.time_limit = request.time_limit;
    request.policy.time_limit_reached = &time_keeper->reached();
  }
  Controller controller(store, plugin_loader().registry(), log_dir, g_stop_requested, node,
                        request.policy);
  BatchSummary summary = controller.run_batch(experiments, request.force);
  summary.at_time_limit = time_keeper && time_keeper->reached().load();
  time_keeper.reset();  // the batch is over: no limit can stop it now
  print_batch_ending(request, experiments, summary, store, log_dir);
  return summary.exit_code();
}

}  // namespace

std::vector<Experiment> load_checked_batch(const std::vector<std::string>& files,
                                           const std::vector<std::string>& overrides,
                                           const std::vector<std::string>& plugins,
                                           int64_t max_runs, const RunSelection& selection) {
  for (const auto& plugin : plugins) plugin_loader().add_command_line_plugin(plugin);
  std::vector<Experiment> experiments = load_batch(files, overrides, plugin_loader(), max_runs);
  print_notes(experiments);
  select_runs(experiments, selection);
  for (const Experiment& experiment : experiments) {
    std::vector<RunSpec> checked = experiment.runs;
    for (RunSpec& run : study_edge_runs(experiment)) checked.push_back(std::move(run));
    for (const std::string& note : check_models_fit(checked, plugin_loader().registry()))
      fmt::print(stderr, "{}\n", note);
  }
  return experiments;
}

int run_command(const std::vector<std::string>& args) {
  std::optional<RunRequest> request = parse_run_request(args);
  if (!request) return kExitOk;  // --help

  // Validation of every file comes first and writes nothing: a bad file leaves the database
  // untouched and runs nothing of the batch.
  std::vector<Experiment> experiments = load_checked_batch(
      request->files, request->overrides, request->plugins, request->max_runs, request->selection);
  request->policy.selection = request->selection.describe();
  if (request->dry_run) {
    for (size_t i = 0; i < experiments.size(); ++i) {
      if (i > 0) fmt::print("\n");
      print_dry_run(experiments[i], request->db_path, request->verbose, request->device_bytes);
    }
    return kExitOk;
  }
  // A batch refused before it recorded anything (an MLflow logger without its server, an
  // experiment name another file holds) leaves no empty database behind where there was none.
  const bool new_database = request->node.node_rank == 0 && !fs::exists(request->db_path);
  try {
    return train_batch(*request, experiments);
  } catch (const std::exception&) {
    if (new_database && fs::exists(request->db_path) &&
        Store(request->db_path).experiments().empty())
      for (const char* suffix : {"", "-wal", "-shm", ".lock"}) {
        std::error_code ignored;
        fs::remove(request->db_path + suffix, ignored);
      }
    throw;
  }
}

}  // namespace trainyard
