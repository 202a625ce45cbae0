// Where a model's tensors go before training: one device, and the precision's parameter dtype.
#pragma once

#include <c10/core/ScalarType.h>
#include <torch/nn/module.h>

namespace trainyard {

// Moves every parameter and buffer of `model` to `device`, and the floating-point ones to
// `param_dtype`, as PyTorch's Module.to(device, dtype) does: integer buffers (BatchNorm's
// num_batches_tracked, a TorchScript model's position ids) keep their type. LibTorch's C++
// Module::to(device, dtype) converts every tensor, so under bf16-true a BatchNorm would count its
// batches in bfloat16 (exact only up to 256) and a model would index with floats. Each tensor is
// copied once, converted on the way; then the model's own to(device) runs (a no-op for what is
// already there) for any tensors it keeps beside its registered ones.
void place_model(torch::nn::Module& model, const torch::Device& device,
                 c10::ScalarType param_dtype);

}  // namespace trainyard
