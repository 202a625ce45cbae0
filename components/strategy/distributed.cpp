#include "components/strategy/distributed.h"

#include <torch/csrc/autograd/utils/lambda_post_hook.h>
#include <torch/csrc/autograd/variable.h>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include <chrono>
#include <cstdlib>
#include <map>

#include <fmt/format.h>

#include "components/device/cuda_module.h"
#include "components/strategy/place_model.h"

namespace trainyard {

namespace {

int env_int(const char* name, int fallback) {
  const char* value = std::getenv(name);
  return value ? std::atoi(value) : fallback;
}

c10::ScalarType dtype_named(const std::string& name) {
  if (name == "bfloat16") return c10::ScalarType::BFloat16;
  if (name == "float16") return c10::ScalarType::Half;
  return c10::ScalarType::Float;
}

// The network device Gloo listens on: the interface GLOO_SOCKET_IFNAME names (as in PyTorch); the
// loopback when every rank is on this machine; else the address this host's name resolves to.
std::shared_ptr<::gloo::transport::Device> gloo_device(const std::string& master_address) {
  if (const char* interface = std::getenv("GLOO_SOCKET_IFNAME"))
    return c10d::ProcessGroupGloo::createDeviceForInterface(interface);
  if (master_address == "127.0.0.1" || master_address == "localhost")
    return c10d::ProcessGroupGloo::createDeviceForHostname(master_address);
  return c10d::ProcessGroupGloo::createDefaultDevice();
}

}  // namespace

DistributedStrategy::DistributedStrategy(const std::string& name, const DistributedOptions& options,
                                         const StrategyContext& context)
    : reduce_dtype_(dtype_named(options.reduce_dtype)), device_(context.device) {
  rank_ = env_int("RANK", -1);
  world_size_ = env_int("WORLD_SIZE", -1);
  const char* address = std::getenv("MASTER_ADDR");
  if (rank_ < 0 || world_size_ < 1 || !address || !std::getenv("MASTER_PORT"))
    throw UserError(fmt::format(
        "strategy {}: RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT are not set; "
        "multi-process runs are started by `trainyard run`, which sets them for every rank",
        name));
  backend_name_ = options.backend != "auto"  ? options.backend
                  : context.device.is_cuda() ? "nccl"
                                             : "gloo";
  if (backend_name_ == "nccl" && !context.device.is_cuda())
    throw UserError(
        fmt::format("strategy {}: backend nccl needs CUDA devices; this run trains on the CPU "
                    "(set runtime.strategy.backend: gloo, or auto)",
                    name));

  c10d::TCPStoreOptions store_options;
  store_options.port = static_cast<uint16_t>(env_int("MASTER_PORT", 0));
  store_options.isServer = rank_ == 0;
  store_options.numWorkers = world_size_;
  store_options.waitWorkers = true;
  store_options.timeout = std::chrono::seconds(context.timeout_s);
  auto store = c10::make_intrusive<c10d::TCPStore>(address, store_options);

  if (backend_name_ == "gloo") {
    auto gloo = c10d::ProcessGroupGloo::Options::create();
    gloo->timeout = std::chrono::seconds(context.timeout_s);
    gloo->devices.push_back(gloo_device(address));
    group_ = c10::make_intrusive<c10d::ProcessGroupGloo>(store, rank_, world_size_, gloo);
    return;
  }
  // NCCL lives in libtorch_cuda: reached through the CUDA module (components/device/cuda_module.h).
  std::string not_loaded;
  const CudaModule* cuda = cuda_module(&not_loaded);
  if (!cuda)
    throw UserError(
        fmt::format("strategy {}: backend nccl needs LibTorch's CUDA side: {}", name, not_loaded));
  if (!cuda->has_nccl())
    throw UserError(
        fmt::format("strategy {}: this trainyard was built without NCCL (nccl.h was not found "
                    "beside LibTorch); use backend gloo",
                    name));
  group_ = cuda->nccl_group(store, rank_, world_size_, static_cast<int>(context.device.index()),
                            std::chrono::seconds(context.timeout_s));
}

void DistributedStrategy::setup_replicated(Model& model, const torch::Device& device,
                                           c10::ScalarType param_dtype) {
  place_model(model, device, param_dtype);
  torch::NoGradGuard no_grad;
  for (auto& t : model.parameters()) broadcast(t);
  broadcast_buffers(model);
}

void DistributedStrategy::step(torch::optim::Optimizer& optimizer, const torch::Tensor& found_inf) {
  if (found_inf.defined()) {
    // The loss scaler's decision is the same on every rank: skip if any rank overflowed.
    torch::Tensor flag = found_inf;
    all_reduce_max(flag);
  }
  Strategy::step(optimizer, found_inf);
}

void DistributedStrategy::all_reduce(torch::Tensor& tensor, c10d::ReduceOp op) {
  // NCCL reduces device tensors only: a host figure (a sample count, a peak) travels through the
  // device.
  std::vector<torch::Tensor> t = {tensor.device() == device_ ? tensor : tensor.to(device_)};
  group_->allreduce(t, c10d::AllreduceOptions{op})->wait();
  if (!t[0].is_same(tensor)) tensor.copy_(t[0]);
}

void DistributedStrategy::all_reduce_sum(torch::Tensor& tensor) {
  all_reduce(tensor, c10d::ReduceOp::SUM);
}

void DistributedStrategy::all_reduce_max(torch::Tensor& tensor) {
  all_reduce(tensor, c10d::ReduceOp::MAX);
}

void DistributedStrategy::broadcast(torch::Tensor& tensor) {
  std::vector<torch::Tensor> t = {tensor};
  group_->broadcast(t)->wait();
}

void DistributedStrategy::before_evaluation(Model& model) { broadcast_buffers(model); }

void DistributedStrategy::synchronize_gradients() {
  throw std::logic_error(
      "this strategy cannot synchronise gradients after micro-batches run apart "
      "(train.micro_batch_size: auto); validation should have refused it");
}

void DistributedStrategy::broadcast_buffers(Model& model) {
  if (model.buffers().empty()) return;
  std::map<c10::ScalarType, std::vector<torch::Tensor>> by_dtype;
  for (auto& t : model.buffers()) by_dtype[t.scalar_type()].push_back(t);
  torch::NoGradGuard no_grad;
  for (auto& [dtype, buffers] : by_dtype) {
    std::vector<torch::Tensor> flat;
    for (const auto& b : buffers) flat.push_back(b.reshape({-1}));
    torch::Tensor all = torch::cat(flat);
    broadcast(all);
    int64_t offset = 0;
    for (auto& b : buffers) {
      b.copy_(all.narrow(0, offset, b.numel()).view_as(b));
      offset += b.numel();
    }
  }
}

void DistributedStrategy::launch_reduce_scatter(GradientReduction& reduction,
                                                torch::Tensor flat_gradients, int64_t chunk_numel) {
  // Divided before the sum, as PyTorch's allreduce_hook does: in a 16-bit reduce dtype a sum of
  // loss-scaled gradients over the ranks could overflow where their average does not.
  reduction.gradients = std::move(flat_gradients).div_(world_size_);
  reduction.chunk = torch::empty({chunk_numel}, reduction.gradients.options());
  reduction.work = group_->_reduce_scatter_base(reduction.chunk, reduction.gradients);
  count(reduction.gradients);
}

torch::Tensor DistributedStrategy::finish_reduce_scatter(GradientReduction& reduction,
                                                         c10::ScalarType dtype) {
  reduction.work->wait();
  torch::Tensor average = reduction.chunk.to(dtype);
  reduction = GradientReduction();
  return average;
}

std::vector<torch::Tensor> DistributedStrategy::chunks_to_model_layout(
    Model& model, const std::vector<FlatParameters*>& groups,
    const std::vector<torch::Tensor>& chunks) {
  std::map<c10::TensorImpl*, torch::Tensor> whole;
  for (size_t g = 0; g < groups.size(); ++g) {
    const auto& parameters = groups[g]->parameters();
    std::vector<torch::Tensor> parts;
    if (chunks[g].dim() == 0) {
      parts.assign(parameters.size(), chunks[g]);  // a scalar of the chunk holds for each parameter
    } else {
      torch::Tensor sent = chunks[g].contiguous();
      torch::Tensor flat = torch::empty({sent.numel() * world_size_}, sent.options());
      group_->_allgather_base(flat, sent)->wait();
      parts = groups[g]->split(flat);
    }
    for (size_t i = 0; i < parameters.size(); ++i)
      whole[parameters[i].unsafeGetTensorImpl()] = parts[i];
  }
  std::vector<torch::Tensor> out;
  for (const auto& p : model.parameters()) out.push_back(whole.at(p.unsafeGetTensorImpl()));
  return out;
}

std::vector<torch::Tensor> DistributedStrategy::model_layout_to_chunks(
    Model& model, const std::vector<FlatParameters*>& groups,
    const std::vector<torch::Tensor>& model_layout) {
  std::map<c10::TensorImpl*, torch::Tensor> by_parameter;
  const auto parameters = model.parameters();
  for (size_t i = 0; i < parameters.size(); ++i)
    by_parameter[parameters[i].unsafeGetTensorImpl()] = model_layout.at(i);
  std::vector<torch::Tensor> chunks;
  for (FlatParameters* group : groups) {
    std::vector<torch::Tensor> parts;
    for (const auto& p : group->parameters())
      parts.push_back(by_parameter.at(p.unsafeGetTensorImpl()));
    if (parts[0].dim() == 0)
      chunks.push_back(parts[0].clone());
    else
      chunks.push_back(group->chunk(group->join(parts)).clone());
  }
  return chunks;
}

std::vector<std::vector<size_t>> bucket_parameters(const std::vector<torch::Tensor>& parameters,
                                                   int64_t bucket_bytes, int64_t element_size) {
  std::vector<std::vector<size_t>> buckets;
  int64_t bytes = bucket_bytes;  // the first parameter opens a bucket
  for (size_t i = parameters.size(); i-- > 0;) {
    if (bytes >= bucket_bytes) {
      buckets.emplace_back();
      bytes = 0;
    }
    buckets.back().push_back(i);
    bytes += parameters[i].numel() * element_size;
  }
  return buckets;
}

void GradientBuckets::attach(const std::vector<torch::Tensor>& parameters,
                             std::vector<std::vector<size_t>> buckets, Launch launch) {
  buckets_ = std::move(buckets);
  launch_ = std::move(launch);
  bucket_of_.assign(parameters.size(), 0);
  for (size_t b = 0; b < buckets_.size(); ++b)
    for (size_t i : buckets_[b]) bucket_of_[i] = b;
  pending_.assign(buckets_.size(), 0);
  hooks_.attach(parameters, [this](size_t i) {
    if (syncing_ && --pending_[bucket_of_[i]] == 0) launch_ready();
  });
}

void GradientBuckets::backward(const torch::Tensor& loss, bool sync) {
  syncing_ = sync;
  next_launch_ = 0;
  for (size_t b = 0; b < buckets_.size(); ++b) pending_[b] = buckets_[b].size();
  loss.backward();
  if (!sync) return;
  for (size_t b = next_launch_; b < buckets_.size(); ++b) pending_[b] = 0;  // unused parameters
  launch_ready();
}

void GradientBuckets::launch_ready() {
  while (next_launch_ < buckets_.size() && pending_[next_launch_] == 0) launch_(next_launch_++);
}

void GradientReadyHooks::attach(const std::vector<torch::Tensor>& parameters,
                                std::function<void(size_t)> ready) {
  auto shared_ready = std::make_shared<std::function<void(size_t)>>(std::move(ready));
  for (size_t i = 0; i < parameters.size(); ++i) {
    auto accumulator = torch::autograd::impl::grad_accumulator(parameters[i]);
    TORCH_CHECK(accumulator, "parameter ", i, " does not require a gradient");
    accumulator->add_post_hook(std::make_unique<torch::autograd::utils::LambdaPostHook>(
        [shared_ready, i](const torch::autograd::variable_list& outputs,
                          const torch::autograd::variable_list&) {
          (*shared_ready)(i);
          return outputs;
        }));
    accumulators_.push_back(std::move(accumulator));
  }
}

}  // namespace trainyard
