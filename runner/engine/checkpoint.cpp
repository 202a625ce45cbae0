#include "runner/engine/checkpoint.h"

#include <filesystem>
#include <fstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "components/optim/optimizers.h"
#include "components/weights/load_weights.h"
#include "components/weights/safetensors.h"

namespace trainyard {

namespace fs = std::filesystem;

namespace {

const char* const kModelFile = "model.safetensors";
const char* const kOptimizerFile = "optimizer.safetensors";
const char* const kBestFile = "best.safetensors";
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

// Every file of the folder names the epoch it holds; a file of another epoch means a write was cut
// short.
void check_epoch(const std::string& path, int64_t epoch) {
  SafetensorsFile file(path);
  auto it = file.metadata().find("epoch");
  if (it == file.metadata().end() || it->second != std::to_string(epoch))
    throw UserError(
        fmt::format("{} does not hold epoch {} as trainer_state.json says: the folder was written "
                    "only in part; resume from an earlier copy",
                    path, epoch));
}

}  // namespace

void save_training_state(const std::string& dir, Model& model, Strategy& strategy,
                         torch::optim::Optimizer& optimizer, const LossScaler* scaler,
                         const TrainerState& state,
                         const std::vector<torch::Tensor>& best_weights) {
  const bool writer = strategy.rank() == 0;
  if (writer) fs::create_directories(dir);
  const std::map<std::string, std::string> metadata = {{"epoch", std::to_string(state.epoch)},
                                                       {"written_by", "trainyard"}};
  strategy.with_full_parameters(model, [&] {
    if (!writer) return;
    NamedTensors weights;
    for (const auto& item : model.named_parameters(true))
      weights.emplace_back(item.key(), item.value());
    for (const auto& item : model.named_buffers(true))
      weights.emplace_back(item.key(), item.value());
    save_tensors(in(dir, kModelFile), weights, metadata);
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
  if (!writer) return;
  save_tensors(in(dir, kOptimizerFile), tensors, metadata);

  std::error_code ignored;
  fs::remove(in(dir, kBestFile), ignored);
  if (!best_weights.empty()) {
    NamedTensors best;
    size_t i = 0;
    for (const auto& item : model.named_parameters(true))
      best.emplace_back(item.key(), best_weights[i++]);
    for (const auto& item : model.named_buffers(true))
      best.emplace_back(item.key(), best_weights[i++]);
    save_tensors(in(dir, kBestFile), best, metadata);
  }

  nlohmann::json json = {{"epoch", state.epoch},           {"step", state.step},
                         {"best_epoch", state.best_epoch}, {"best_val_acc", state.best_val_acc},
                         {"strategy", state.strategy},     {"world_size", state.world_size}};
  const std::string path = in(dir, kStateFile), temporary = path + ".tmp";
  std::ofstream(temporary) << json.dump(2) << "\n";
  fs::rename(temporary, path);  // last: the folder is whole from here on
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
  } catch (const nlohmann::json::exception& e) {
    throw UserError(fmt::format("{}: not a valid trainer state ({})", path, e.what()));
  }
  check_epoch(in(dir, kModelFile), state.epoch);
  check_epoch(in(dir, kOptimizerFile), state.epoch);
  if (fs::exists(in(dir, kBestFile))) check_epoch(in(dir, kBestFile), state.epoch);
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
