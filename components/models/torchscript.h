// A network defined in Python and scripted: `torch.jit.save(torch.jit.script(model), "net.pt")`,
// loaded with torch::jit::load and trained like a built-in model. The module's parameters and
// buffers become the Model's own (the same tensors, under the module's own dotted names), so every
// precision, strategy, checkpoint and weights file treats them as it treats a built-in model's.
// Its forward takes images [B, 3, H, W] (`input: images`) or (input_ids [B, T], attention_mask
// [B, T]) (`input: tokens`) and returns logits [B, num_classes].
//
// Validation loads the archive without starting a worker (describe_torchscript): it must be a
// TorchScript archive whose forward has that signature, that answers a trial batch with logits of
// the right width, and whose train/eval behaviour was not frozen by torch.jit.trace.
#pragma once

#include <string>

#include "trainyard/model.h"

namespace trainyard {

struct TorchScriptOptions {
  std::string file;
  std::string input = "images";  // images | tokens
  int64_t image_size = 224;      // images: the resolution the dataset resizes to
  int64_t max_positions = 512;   // tokens: the longest sequence the module reads
  int64_t num_classes = 0;       // 0: whatever the module returns (found by a trial forward)
};

void register_torchscript(Registry& registry);

}  // namespace trainyard
