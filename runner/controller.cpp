#include "runner/controller.h"

#include <cstdio>
#include <filesystem>
#include <fstream>

#include <fmt/format.h>
#include <spdlog/sinks/basic_file_sink.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include "common/text.h"
#include "runner/engine/engine.h"
#include "runner/launcher.h"

namespace trainyard {

namespace fs = std::filesystem;

namespace {

// Writes each epoch's metrics as they arrive, so a run that dies later keeps its history.
class StoreObserver : public RunObserver {
 public:
  StoreObserver(Store& store, int64_t run_id, std::shared_ptr<spdlog::logger> log)
      : store_(store), run_id_(run_id), log_(std::move(log)) {}
  void on_log(const std::string& line) override { log_->info(line); }
  void on_setup(const std::map<std::string, std::string>& attributes) override {
    store_.record_attributes(run_id_, attributes);
  }
  void on_epoch(int64_t epoch, const MetricValues& values) override {
    store_.record_epoch(run_id_, epoch, values);
  }

 private:
  Store& store_;
  int64_t run_id_;
  std::shared_ptr<spdlog::logger> log_;
};

std::string command_output(const std::string& command) {
  std::string out;
  if (FILE* pipe = popen(command.c_str(), "r")) {
    char buffer[256];
    while (fgets(buffer, sizeof buffer, pipe)) out += buffer;
    pclose(pipe);
  }
  while (!out.empty() && (out.back() == '\n' || out.back() == '\r')) out.pop_back();
  return out;
}

std::string safe_file_name(const std::string& text) {
  std::string out;
  for (char c : text)
    out += (std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '.') ? c : '_';
  return out;
}

// True when `a` and `b` name the same file. A path recorded relative to a folder this process does
// not know (an older database) cannot be told apart: it counts as the same.
bool same_file(const std::string& a, const std::string& b) {
  std::error_code ec;
  if (fs::path(a).is_relative() && !fs::exists(a, ec)) return true;
  return fs::weakly_canonical(a, ec) == fs::weakly_canonical(b, ec);
}

std::shared_ptr<spdlog::logger> run_logger(const std::string& name, const std::string& path) {
  auto console = std::make_shared<spdlog::sinks::stderr_color_sink_mt>();
  console->set_pattern("%^[%H:%M:%S]%$ %v");
  auto file = std::make_shared<spdlog::sinks::basic_file_sink_mt>(path, /*truncate=*/true);
  file->set_pattern("[%Y-%m-%d %H:%M:%S.%e] %v");
  auto logger = std::make_shared<spdlog::logger>(name, spdlog::sinks_init_list{console, file});
  logger->flush_on(spdlog::level::info);
  return logger;
}

// Two files that say the same `name:` would mix their runs in one report and take each other's
// baseline: refused, before anything is written.
void check_experiment_name_is_free(Store& store, const Experiment& experiment) {
  const std::optional<ExperimentRecord> recorded = store.find_experiment(experiment.name);
  if (!recorded || same_file(recorded->file, experiment.file)) return;
  throw UserError(fmt::format(
      "{}: experiment name '{}' is already taken in {} by {}; give one of the two files another "
      "`name:` (or record this one in another database with --db)",
      experiment.file, experiment.name, store.path(), recorded->file));
}

}  // namespace

bool BatchSummary::nothing_ran() const {
  return completed + already_completed + failed == 0 && skipped > 0;
}

int BatchSummary::exit_code() const {
  if (interrupted) return kExitInterrupted;
  if (failed > 0) return kExitFailure;
  return nothing_ran() ? kExitNothingRan : kExitOk;
}

std::string git_revision_of(const std::string& path) {
  fs::path dir = fs::absolute(path).parent_path();
  std::string quoted = "'" + dir.string() + "'";
  std::string revision = command_output("git -C " + quoted + " rev-parse --short HEAD 2>/dev/null");
  if (revision.empty()) return "";
  if (!command_output("git -C " + quoted + " status --porcelain --untracked-files=no 2>/dev/null")
           .empty())
    revision += "-dirty";
  return revision;
}

Controller::Controller(Store& store, const Registry& registry, std::string log_dir,
                       const std::atomic<bool>& stop_requested, NodeSpec node)
    : store_(store),
      registry_(registry),
      log_dir_(std::move(log_dir)),
      stop_requested_(stop_requested),
      node_(std::move(node)) {}

BatchSummary Controller::run_experiment(const Experiment& experiment, bool force) {
  BatchSummary summary;
  check_experiment_name_is_free(store_, experiment);
  if (int orphans = store_.mark_orphaned_runs_interrupted())
    fmt::print(stderr,
               "{} run{} left unfinished by an earlier trainyard process marked interrupted\n",
               orphans, orphans == 1 ? "" : "s");
  const int64_t experiment_id = store_.upsert_experiment(
      experiment.name, fs::absolute(experiment.file).lexically_normal().string(),
      experiment.description, report_option_set().encode(experiment.report, "", {}).to_yaml_text());

  // Decide every run's fate first, so `trainyard runs` shows the whole batch as queued.
  // Every node must launch the same runs in the same order; only node 0 knows what completed
  // before.
  if (node_.multi_node() && !force) {
    fmt::print(stderr,
               "multi-node: every run executes (completed runs are not skipped, so the nodes stay "
               "in step)\n");
    force = true;
  }
  std::vector<std::pair<int64_t, const RunSpec*>> queue;
  for (size_t i = 0; i < experiment.runs.size(); ++i) {
    const RunSpec& run = experiment.runs[i];
    QueuedRun queued{.variant = run.variant,
                     .position = static_cast<int64_t>(i),
                     .config_yaml = run.config_yaml,
                     .config_hash = run.config_hash,
                     .precision = run.runtime.precision,
                     .strategy = run.strategy.name,
                     .devices = run.runtime.devices,
                     .params = flat_config(run.config_yaml)};
    if (auto done = store_.find_completed_run(experiment_id, run.config_hash); done && !force) {
      fmt::print(stderr, "= {}: already completed as run {}; skipped (--force reruns it)\n",
                 run.variant, *done);
      ++summary.already_completed;
      continue;
    }
    std::string reason = resolve_device(run.runtime).unavailable_reason;
    if (reason.empty() && node_.node_rank > 0 && !run.strategy.capabilities.multi_process)
      reason = fmt::format("strategy {} trains on one device: node 0 runs it", run.strategy.name);
    if (!reason.empty()) {
      int64_t id = store_.queue_run(experiment_id, queued);
      store_.end_run(id, RunStatus::skipped, reason);
      fmt::print(stderr, "- {}: skipped: {}\n", run.variant, reason);
      ++summary.skipped;
      continue;
    }
    queue.emplace_back(store_.queue_run(experiment_id, queued), &run);
  }

  for (size_t i = 0; i < queue.size(); ++i) {
    if (summary.interrupted || stop_requested_.load()) {
      summary.interrupted = true;
      store_.end_run(queue[i].first, RunStatus::interrupted,
                     "the batch was interrupted before this run started");
      continue;
    }
    fmt::print(stderr, "> {} [{}/{}]\n", queue[i].second->variant, i + 1, queue.size());
    const int ordinal = static_cast<int>(queue[i].second - experiment.runs.data());
    execute(experiment, queue[i].first, ordinal, *queue[i].second, summary);
  }
  return summary;
}

// Where run `run_id`'s files go: logs/<experiment>/run-<id>-<variant>-<uid> plus ".log", ".yaml",
// "-rank<R>.log", ".safetensors", ".state/". Run ids restart in every database; the uid does not,
// so two databases in one folder (or a database deleted and made again) never share a file name.
fs::path Controller::run_file_stem(const Experiment& experiment, int64_t run_id,
                                   const RunSpec& run) {
  const std::optional<RunRecord> record = store_.run(run_id);
  const std::string uid = record && !record->uid.empty() ? "-" + record->uid : "";
  // Node K > 0 of a multi-node run keeps its logs apart from node 0's, should they share a folder.
  const std::string node_suffix =
      node_.node_rank > 0 ? fmt::format("-node{}", node_.node_rank) : "";
  const fs::path stem =
      fs::path(log_dir_) / safe_file_name(experiment.name) /
      fmt::format("run-{}-{}{}{}", run_id, safe_file_name(run.variant), uid, node_suffix);
  for (const char* suffix : {".log", ".yaml", ".safetensors", ".state"})
    if (fs::exists(stem.string() + suffix))
      throw std::runtime_error(fmt::format(
          "{}{} exists already; refusing to overwrite another run's file", stem.string(), suffix));
  return stem;
}

void Controller::execute(const Experiment& experiment, int64_t run_id, int ordinal,
                         const RunSpec& run, BatchSummary& summary) {
  fs::path stem;
  try {
    stem = run_file_stem(experiment, run_id, run);
  } catch (const std::exception& e) {
    store_.end_run(run_id, RunStatus::failed, e.what());
    ++summary.failed;
    return;
  }
  fs::create_directories(stem.parent_path());
  const std::string log_path = stem.string() + ".log", config_path = stem.string() + ".yaml";
  std::ofstream(config_path) << run.config_yaml;  // what every rank reads
  DeviceInfo device = resolve_device(run.runtime);
  store_.start_run(run_id, {.git_revision = git_revision_of(experiment.file),
                            .torch_version = torch_version(),
                            .device_name = device.name,
                            .log_path = log_path});
  auto log = run_logger(run.variant, log_path);
  log->info("run {} of experiment '{}', variant '{}' (config {})", run_id, experiment.name,
            run.variant, run.config_hash);
  StoreObserver observer(store_, run_id, log);
  // A one-device run stays on node 0 (the other nodes skip it), whatever the batch spans.
  const NodeSpec node = run.strategy.capabilities.multi_process ? node_ : NodeSpec();
  LaunchSpec spec{.config_path = config_path,
                  .variant = run.variant,
                  .log_prefix = stem.string(),
                  .output_prefix = stem.string(),
                  .devices = static_cast<int>(run.runtime.devices),
                  .node = node,
                  .port = node.port_for_run(ordinal)};
  LaunchResult result = launch_run(spec, observer, stop_requested_);
  switch (result.outcome) {
    case LaunchOutcome::completed:
      store_.complete_run(run_id, result.metrics);
      ++summary.completed;
      break;
    case LaunchOutcome::interrupted:
      log->warn("interrupted");
      store_.end_run(run_id, RunStatus::interrupted, result.error);
      summary.interrupted = true;
      break;
    case LaunchOutcome::failed:
      log->error("run failed: {}", result.error);
      store_.end_run(run_id, RunStatus::failed, result.error);
      ++summary.failed;
      break;
  }
}

}  // namespace trainyard
