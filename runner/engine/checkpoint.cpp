#include "runner/engine/checkpoint.h"

#include <fcntl.h>
#include <stdio.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>

#include <fmt/format.h>

#include "common/files.h"
#include "components/weights/load_weights.h"
#include "runner/engine/engine.h"
#include "trainyard/optimizers.h"

namespace trainyard {

namespace fs = std::filesystem;

namespace {

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

void fsync_path(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0 || ::fsync(fd) != 0) {
    const int error = errno;
    if (fd >= 0) ::close(fd);
    throw std::runtime_error(file_error("flush to disk", path, error));
  }
  ::close(fd);
}

// A full disk must fail the write, not commit a cut-off trainer_state.json.
void write_state_file(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  errno = 0;
  out << text;
  out.flush();
  if (!out) throw std::runtime_error(file_error("write", path, errno ? errno : EIO));
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
                         Optimizer& optimizer, const LossScaler* scaler, const TrainerState& state,
                         const std::vector<torch::Tensor>& best_weights,
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
    save_tensors(in(staged, kModelStateFile), weights, metadata);
  });

  // The optimizer's state, each kind ("exp_avg", ...) gathered whole per parameter.
  NamedTensors tensors;
  const auto parameters = optimizer_parameters(optimizer.libtorch());
  const auto names = parameter_names(model);
  std::vector<ParameterState> states;
  for (const auto& p : parameters) states.push_back(optimizer.parameter_state(p));
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
  save_tensors(in(staged, kOptimizerStateFile), tensors, metadata);

  NamedTensors by_rank;
  for (size_t r = 0; r < ranks.size(); ++r)
    for (const auto& [name, tensor] : ranks[r])
      by_rank.emplace_back(fmt::format("rank{}/{}", r, name), tensor);
  save_tensors(in(staged, kRanksStateFile), by_rank, metadata);

  if (!best_weights.empty()) {
    NamedTensors best;
    size_t i = 0;
    for (const auto& item : model.named_parameters(true))
      best.emplace_back(item.key(), best_weights[i++]);
    for (const auto& item : model.named_buffers(true))
      best.emplace_back(item.key(), best_weights[i++]);
    save_tensors(in(staged, kBestStateFile), best, metadata);
  }

  write_state_file(in(staged, kTrainerStateFile), trainer_state_json(state));
  commit_staged(dir);
}

void remove_training_state(const std::string& dir) {
  remove_tree(dir);
  remove_tree(checkpoint_staging_dir(dir));
}

void load_model_state(const std::string& dir, Model& model) {
  load_weights(model, in(dir, kModelStateFile), /*strict=*/true);
}

void load_optimizer_state(const std::string& dir, Model& model, Strategy& strategy,
                          Optimizer& optimizer, LossScaler* scaler) {
  const std::string path = in(dir, kOptimizerStateFile);
  std::map<std::string, torch::Tensor> tensors = load_tensors(path);
  const auto model_parameters = model.parameters();
  const auto names = parameter_names(model);
  // The kinds of state the file holds for the first parameter, and each kind for every parameter.
  std::vector<std::string> kinds;
  const std::string first = names.empty() ? "" : names[0] + "/";
  for (const auto& [name, tensor] : tensors)
    if (!first.empty() && name.rfind(first, 0) == 0) kinds.push_back(name.substr(first.size()));
  const auto parameters = optimizer_parameters(optimizer.libtorch());
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
    optimizer.set_parameter_state(parameters[i], states[i]);
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
  const std::string path = in(dir, kRanksStateFile);
  std::vector<std::map<std::string, torch::Tensor>> out;
  if (!fs::exists(path)) return out;
  for (auto& [entry, tensor] : load_tensors(path)) {
    std::string name;
    const auto rank = static_cast<size_t>(rank_of_state_entry(entry, path, name));
    if (out.size() <= rank) out.resize(rank + 1);
    out[rank][name] = tensor;
  }
  return out;
}

std::vector<torch::Tensor> load_best_weights(const std::string& dir, Model& model) {
  const std::string path = in(dir, kBestStateFile);
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
