#include "runner/engine/trainer_state.h"

#include <charconv>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "common/json_numbers.h"
#include "components/weights/safetensors.h"
#include "trainyard/error.h"

namespace trainyard {

namespace fs = std::filesystem;

namespace {

std::string in(const std::string& dir, const char* file) { return (fs::path(dir) / file).string(); }

// A whole number field, at least `least` (type_error for one missing, of another type or too big).
int64_t count_field(const nlohmann::json& json, const char* key, int64_t least, int64_t fallback,
                    bool required) {
  const auto it = json.find(key);
  if (it == json.end()) {
    if (required)
      throw nlohmann::json::out_of_range::create(403, fmt::format("no '{}'", key), &json);
    return fallback;
  }
  const int64_t value = integer_from_json(*it);
  if (value < least)
    throw nlohmann::json::type_error::create(
        302, fmt::format("'{}' is {}, below {}", key, value, least), &json);
  return value;
}

double real_field(const nlohmann::json& json, const char* key, double fallback) {
  const auto it = json.find(key);
  return it == json.end() ? fallback : number_from_json(*it);
}

// An epoch number of "epochs": decimal digits, 0 or more.
int64_t epoch_key(const std::string& text) {
  int64_t epoch = -1;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), epoch);
  if (error != std::errc() || end != text.data() + text.size() || epoch < 0)
    throw nlohmann::json::type_error::create(
        302, fmt::format("'{}' in \"epochs\" is not an epoch number", text), nullptr);
  return epoch;
}

void check_mark(const std::string& path, const TrainerState& state) {
  const SafetensorsFile file(path);
  const auto& metadata = file.metadata();
  const auto mark = metadata.find("state");
  const bool same =
      mark != metadata.end()
          ? mark->second == state_mark(state)
          // Folders of trainyard before mid-epoch checkpoints: the epoch only.
          : metadata.count("epoch") && metadata.at("epoch") == std::to_string(state.epoch);
  if (!same)
    throw UserError(
        fmt::format("{} does not belong to the state trainer_state.json describes (epoch {}, step "
                    "{}): the folder was put together from two writes; resume from another copy",
                    path, state.epoch, state.step));
}

}  // namespace

std::string trainer_state_json(const TrainerState& state) {
  nlohmann::json json = {{"epoch", state.epoch},
                         {"batch", state.batch},
                         {"step", state.step},
                         {"best_epoch", state.best_epoch},
                         {"best_val_acc", json_number(state.best_val_acc)},
                         {"strategy", state.strategy},
                         {"world_size", state.world_size},
                         {"batch_size", state.batch_size},
                         {"train_seconds", json_number(state.train_seconds)},
                         {"epoch_seconds", json_number(state.epoch_seconds)},
                         {"epoch_validation_seconds", json_number(state.epoch_validation_seconds)},
                         {"epochs_without_improvement", state.epochs_without_improvement},
                         {"intra_op_threads", state.intra_op_threads},
                         {"micro_batch_size", state.micro_batch_size},
                         {"oom_events", state.oom_events},
                         {"oom_seconds", json_number(state.oom_seconds)},
                         {"meter", json_numbers(state.meter)}};
  if (!std::isnan(state.best_monitored)) json["best_monitored"] = json_number(state.best_monitored);
  if (!std::isnan(state.first_loss)) {
    json["first_loss"] = json_number(state.first_loss);
    json["first_loss_step"] = state.first_loss_step;
  }
  nlohmann::json epochs = nlohmann::json::object();
  for (const auto& [epoch, values] : state.epochs)
    epochs[std::to_string(epoch)] = json_numbers(values);
  json["epochs"] = epochs;
  return json.dump(2) + "\n";
}

TrainerState parse_trainer_state(const std::string& text, const std::string& path) {
  const nlohmann::json json = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!json.is_object())
    throw UserError(fmt::format(
        "{}: not a trainer state (not a JSON object); the folder is damaged: resume from another "
        "copy",
        path));
  TrainerState state;
  try {
    state.epoch = count_field(json, "epoch", 0, 0, true);
    state.step = count_field(json, "step", 0, 0, true);
    state.best_epoch = count_field(json, "best_epoch", 0, 0, true);
    state.best_val_acc = number_from_json(json.at("best_val_acc"));
    state.strategy = json.at("strategy").get<std::string>();
    state.world_size = count_field(json, "world_size", 1, 1, true);
    if (state.world_size > kMaxStateRanks)
      throw nlohmann::json::type_error::create(
          302, fmt::format("'world_size' is {}, more than {}", state.world_size, kMaxStateRanks),
          &json);
    // Written by mid-epoch checkpoints; folders of earlier trainyards end at an epoch's end.
    state.batch = count_field(json, "batch", 0, 0, false);
    state.batch_size = count_field(json, "batch_size", 0, 0, false);
    // The sample a mid-epoch position lies at must be countable (the trainer multiplies these).
    int64_t samples = 0;
    if (__builtin_mul_overflow(state.batch, state.batch_size, &samples) ||
        __builtin_mul_overflow(samples, state.world_size, &samples))
      throw nlohmann::json::type_error::create(
          302, "'batch' x 'batch_size' x 'world_size' is more samples than int64 counts", &json);
    state.train_seconds = real_field(json, "train_seconds", 0.0);
    state.epoch_seconds = real_field(json, "epoch_seconds", 0.0);
    state.epoch_validation_seconds = real_field(json, "epoch_validation_seconds", 0.0);
    state.epochs_without_improvement = count_field(json, "epochs_without_improvement", 0, 0, false);
    state.intra_op_threads = count_field(json, "intra_op_threads", 0, 0, false);
    state.micro_batch_size = count_field(json, "micro_batch_size", 0, 0, false);
    state.oom_events = count_field(json, "oom_events", 0, 0, false);
    state.oom_seconds = real_field(json, "oom_seconds", 0.0);
    state.best_monitored = real_field(json, "best_monitored", std::nan(""));
    state.first_loss = real_field(json, "first_loss", std::nan(""));
    state.first_loss_step = count_field(json, "first_loss_step", 0, 0, false);
    if (json.contains("meter")) state.meter = numbers_from_json(json.at("meter"));
    if (json.contains("epochs")) {
      const nlohmann::json& epochs = json.at("epochs");
      if (!epochs.is_object())
        throw nlohmann::json::type_error::create(302, "\"epochs\" is not an object", &epochs);
      for (const auto& [epoch, values] : epochs.items())
        state.epochs[epoch_key(epoch)] = numbers_from_json(values);
    }
  } catch (const nlohmann::json::exception& e) {
    throw UserError(fmt::format(
        "{}: not a valid trainer state ({}); the folder is damaged: resume from another copy", path,
        e.what()));
  }
  return state;
}

std::string state_mark(const TrainerState& state) {
  return fmt::format("{}.{}.{}", state.epoch, state.batch, state.step);
}

TrainerState read_trainer_state(const std::string& dir) {
  const std::string path = in(dir, kTrainerStateFile);
  std::error_code ec;
  if (!fs::is_directory(dir, ec))
    throw UserError(
        fmt::format("train.resume_from: '{}' is not a folder; name a training-state folder that "
                    "train.save_state wrote (<run>.state beside the run's log)",
                    dir));
  std::ifstream file(path, std::ios::binary);
  if (!file || fs::is_directory(path, ec))
    throw UserError(
        fmt::format("train.resume_from: '{}' has no {}: it is not a training-state folder, or its "
                    "first write was cut short",
                    dir, kTrainerStateFile));
  // A trainer state is a few kilobytes (one line a finished epoch); megabytes are not one.
  constexpr uintmax_t kMaxBytes = 64 << 20;
  if (const uintmax_t size = fs::file_size(path, ec); !ec && size > kMaxBytes)
    throw UserError(fmt::format("{}: {} bytes, more than the {} a trainer state may have", path,
                                size, kMaxBytes));
  std::stringstream text;
  text << file.rdbuf();
  const TrainerState state = parse_trainer_state(text.str(), path);
  check_mark(in(dir, kModelStateFile), state);
  check_mark(in(dir, kOptimizerStateFile), state);
  for (const char* optional : {kBestStateFile, kRanksStateFile})
    if (fs::exists(in(dir, optional), ec)) check_mark(in(dir, optional), state);
  return state;
}

bool has_training_state(const std::string& dir) {
  try {
    read_trainer_state(dir);
    return true;
  } catch (const std::exception&) {
    return false;
  }
}

int64_t rank_of_state_entry(const std::string& entry, const std::string& path, std::string& name) {
  const size_t slash = entry.find('/');
  int64_t rank = -1;
  const bool well_formed =
      entry.rfind("rank", 0) == 0 && slash != std::string::npos && slash > 4 &&
      std::from_chars(entry.data() + 4, entry.data() + slash, rank).ptr == entry.data() + slash;
  if (!well_formed || rank < 0 || rank >= kMaxStateRanks)
    throw UserError(fmt::format(
        "{}: unexpected entry '{}' (entries are rank<R>/<name>, R below {}); the folder is "
        "damaged: resume from another copy",
        path, entry, kMaxStateRanks));
  name = entry.substr(slash + 1);
  return rank;
}

}  // namespace trainyard
