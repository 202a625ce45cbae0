// A batch as every model, dataset and the engine see it.
#pragma once

#include <torch/types.h>

// Exported by trainyard-engine to the plugins it loads (the rest of trainyard is hidden).
#pragma GCC visibility push(default)

namespace trainyard {

struct Batch {
  torch::Tensor inputs;          // images [B, C, H, W] float, or token ids [B, T] int64
  torch::Tensor targets;         // class indices [B] int64
  torch::Tensor attention_mask;  // [B, T] for text; undefined for images

  int64_t size() const { return targets.size(0); }

  // Samples [start, start + length): a micro-batch (views, no copy).
  Batch slice(int64_t start, int64_t length) const {
    Batch out;
    out.inputs = inputs.narrow(0, start, length);
    out.targets = targets.narrow(0, start, length);
    if (attention_mask.defined()) out.attention_mask = attention_mask.narrow(0, start, length);
    return out;
  }

  Batch to(const torch::Device& device, bool non_blocking = false) const {
    Batch out;
    out.inputs = inputs.to(device, non_blocking);
    out.targets = targets.to(device, non_blocking);
    if (attention_mask.defined()) out.attention_mask = attention_mask.to(device, non_blocking);
    return out;
  }
};

}  // namespace trainyard
#pragma GCC visibility pop
