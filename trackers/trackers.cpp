#include "trackers/trackers.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>

#include <fmt/format.h>

#include "trackers/mlflow.h"
#include "trackers/tensorboard.h"
#include "trainyard/error.h"

namespace trainyard {

namespace fs = std::filesystem;

std::optional<TrackerKind> tracker_kind(std::string_view word) {
  for (TrackerKind kind : {TrackerKind::tensorboard, TrackerKind::mlflow})
    if (word == tracker_word(kind)) return kind;
  return std::nullopt;
}

const char* tracker_word(TrackerKind kind) {
  switch (kind) {
    case TrackerKind::tensorboard:
      return "tensorboard";
    case TrackerKind::mlflow:
      return "mlflow";
  }
  return "?";
}

namespace {

bool names(const std::vector<std::string>& loggers, TrackerKind kind) {
  return std::any_of(loggers.begin(), loggers.end(),
                     [&](const std::string& word) { return tracker_kind(word) == kind; });
}

const char* mlflow_uri() {
  const char* uri = std::getenv("MLFLOW_TRACKING_URI");
  return uri && *uri ? uri : nullptr;
}

}  // namespace

void check_trackers(const std::vector<TrackerUse>& uses) {
  // MLflow sends to MLFLOW_TRACKING_URI: a batch whose runs ask for it without an address to send
  // to is refused before it starts, as is an address that is no server's. (TensorBoard writes
  // files: nothing to reach.)
  for (const TrackerUse& use : uses) {
    if (!names(use.loggers, TrackerKind::mlflow)) continue;
    if (!mlflow_uri())
      throw UserError(fmt::format(
          "{}: variant '{}' logs to MLflow (runtime.loggers), but MLFLOW_TRACKING_URI is not "
          "set: export MLFLOW_TRACKING_URI=http://HOST:5000 (your tracking server), or leave "
          "mlflow out of runtime.loggers",
          use.file, use.variant));
    mlflow_server(mlflow_uri());  // UserError for an address that is no server's
    return;
  }
}

BatchTrackers::BatchTrackers(Store& store, const std::string& log_dir)
    : store_(store),
      tensorboard_root_((fs::path(log_dir).parent_path() / "tensorboard").string()) {}

BatchTrackers::~BatchTrackers() = default;

std::unique_ptr<RunTrackers> BatchTrackers::open(
    const std::vector<std::string>& loggers, RunRecords& stored, int64_t run_id,
    const std::function<void(const std::string&)>& info,
    const std::function<void(const std::string&)>& warn) {
  std::unique_ptr<RunTrackers> run(new RunTrackers(stored));
  if (names(loggers, TrackerKind::tensorboard)) {
    const std::string folder = tensorboard_folder(tensorboard_root_, *store_.run(run_id), store_);
    run->tensorboard_.emplace(*run->top_, store_, run_id, folder, warn);
    run->top_ = &*run->tensorboard_;
    info(fmt::format("TensorBoard: event files in {} (tensorboard --logdir {})",
                     fs::absolute(folder).string(), fs::absolute(tensorboard_root_).string()));
  }
  if (names(loggers, TrackerKind::mlflow)) {
    if (MlflowSender* sender = mlflow_sender()) {
      run->mlflow_.emplace(*run->top_, *sender, run_id, warn);
      run->top_ = &*run->mlflow_;
    } else {
      warn(
          "runtime.loggers has mlflow, but MLFLOW_TRACKING_URI is not set: nothing goes to "
          "MLflow (`trainyard export --mlflow URI` sends the run later)");
    }
  }
  return run;
}

MlflowSender* BatchTrackers::mlflow_sender() {
  if (!mlflow_) {
    if (!mlflow_uri()) return nullptr;
    mlflow_ = std::make_unique<MlflowSender>(store_.path(), mlflow_server(mlflow_uri()));
  }
  return mlflow_.get();
}

std::vector<std::string> BatchTrackers::finish() {
  std::vector<std::string> unsent;
  if (!mlflow_) return unsent;
  // Each run was sent as it trained; once more now, with the report, if the server answers.
  for (const std::string& problem : mlflow_->finish(std::chrono::seconds(60)))
    unsent.push_back(fmt::format("MLflow: not sent in full: {}", problem));
  mlflow_.reset();
  return unsent;
}

}  // namespace trainyard
