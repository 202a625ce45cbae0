#include "components/strategy/flat_parameters.h"

#include <c10/core/DeviceGuard.h>

namespace trainyard {

FlatParameters::FlatParameters(std::vector<torch::Tensor> parameters, int rank, int world_size)
    : parameters_(std::move(parameters)), rank_(rank) {
  TORCH_CHECK(!parameters_.empty(), "FlatParameters of no parameters");
  int64_t numel = 0;
  for (const auto& p : parameters_) {
    TORCH_CHECK(p.dtype() == parameters_[0].dtype() && p.device() == parameters_[0].device(),
                "a sharded unit mixes parameter dtypes or devices");
    offsets_.push_back(numel);
    numel += p.numel();
  }
  chunk_numel_ = (numel + world_size - 1) / world_size;
  flat_ = torch::zeros({chunk_numel_ * world_size}, parameters_[0].options().requires_grad(false));
  torch::NoGradGuard no_grad;
  for (size_t i = 0; i < parameters_.size(); ++i) {
    torch::Tensor& p = parameters_[i];
    torch::Tensor view = flat_.narrow(0, offsets_[i], p.numel()).view(p.sizes());
    view.copy_(p);
    p.set_data(view);  // the parameter (and its autograd identity) now lives in flat_
  }
}

std::vector<torch::Tensor> FlatParameters::split(const torch::Tensor& flat_like) const {
  std::vector<torch::Tensor> parts;
  for (size_t i = 0; i < parameters_.size(); ++i)
    parts.push_back(
        flat_like.narrow(0, offsets_[i], parameters_[i].numel()).view(parameters_[i].sizes()));
  return parts;
}

torch::Tensor FlatParameters::join(const std::vector<torch::Tensor>& per_parameter) const {
  torch::Tensor flat = torch::zeros({flat_.numel()}, per_parameter.at(0).options());
  for (size_t i = 0; i < parameters_.size(); ++i)
    flat.narrow(0, offsets_[i], parameters_[i].numel()).copy_(per_parameter.at(i).reshape({-1}));
  return flat;
}

torch::Tensor FlatParameters::take_gradients(c10::ScalarType dtype) {
  torch::Tensor flat = torch::zeros({flat_.numel()}, flat_.options().dtype(dtype));
  torch::NoGradGuard no_grad;
  for (size_t i = 0; i < parameters_.size(); ++i) {
    torch::Tensor& p = parameters_[i];
    if (!p.grad().defined()) continue;
    flat.narrow(0, offsets_[i], p.numel()).copy_(p.grad().reshape({-1}));
    p.mutable_grad() = torch::Tensor();
  }
  return flat;
}

void FlatParameters::release() {
  if (!allocated_) return;
  c10::Storage storage = flat_.storage();
  storage.set_data_ptr_noswap(c10::DataPtr(nullptr, flat_.device()));
  storage.set_nbytes(0);
  allocated_ = false;
}

void FlatParameters::allocate() {
  if (allocated_) return;
  c10::Storage storage = flat_.storage();
  const size_t bytes = static_cast<size_t>(flat_.numel()) * flat_.element_size();
  // The CUDA allocator allocates on the current device, not the storage's: make it the storage's.
  c10::DeviceGuard on_its_device(flat_.device());
  storage.set_data_ptr_noswap(storage.allocator()->allocate(bytes));
  storage.set_nbytes(bytes);
  allocated_ = true;
}

}  // namespace trainyard
