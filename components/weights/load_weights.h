// Loads a safetensors checkpoint into a model: names mapped by the model (torchvision, timm or
// Hugging Face layouts), dtypes converted to the parameter's, shapes checked. Missing, unexpected
// and mis-shaped tensors are listed; with `strict` any of them (besides the classification head) is
// a UserError naming the file and the tensors. A head the checkpoint lacks, or has with another
// shape, is initialised afresh, as fine-tuning on a new label set needs.
#pragma once

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "trainyard/model.h"

namespace trainyard {

struct WeightsReport {
  int64_t loaded = 0;                   // tensors copied into the model
  std::vector<std::string> missing;     // model tensors the checkpoint lacks (head excluded)
  std::vector<std::string> unexpected;  // checkpoint tensors the model lacks
  std::vector<std::string>
      mismatched;  // same name, other shape: "name: checkpoint [..] vs model [..]"
  std::vector<std::string> dropped;  // checkpoint tensors the model declines (pretraining heads)
  bool head_reset = false;           // the classification head was initialised afresh
  std::string summary() const;       // one line for the run's log
};

WeightsReport load_weights(Model& model, const std::string& path, bool strict);
// What load_weights would report and refuse, from the file's header alone: nothing is read into
// the model, nor its head reset (validation, before a run starts).
WeightsReport check_weights(Model& model, const std::string& path, bool strict);

// Writes every parameter and buffer of `model` (its own names, which are torchvision's or Hugging
// Face's, in their dtypes) to a safetensors file that model.weights can load again.
void save_weights(const Model& model, const std::string& path);

// Named tensors to and from a safetensors file (written atomically; read as owned CPU tensors).
using NamedTensors = std::vector<std::pair<std::string, torch::Tensor>>;
void save_tensors(const std::string& path, const NamedTensors& tensors,
                  const std::map<std::string, std::string>& metadata);
std::map<std::string, torch::Tensor> load_tensors(const std::string& path);

}  // namespace trainyard
