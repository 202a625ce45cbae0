#include "runner/batch_records.h"

#include <fstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "common/files.h"
#include "common/json_numbers.h"
#include "common/process.h"
#include "common/text.h"
#include "runner/engine/engine.h"

namespace trainyard {

namespace fs = std::filesystem;

namespace {

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

}  // namespace

void check_experiment_name_is_free(Store& store, const Experiment& experiment) {
  const std::optional<ExperimentRecord> recorded = store.find_experiment(experiment.name);
  if (!recorded || same_file(recorded->file, experiment.file)) return;
  throw UserError(fmt::format(
      "{}: experiment name '{}' is already taken in {} by {}; give one of the two files another "
      "`name:` (or record this one in another database with --db)",
      experiment.file, experiment.name, store.path(), recorded->file));
}

void remove_checkpoint(const std::string& state_dir) {
  remove_tree(state_dir);
  remove_tree(checkpoint_staging_dir(state_dir));
}

std::string checkpoint_position(const std::string& state_dir) {
  std::ifstream file(fs::path(state_dir) / "trainer_state.json");
  if (!file) return "";
  const nlohmann::json json = nlohmann::json::parse(file, nullptr, /*allow_exceptions=*/false);
  if (!json.is_object() || !json.contains("epoch") || !json.contains("step")) return "";
  return fmt::format("epoch {}, batch {}, optimizer step {}", integer_or(json, "epoch", 0) + 1,
                     integer_or(json, "batch", 0), integer_or(json, "step", 0));
}

RunProgress run_progress_of(const TrainingProgress& p) {
  return {.epoch = p.epoch,
          .epochs = p.epochs,
          .step = p.step,
          .total_steps = p.total_steps,
          .loss = p.loss,
          .samples_per_s = p.samples_per_s,
          .tokens_per_sample = p.tokens_per_sample,
          .eta_seconds = p.eta_seconds,
          .micro_batch = p.micro_batch,
          .oom_events = p.oom_events};
}

int64_t record_experiment(Store& store, const Experiment& experiment) {
  return store.upsert_experiment(experiment.name,
                                 fs::absolute(experiment.file).lexically_normal().string(),
                                 experiment.description, encode_report_options(experiment.report));
}

QueuedRun queued_run(const RunSpec& run, size_t position) {
  return {.variant = run.variant,
          .position = static_cast<int64_t>(position),
          .config_yaml = run.config_yaml,
          .config_hash = run.config_hash,
          .precision = run.runtime.precision,
          .strategy = run.strategy.name,
          .devices = run.runtime.devices,
          .repeat = run.repeat,
          .params = flat_config(run.config_yaml)};
}

fs::path new_run_files_stem(const std::string& log_dir, const Experiment& experiment,
                            const RunRecord& record, int node_rank) {
  const std::string uid = record.uid.empty() ? "" : "-" + record.uid;
  // Node K > 0 of a multi-node run keeps its logs apart from node 0's, should they share a folder.
  const std::string node_suffix = node_rank > 0 ? fmt::format("-node{}", node_rank) : "";
  const fs::path stem =
      fs::path(log_dir) / safe_file_name(experiment.name) /
      fmt::format("run-{}-{}{}{}", record.id, safe_file_name(record.variant), uid, node_suffix);
  for (const char* suffix : {".log", ".yaml", ".safetensors", ".state", ".events.jsonl"})
    if (fs::exists(stem.string() + suffix))
      throw std::runtime_error(fmt::format(
          "{}{} exists already; refusing to overwrite another run's file", stem.string(), suffix));
  return stem;
}

std::string git_revision_of(const std::string& path) {
  const std::string dir = fs::absolute(path).parent_path().string();
  const CommandOutput head = run_program({"git", "-C", dir, "rev-parse", "--short", "HEAD"});
  std::string revision = head.exit_code == 0 ? strip(head.out) : "";
  if (revision.empty()) return "";
  const CommandOutput changes =
      run_program({"git", "-C", dir, "status", "--porcelain", "--untracked-files=no"});
  if (changes.exit_code == 0 && !strip(changes.out).empty()) revision += "-dirty";
  return revision;
}

}  // namespace trainyard
