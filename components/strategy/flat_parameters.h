// Whole parameters laid back to back in one flat tensor, padded to a multiple of the world size so
// that rank r owns the r-th of N equal chunks. The sharding strategies are built on it: zero2 keeps
// the flat tensor and lets the optimizer update this rank's chunk of it; fsdp frees the flat
// tensor between uses and keeps only a copy of the chunk.
#pragma once

#include <vector>

#include <torch/types.h>

namespace trainyard {

class FlatParameters {
 public:
  // `parameters` must share one dtype and device; they are re-pointed into the flat tensor, their
  // values kept.
  FlatParameters(std::vector<torch::Tensor> parameters, int rank, int world_size);

  const std::vector<torch::Tensor>& parameters() const { return parameters_; }
  torch::Tensor& flat() { return flat_; }
  int64_t chunk_numel() const { return chunk_numel_; }
  // This rank's chunk of `flat_like` (a tensor laid out as the flat one).
  torch::Tensor chunk(const torch::Tensor& flat_like) const {
    return flat_like.narrow(0, rank_ * chunk_numel_, chunk_numel_);
  }

  // `flat_like` cut into one view per parameter, shaped like it; and the reverse, padded with
  // zeros.
  std::vector<torch::Tensor> split(const torch::Tensor& flat_like) const;
  torch::Tensor join(const std::vector<torch::Tensor>& per_parameter) const;

  // The parameters' gradients as one flat tensor of `dtype` (zeros where a parameter has none, and
  // in the padding); the parameters' own gradients are released.
  torch::Tensor take_gradients(c10::ScalarType dtype);

  // Releases the flat tensor's memory: the parameters keep their shapes but hold no data until
  // allocate(). Tensors autograd saved from them share that memory, so a backward sees the
  // values gathered back into it.
  void release();
  void allocate();
  bool allocated() const { return allocated_; }

 private:
  std::vector<torch::Tensor> parameters_;
  std::vector<int64_t> offsets_;
  int64_t chunk_numel_ = 0;
  int rank_ = 0;
  torch::Tensor flat_;
  bool allocated_ = true;
};

}  // namespace trainyard
