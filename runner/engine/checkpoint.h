// Training-state folders (checkpoints). A run writes one at every epoch's end and, within epochs,
// every train.checkpoint_every_steps optimizer steps and every train.checkpoint_every_minutes; an
// interrupted run continues from it (the controller passes it back), and train.resume_from starts
// a new run from any run's. Everything in it is whole and named by the model's parameters, never
// by shards, so a state can be resumed — or its model evaluated — under any strategy and world
// size (the studies' saving-and-loading example). The layout follows Hugging Face Trainer's
// checkpoint folders:
//
//   model.safetensors      the weights; model.weights loads it on its own
//   optimizer.safetensors  "<parameter>/exp_avg", ... per parameter, and "loss_scaler/scale", ...
//   best.safetensors       with train.checkpoint: best, the best validation epoch's weights when
//                          they are not the live ones
//   ranks.safetensors      per rank: the CPU and CUDA random states, the unfinished epoch's loss
//                          and accuracy sums — what continuing bit for bit needs
//   trainer_state.json     where the run is (epoch, batch within it, step), the best epoch, the
//                          time trained and the meter's counts
//
// A folder is written whole beside the live one (<dir>.new), every file fsync'd, then swapped in
// with one atomic rename and the parent folder fsync'd: a reader sees the previous state or the new
// one, never a torn one. Only the last state is kept.
#pragma once

#include <map>
#include <string>
#include <vector>

#include <torch/optim/optimizer.h>

#include "components/precision/loss_scaler.h"
#include "components/strategy/strategy.h"
#include "components/weights/load_weights.h"
#include "runner/engine/trainer_state.h"
#include "trainyard/model.h"

namespace trainyard {

// Collective: every rank calls it; rank 0 writes. `best_weights` (model parameters then buffers,
// whole) may be empty. `rank_state`: this rank's tensors (same names and shapes on every rank),
// gathered to rank 0 and stored per rank.
void save_training_state(const std::string& dir, Model& model, Strategy& strategy,
                         Optimizer& optimizer, const LossScaler* scaler, const TrainerState& state,
                         const std::vector<torch::Tensor>& best_weights,
                         const NamedTensors& rank_state);

// read_trainer_state and has_training_state: trainer_state.h.
// Before the strategy's setup: the weights, strictly.
void load_model_state(const std::string& dir, Model& model);
// After the optimizer is built: its state, and the loss scaler's. Collective.
void load_optimizer_state(const std::string& dir, Model& model, Strategy& strategy,
                          Optimizer& optimizer, LossScaler* scaler);
// The best validation epoch's weights (parameters then buffers), or nothing when the live ones are.
std::vector<torch::Tensor> load_best_weights(const std::string& dir, Model& model);
// Every rank's tensors of save_training_state's `rank_state`, by rank; empty for an older folder.
std::vector<std::map<std::string, torch::Tensor>> load_rank_states(const std::string& dir);
// Removes the state folder and any half-written one beside it.
void remove_training_state(const std::string& dir);

}  // namespace trainyard
