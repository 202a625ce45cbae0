// The `ddp` strategy: every rank holds the whole model; after backward, gradients are averaged over
// the ranks with all-reduce in buckets of about `bucket_mb` (reduced in float32), so every rank takes
// the same optimizer step. Ranks find each other through c10d's TCPStore at MASTER_ADDR:MASTER_PORT
// (the launcher's torchrun contract) and talk over Gloo on CPU.
//
// Not yet: overlapping the all-reduce with backward (gradient-accumulator hooks) and NCCL on CUDA;
// here the buckets are reduced after backward returns.
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>
#include <torch/nn/utils/clip_grad.h>

#include <chrono>
#include <cstdlib>

#include <fmt/format.h>

#include "components/strategy/strategy.h"

namespace trainyard {

namespace {

int env_int(const char* name, int fallback) {
  const char* value = std::getenv(name);
  return value ? std::atoi(value) : fallback;
}

struct DdpOptions {
  double bucket_mb = 25.0;
};

class DistributedDataParallel : public Strategy {
 public:
  DistributedDataParallel(const DdpOptions& options, int64_t timeout_s) : options_(options) {
    rank_ = env_int("RANK", -1);
    world_size_ = env_int("WORLD_SIZE", -1);
    const char* address = std::getenv("MASTER_ADDR");
    if (rank_ < 0 || world_size_ < 1 || !address || !std::getenv("MASTER_PORT"))
      throw UserError("strategy ddp: RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT are not set; ddp runs are "
                      "started by `trainyard run`, which sets them for every rank");
    c10d::TCPStoreOptions store_options;
    store_options.port = static_cast<uint16_t>(env_int("MASTER_PORT", 0));
    store_options.isServer = rank_ == 0;
    store_options.numWorkers = world_size_;
    store_options.waitWorkers = true;
    store_options.timeout = std::chrono::seconds(timeout_s);
    auto store = c10::make_intrusive<c10d::TCPStore>(address, store_options);
    auto gloo = c10d::ProcessGroupGloo::Options::create();
    gloo->timeout = std::chrono::seconds(timeout_s);
    gloo->devices.push_back(c10d::ProcessGroupGloo::createDeviceForHostname(address));
    group_ = c10::make_intrusive<c10d::ProcessGroupGloo>(store, rank_, world_size_, gloo);
  }

  void setup(Model& model, const torch::Device& device, c10::ScalarType param_dtype) override {
    TORCH_CHECK(device.is_cpu(), "strategy ddp runs on CPU (Gloo) in this build; NCCL on CUDA is not built yet");
    model.to(device, param_dtype);
    // Every rank starts from rank 0's weights.
    torch::NoGradGuard no_grad;
    for (auto& t : model.parameters()) broadcast(t);
    for (auto& t : model.buffers()) broadcast(t);
    parameters_ = model.parameters();
  }

  void backward(const torch::Tensor& loss) override {
    loss.backward();
    // Average gradients in buckets, last parameters first (the order backward produces them).
    const size_t bucket_bytes = static_cast<size_t>(options_.bucket_mb * 1024 * 1024);
    std::vector<torch::Tensor> bucket;
    size_t bytes = 0;
    for (auto it = parameters_.rbegin(); it != parameters_.rend(); ++it) {
      if (!it->grad().defined()) continue;
      bucket.push_back(it->grad());
      bytes += static_cast<size_t>(it->grad().numel()) * 4;
      if (bytes >= bucket_bytes) {
        reduce_bucket(bucket);
        bucket.clear();
        bytes = 0;
      }
    }
    if (!bucket.empty()) reduce_bucket(bucket);
  }

  double clip_grad_norm(Model& model, double max_norm) override {
    return torch::nn::utils::clip_grad_norm_(model.parameters(), max_norm);  // gradients agree on every rank
  }

  void step(torch::optim::Optimizer& optimizer, const torch::Tensor& found_inf) override {
    if (found_inf.defined()) {
      // The loss scaler's decision is the same on every rank: skip if any rank overflowed.
      std::vector<torch::Tensor> flag = {found_inf};
      group_->allreduce(flag, c10d::AllreduceOptions{c10d::ReduceOp::MAX})->wait();
    }
    step_unless_overflowed(optimizer, found_inf);
  }

  void all_reduce_sum(torch::Tensor& tensor) override {
    std::vector<torch::Tensor> t = {tensor};
    group_->allreduce(t)->wait();
  }

  void all_reduce_max(torch::Tensor& tensor) override {
    std::vector<torch::Tensor> t = {tensor};
    group_->allreduce(t, c10d::AllreduceOptions{c10d::ReduceOp::MAX})->wait();
  }

  int world_size() const override { return world_size_; }
  int rank() const override { return rank_; }

 private:
  void broadcast(torch::Tensor& tensor) {
    std::vector<torch::Tensor> t = {tensor};
    group_->broadcast(t)->wait();
  }

  void reduce_bucket(const std::vector<torch::Tensor>& gradients) {
    std::vector<torch::Tensor> flat_parts;
    for (const auto& g : gradients) flat_parts.push_back(g.reshape({-1}).to(torch::kFloat));
    std::vector<torch::Tensor> flat = {torch::cat(flat_parts)};
    group_->allreduce(flat)->wait();
    flat[0].div_(world_size_);
    int64_t offset = 0;
    for (const auto& g : gradients) {
      g.copy_(flat[0].narrow(0, offset, g.numel()).view_as(g));
      offset += g.numel();
    }
  }

  DdpOptions options_;
  int rank_ = 0, world_size_ = 1;
  c10::intrusive_ptr<c10d::ProcessGroupGloo> group_;
  std::vector<torch::Tensor> parameters_;
};

}  // namespace

void register_ddp(Registry& registry) {
  OptionSet<DdpOptions> options;
  options.add("bucket_mb", &DdpOptions::bucket_mb, "gradients reduced together, in MiB", greater_than(0));
  registry.add<StrategyPtr(const StrategyContext&)>(
      ComponentKind::strategy, "ddp", "data parallel: the whole model on every rank, gradients averaged (Gloo on CPU)",
      options, [](const DdpOptions& o, const StrategyContext& context) -> StrategyPtr {
        return std::make_shared<DistributedDataParallel>(o, context.timeout_s);
      });
}

}  // namespace trainyard
