#include "trackers/tensorboard.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <ctime>
#include <filesystem>
#include <stdexcept>

#include <fmt/format.h>

#include "common/clock.h"
#include "common/files.h"
#include "common/metrics.h"
#include "common/process.h"
#include "trackers/tfrecord.h"

namespace trainyard {

namespace fs = std::filesystem;
using tfrecord::Message;

namespace {

// Field numbers of tensorboard/compat/proto/event.proto and summary.proto.
namespace event {
constexpr int kWallTime = 1, kStep = 2, kFileVersion = 3, kSummary = 5;
}
namespace summary {
constexpr int kValue = 1;  // Summary.value
// Summary.Value
constexpr int kTag = 1, kSimpleValue = 2, kTensor = 8, kMetadata = 9;
// SummaryMetadata, and its PluginData
constexpr int kPluginData = 1, kPluginName = 1, kContent = 2;
}  // namespace summary
// tensorboard/plugins/hparams/plugin_data.proto (HParamsPluginData, SessionStartInfo,
// SessionEndInfo) and google/protobuf/struct.proto (Value).
namespace hparams {
constexpr int kVersion = 1, kSessionStartInfo = 3, kSessionEndInfo = 4;
constexpr int kHparams = 1, kGroupName = 4, kStartTimeSecs = 5;  // SessionStartInfo
constexpr int kStatus = 1, kEndTimeSecs = 2;                     // SessionEndInfo
constexpr int kMapKey = 1, kMapValue = 2;                        // a map<string, Value> entry
constexpr int kNumberValue = 2, kStringValue = 3, kBoolValue = 4;
enum Status { kUnknown = 0, kSuccess = 1, kFailure = 2, kRunning = 3 };
}  // namespace hparams

// The plugin's summaries carry their data in the metadata, and a float tensor of shape [0] as the
// value (what tensorboard/plugins/hparams/metadata.py's NULL_TENSOR serialises to).
const std::string kNullTensor("\x08\x01\x12\x02\x12\x00", 6);

std::string hparams_summary(const char* tag, const Message& plugin_data) {
  Message metadata;
  metadata.message(summary::kPluginData, Message()
                                             .bytes(summary::kPluginName, "hparams")
                                             .bytes(summary::kContent, plugin_data.data()));
  Message value;
  value.bytes(summary::kTag, tag).message(summary::kMetadata, metadata);
  value.bytes(summary::kTensor, kNullTensor);
  return Message().message(summary::kValue, value).data();
}

// A setting as the dashboard sorts and filters it: a number when it reads as one, a boolean, or
// text.
Message setting_value(const std::string& text) {
  Message value;
  double number = 0;
  const char* end = text.data() + text.size();
  const auto [at, error] = std::from_chars(text.data(), end, number);
  if (!text.empty() && error == std::errc() && at == end && std::isfinite(number))
    value.float64(hparams::kNumberValue, number);
  else if (text == "true" || text == "false")
    value.varint(hparams::kBoolValue, text == "true");
  else
    value.bytes(hparams::kStringValue, text);
  return value;
}

// One event file per process per folder, named as TensorFlow's writers name theirs.
std::string event_file_name() {
  static std::atomic<int> counter{0};
  return fmt::format("events.out.tfevents.{}.{}.{}.{}", std::time(nullptr), host_name(), getpid(),
                     counter++);
}

}  // namespace

TensorBoardRun::TensorBoardRun(const std::string& folder) {
  std::error_code error;
  fs::create_directories(folder, error);
  if (fs::is_directory(folder))
    for (const auto& entry : fs::directory_iterator(folder, error))
      if (entry.path().filename().string().starts_with("events.out.tfevents."))
        remove_tree(entry.path().string());
  path_ = (fs::path(folder) / event_file_name()).string();
  file_ = std::fopen(path_.c_str(), "wb");
  if (!file_) throw std::runtime_error(file_error("write TensorBoard's event file", path_, errno));
  write_event(Message()
                  .float64(event::kWallTime, static_cast<double>(std::time(nullptr)))
                  .bytes(event::kFileVersion, "brain.Event:2")
                  .data());
}

TensorBoardRun::~TensorBoardRun() {
  if (file_) std::fclose(file_);
}

void TensorBoardRun::write_event(const std::string& event) {
  const std::string record = tfrecord::frame(event);
  if (std::fwrite(record.data(), 1, record.size(), file_) != record.size())
    throw std::runtime_error(file_error("write", path_, errno));
}

void TensorBoardRun::flush() {
  if (std::fflush(file_) != 0) throw std::runtime_error(file_error("write", path_, errno));
}

void TensorBoardRun::scalars(const std::string& prefix, int64_t step, double wall_time,
                             const std::map<std::string, double>& values) {
  Message all;
  for (const auto& [key, value] : values)
    if (!std::isnan(value))
      all.message(summary::kValue, Message()
                                       .bytes(summary::kTag, prefix + "/" + key)
                                       .float32(summary::kSimpleValue, static_cast<float>(value)));
  if (all.data().empty()) return;
  write_event(Message()
                  .float64(event::kWallTime, wall_time)
                  .varint(event::kStep, static_cast<uint64_t>(step))
                  .message(event::kSummary, all)
                  .data());
}

void TensorBoardRun::session_start(const std::map<std::string, std::string>& params,
                                   const std::string& group, double wall_time) {
  Message start;
  for (const auto& [key, text] : params)
    start.message(
        hparams::kHparams,
        Message().bytes(hparams::kMapKey, key).message(hparams::kMapValue, setting_value(text)));
  start.bytes(hparams::kGroupName, group).float64(hparams::kStartTimeSecs, wall_time);
  const Message plugin_data =
      Message().varint(hparams::kVersion, 0).message(hparams::kSessionStartInfo, start);
  write_event(
      Message()
          .float64(event::kWallTime, wall_time)
          .bytes(event::kSummary, hparams_summary("_hparams_/session_start_info", plugin_data))
          .data());
}

void TensorBoardRun::session_end(RunStatus status, double wall_time) {
  const hparams::Status ended = status == RunStatus::completed ? hparams::kSuccess
                                : status == RunStatus::failed  ? hparams::kFailure
                                : status == RunStatus::running ? hparams::kRunning
                                                               : hparams::kUnknown;
  const Message plugin_data =
      Message()
          .varint(hparams::kVersion, 0)
          .message(
              hparams::kSessionEndInfo,
              Message().varint(hparams::kStatus, ended).float64(hparams::kEndTimeSecs, wall_time));
  write_event(
      Message()
          .float64(event::kWallTime, wall_time)
          .bytes(event::kSummary, hparams_summary("_hparams_/session_end_info", plugin_data))
          .data());
}

std::string tensorboard_folder(const std::string& dir, const RunRecord& run, Store& store) {
  const fs::path experiment = fs::path(dir) / run.experiment;
  if (const auto trial = store.study_trial_of(run.id))
    return (experiment / fmt::format("{}-study", trial->first.study) /
            fmt::format("trial{}-run{}", trial->second.trial, run.id))
        .string();
  return (experiment / fmt::format("{}-run{}", run.variant, run.id)).string();
}

TensorBoardSteps write_tensorboard_records(TensorBoardRun& writer, Store& store,
                                           const RunRecord& run) {
  const RunFigures figures = run_figures(store, run);
  writer.session_start(store.params(run.id), run.experiment + "/" + run.variant, figures.start);
  for (const FigureGroup& group : figures.groups)
    writer.scalars(group.scope, group.step, group.wall_time, group.values);
  if (run.status != RunStatus::queued && run.status != RunStatus::running)
    writer.session_end(run.status, figures.end);
  return {.step = figures.last_step, .epoch = figures.last_epoch_step};
}

int export_tensorboard(Store& store, const std::string& dir, const std::string& experiment) {
  int written = 0;
  for (const RunRecord& run : store.runs(experiment)) {
    if (run.status == RunStatus::queued || run.status == RunStatus::skipped)
      continue;  // never trained
    TensorBoardRun writer(tensorboard_folder(dir, run, store));
    write_tensorboard_records(writer, store, run);
    writer.flush();
    ++written;
  }
  return written;
}

}  // namespace trainyard
