// Training-state folders: train.save_state writes one after every epoch, train.resume_from reads it
// back. Everything in it is whole and named by the model's parameters, never by ranks or shards, so
// a run can be resumed — or its model evaluated — under any strategy and world size (the studies'
// saving-and-loading example). The layout follows Hugging Face Trainer's checkpoint folders:
//
//   model.safetensors      the weights at the end of the epoch; model.weights loads it on its own
//   optimizer.safetensors  "<parameter>/exp_avg", ... per parameter, and "loss_scaler/scale", ...
//   best.safetensors       with train.checkpoint: best, the best validation epoch's weights when
//                          they are not the live ones
//   trainer_state.json     epochs done, optimizer steps, best epoch and accuracy. Written last, and
//                          every file records its epoch: a half-written folder is never resumed.
#pragma once

#include <string>
#include <vector>

#include <torch/optim/optimizer.h>

#include "components/models/model.h"
#include "components/precision/loss_scaler.h"
#include "components/strategy/strategy.h"

namespace trainyard {

struct TrainerState {
  int64_t epoch = 0;  // epochs completed
  int64_t step = 0;   // optimizer steps taken
  int64_t best_epoch = 0;
  double best_val_acc = -1;
  std::string strategy;  // what wrote it, for the log
  int64_t world_size = 1;
};

// Collective: every rank calls it; rank 0 writes. `best_weights` (model parameters then buffers,
// whole) may be empty.
void save_training_state(const std::string& dir, Model& model, Strategy& strategy,
                         torch::optim::Optimizer& optimizer, const LossScaler* scaler,
                         const TrainerState& state, const std::vector<torch::Tensor>& best_weights);

// Reads trainer_state.json and checks the folder is whole. Throws UserError naming what is wrong.
TrainerState read_trainer_state(const std::string& dir);
// Before the strategy's setup: the weights, strictly.
void load_model_state(const std::string& dir, Model& model);
// After the optimizer is built: its state, and the loss scaler's. Collective.
void load_optimizer_state(const std::string& dir, Model& model, Strategy& strategy,
                          torch::optim::Optimizer& optimizer, LossScaler* scaler);
// The best validation epoch's weights (parameters then buffers), or nothing when the live ones are.
std::vector<torch::Tensor> load_best_weights(const std::string& dir, Model& model);

}  // namespace trainyard
