#include "runner/engine/checkpoint.h"

#include <fcntl.h>
#include <stdio.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "common/files.h"
#include "components/optim/optimizers.h"
#include "components/weights/load_weights.h"
#include "components/weights/safetensors.h"
#include "runner/engine/engine.h"

namespace trainyard {

namespace fs = std::filesystem;

namespace {

const char* const kModelFile = "model.safetensors";
const char* const kOptimizerFile = "optimizer.safetensors";
const char* const kBestFile = "best.safetensors";
const char* const kRanksFile = "ranks.safetensors";
const char* const kStateFile = "trainer_state.json";

std::string in(const std::string& dir, const char* file) { return (fs::path(dir) / file).string(); }

std::vector<torch::Tensor> optimizer_parameters(const torch::optim::Optimizer& optimizer) {
  std::vector<torch::Tensor> out;
  for (const auto& group : optimizer.param_groups())
    out.insert(out.end(), group.params().begin(), group.params().end());
  return out;
}

std::vector<std::string> parameter_names(Model& model) {
  std::vector<std::string> names;
  for (const auto& item : model.named_parameters(true)) names.push_back(item.key());
  return names;
}

// What every file of a folder records of the state it belongs to: a file of another state means
// the folder was put together from two writes.
std::string state_mark(const TrainerState& state) {
  return fmt::format("{}.{}.{}", state.epoch, state.batch, state.step);
}

void check_mark(const std::string& path, const TrainerState& state) {
  SafetensorsFile file(path);
  const auto& metadata = file.metadata();
  auto mark = metadata.find("state");
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

void fsync_path(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0 || ::fsync(fd) != 0) {
    const int error = errno;
    if (fd >= 0) ::close(fd);
    throw std::runtime_error(
        fmt::format("cannot flush {} to disk: {}", path, std::strerror(error)));
  }
  ::close(fd);
}

// Makes the staged folder the state: every file and the folder on disk first, then one atomic
// exchange with the live folder (or a rename when there is none), then the parent folder on disk;
// the previous state, now in the staging folder, is removed last.
void commit_staged(const std::string& dir) {
  const std::string staged = checkpoint_staging_dir(dir);
  for (const auto& entry : fs::directory_iterator(staged)) fsync_path(entry.path().string());
  fsync_path(staged);
  if (fs::exists(dir)) {
    if (::renameat2(AT_FDCWD, staged.c_str(), AT_FDCWD, dir.c_str(), RENAME_EXCHANGE) != 0) {
      // A file system without RENAME_EXCHANGE: for a moment there is no state (a kill then costs
      // the run's progress, never a torn state).
      remove_tree(dir);
      fs::rename(staged, dir);
    }
  } else {
    fs::rename(staged, dir);
  }
  const fs::path parent = fs::path(dir).parent_path();
  fsync_path(parent.empty() ? "." : parent.string());
  remove_tree(staged);
}

// Every rank's `mine` on rank 0, by rank: one sum over a [world, n] table of doubles where each
// rank fills its row (bytes, counts below 2^53 and doubles all survive the trip exactly).
std::vector<NamedTensors> gather_rank_states(Strategy& strategy, const NamedTensors& mine) {
  std::vector<torch::Tensor> flat;
  for (const auto& [name, tensor] : mine)
    flat.push_back(tensor.detach().to(torch::kCPU).to(torch::kDouble).reshape(-1));
  torch::Tensor row = flat.empty() ? torch::zeros({0}, torch::kDouble) : torch::cat(flat);
  const int world = strategy.world_size();
  torch::Tensor table = torch::zeros({world, row.numel()}, torch::kDouble);
  table[strategy.rank()].copy_(row);
  strategy.all_reduce_sum(table);
  std::vector<NamedTensors> out(static_cast<size_t>(world));
  for (int r = 0; r < world; ++r) {
    int64_t offset = 0;
    for (const auto& [name, tensor] : mine) {
      torch::Tensor part = table[r].narrow(0, offset, tensor.numel());
      out[static_cast<size_t>(r)].emplace_back(
          name, part.reshape(tensor.sizes()).to(tensor.scalar_type()).clone());
      offset += tensor.numel();
    }
  }
  return out;
}

}  // namespace

void save_training_state(const std::string& dir, Model& model, Strategy& strategy,
                         torch::optim::Optimizer& optimizer, const LossScaler* scaler,
                         const TrainerState& state, const std::vector<torch::Tensor>& best_weights,
                         const NamedTensors& rank_state) {
  const bool writer = strategy.rank() == 0;
  const std::string staged = checkpoint_staging_dir(dir);
  if (writer) {
    remove_tree(staged);  // what a write cut short left
    fs::create_directories(staged);
  }
  const std::map<std::string, std::string> metadata = {{"state", state_mark(state)},
                                                       {"epoch", std::to_string(state.epoch)},
                                                       {"written_by", "trainyard"}};
  strategy.with_full_parameters(model, [&] {
    if (!writer) return;
    NamedTensors weights;
    for (const auto& item : model.named_parameters(true))
      weights.emplace_back(item.key(), item.value());
    for (const auto& item : model.named_buffers(true))
      weights.emplace_back(item.key(), item.value());
    save_tensors(in(staged, kModelFile), weights, metadata);
  });

  // The optimizer's state, each kind ("exp_avg", ...) gathered whole per parameter.
  NamedTensors tensors;
  const auto parameters = optimizer_parameters(optimizer);
  const auto names = parameter_names(model);
  std::vector<ParameterState> states;
  for (const auto& p : parameters) states.push_back(parameter_state(optimizer, p));
  if (!states.empty() && !states[0].empty()) {
    for (const auto& [kind, unused] : states[0]) {
      std::vector<torch::Tensor> shards;
      for (const auto& s : states) shards.push_back(s.at(kind));
      std::vector<torch::Tensor> whole = strategy.to_model_layout(model, shards);
      for (size_t i = 0; i < whole.size(); ++i)
        tensors.emplace_back(names[i] + "/" + kind, whole[i]);
    }
  }
  if (scaler)
    for (const auto& [name, tensor] : scaler->state())
      tensors.emplace_back("loss_scaler/" + name, tensor);
  const std::vector<NamedTensors> ranks = gather_rank_states(strategy, rank_state);
  if (!writer) return;
  save_tensors(in(staged, kOptimizerFile), tensors, metadata);

  NamedTensors by_rank;
  for (size_t r = 0; r < ranks.size(); ++r)
    for (const auto& [name, tensor] : ranks[r])
      by_rank.emplace_back(fmt::format("rank{}/{}", r, name), tensor);
  save_tensors(in(staged, kRanksFile), by_rank, metadata);

  if (!best_weights.empty()) {
    NamedTensors best;
    size_t i = 0;
    for (const auto& item : model.named_parameters(true))
      best.emplace_back(item.key(), best_weights[i++]);
    for (const auto& item : model.named_buffers(true))
      best.emplace_back(item.key(), best_weights[i++]);
    save_tensors(in(staged, kBestFile), best, metadata);
  }

  nlohmann::json json = {{"epoch", state.epoch},
                         {"batch", state.batch},
                         {"step", state.step},
                         {"best_epoch", state.best_epoch},
                         {"best_val_acc", state.best_val_acc},
                         {"strategy", state.strategy},
                         {"world_size", state.world_size},
                         {"batch_size", state.batch_size},
                         {"train_seconds", state.train_seconds},
                         {"epoch_seconds", state.epoch_seconds},
                         {"epochs_without_improvement", state.epochs_without_improvement},
                         {"meter", state.meter}};
  if (!std::isnan(state.best_monitored)) json["best_monitored"] = state.best_monitored;
  nlohmann::json epochs = nlohmann::json::object();
  for (const auto& [epoch, values] : state.epochs) epochs[std::to_string(epoch)] = values;
  json["epochs"] = epochs;
  std::ofstream(in(staged, kStateFile)) << json.dump(2) << "\n";
  commit_staged(dir);
}

bool has_training_state(const std::string& dir) {
  try {
    read_trainer_state(dir);
    return true;
  } catch (const std::exception&) {
    return false;
  }
}

void remove_training_state(const std::string& dir) {
  remove_tree(dir);
  remove_tree(checkpoint_staging_dir(dir));
}

TrainerState read_trainer_state(const std::string& dir) {
  const std::string path = in(dir, kStateFile);
  if (!fs::is_directory(dir))
    throw UserError(
        fmt::format("train.resume_from: '{}' is not a folder; name a training-state folder that "
                    "train.save_state wrote (<run>.state beside the run's log)",
                    dir));
  std::ifstream file(path);
  if (!file)
    throw UserError(
        fmt::format("train.resume_from: '{}' has no {}: it is not a training-state folder, or its "
                    "first write was cut short",
                    dir, kStateFile));
  nlohmann::json json = nlohmann::json::parse(file, nullptr, /*allow_exceptions=*/false);
  TrainerState state;
  try {
    state.epoch = json.at("epoch").get<int64_t>();
    state.step = json.at("step").get<int64_t>();
    state.best_epoch = json.at("best_epoch").get<int64_t>();
    state.best_val_acc = json.at("best_val_acc").get<double>();
    state.strategy = json.at("strategy").get<std::string>();
    state.world_size = json.at("world_size").get<int64_t>();
    // Written by mid-epoch checkpoints; folders of earlier trainyards end at an epoch's end.
    state.batch = json.value("batch", int64_t{0});
    state.batch_size = json.value("batch_size", int64_t{0});
    state.train_seconds = json.value("train_seconds", 0.0);
    state.epoch_seconds = json.value("epoch_seconds", 0.0);
    state.epochs_without_improvement = json.value("epochs_without_improvement", int64_t{0});
    if (json.contains("best_monitored"))
      state.best_monitored = json.at("best_monitored").get<double>();
    if (json.contains("meter")) state.meter = json.at("meter").get<std::map<std::string, double>>();
    if (json.contains("epochs"))
      for (const auto& [epoch, values] : json.at("epochs").items())
        state.epochs[std::stoll(epoch)] = values.get<std::map<std::string, double>>();
  } catch (const nlohmann::json::exception& e) {
    throw UserError(fmt::format("{}: not a valid trainer state ({})", path, e.what()));
  }
  check_mark(in(dir, kModelFile), state);
  check_mark(in(dir, kOptimizerFile), state);
  for (const char* optional : {kBestFile, kRanksFile})
    if (fs::exists(in(dir, optional))) check_mark(in(dir, optional), state);
  return state;
}

void load_model_state(const std::string& dir, Model& model) {
  load_weights(model, in(dir, kModelFile), /*strict=*/true);
}

void load_optimizer_state(const std::string& dir, Model& model, Strategy& strategy,
                          torch::optim::Optimizer& optimizer, LossScaler* scaler) {
  const std::string path = in(dir, kOptimizerFile);
  std::map<std::string, torch::Tensor> tensors = load_tensors(path);
  const auto model_parameters = model.parameters();
  const auto names = parameter_names(model);
  // The kinds of state the file holds for the first parameter, and each kind for every parameter.
  std::vector<std::string> kinds;
  const std::string first = names.empty() ? "" : names[0] + "/";
  for (const auto& [name, tensor] : tensors)
    if (!first.empty() && name.rfind(first, 0) == 0) kinds.push_back(name.substr(first.size()));
  const auto parameters = optimizer_parameters(optimizer);
  std::vector<ParameterState> states(parameters.size());
  for (const auto& kind : kinds) {
    std::vector<torch::Tensor> whole;
    for (size_t i = 0; i < names.size(); ++i) {
      auto it = tensors.find(names[i] + "/" + kind);
      if (it == tensors.end())
        throw UserError(
            fmt::format("{}: no '{}' state for parameter {}; the file does not fit this model",
                        path, kind, names[i]));
      if (it->second.dim() > 0 && it->second.sizes() != model_parameters[i].sizes())
        throw UserError(fmt::format("{}: '{}' of {} has another shape than the parameter", path,
                                    kind, names[i]));
      whole.push_back(it->second.to(model_parameters[i].device()));
    }
    std::vector<torch::Tensor> shards = strategy.to_optimizer_layout(model, whole);
    for (size_t i = 0; i < parameters.size(); ++i) states[i][kind] = shards[i];
  }
  for (size_t i = 0; i < parameters.size(); ++i)
    set_parameter_state(optimizer, parameters[i], states[i]);
  if (scaler) {
    std::map<std::string, torch::Tensor> scaler_state;
    for (const char* name : {"scale", "growth_tracker", "skipped"}) {
      auto it = tensors.find(std::string("loss_scaler/") + name);
      if (it == tensors.end())
        throw UserError(fmt::format(
            "{}: no loss-scaler state; it was written by a run without 16-mixed", path));
      scaler_state[name] = it->second;
    }
    scaler->load_state(scaler_state);
  }
}

std::vector<std::map<std::string, torch::Tensor>> load_rank_states(const std::string& dir) {
  const std::string path = in(dir, kRanksFile);
  std::vector<std::map<std::string, torch::Tensor>> out;
  if (!fs::exists(path)) return out;
  for (auto& [name, tensor] : load_tensors(path)) {
    // "rank<R>/<name>"
    const size_t slash = name.find('/');
    if (name.rfind("rank", 0) != 0 || slash == std::string::npos)
      throw UserError(fmt::format("{}: unexpected entry '{}'", path, name));
    const auto rank = static_cast<size_t>(std::stoll(name.substr(4, slash - 4)));
    if (out.size() <= rank) out.resize(rank + 1);
    out[rank][name.substr(slash + 1)] = tensor;
  }
  return out;
}

std::vector<torch::Tensor> load_best_weights(const std::string& dir, Model& model) {
  const std::string path = in(dir, kBestFile);
  if (!fs::exists(path)) return {};
  std::map<std::string, torch::Tensor> tensors = load_tensors(path);
  std::vector<torch::Tensor> weights;
  auto take = [&](const std::string& name, const torch::Tensor& like) {
    auto it = tensors.find(name);
    if (it == tensors.end() || it->second.sizes() != like.sizes())
      throw UserError(fmt::format("{}: '{}' is missing or has another shape", path, name));
    weights.push_back(it->second.to(like.options()));
  };
  for (const auto& item : model.named_parameters(true)) take(item.key(), item.value());
  for (const auto& item : model.named_buffers(true)) take(item.key(), item.value());
  return weights;
}

}  // namespace trainyard
