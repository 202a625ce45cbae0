// What the multi-process strategies (ddp, zero2, fsdp) share: joining the ranks of the run into a
// c10d process group, the collectives the engine needs, the loss scaler's agreed skip decision,
// and the options every one of them takes (backend, reduce_dtype).
#pragma once

#include <torch/csrc/distributed/c10d/Backend.hpp>

#include "components/strategy/flat_parameters.h"
#include "components/strategy/strategy.h"

namespace trainyard {

// Options shared by every multi-process strategy; each strategy's option struct has these fields.
struct DistributedOptions {
  std::string backend = "auto";          // gloo, nccl, or auto: nccl on CUDA, gloo on CPU
  std::string reduce_dtype = "float32";  // gradients are averaged in: float32, bfloat16, float16
};

template <class Opts>
void add_distributed_options(OptionSet<Opts>& options) {
  options
      .add("backend", &Opts::backend,
           "collectives library: gloo (CPU), nccl (CUDA), or auto (by device)",
           one_of({"auto", "gloo", "nccl"}))
      .add("reduce_dtype", &Opts::reduce_dtype, "dtype gradients are averaged in across ranks",
           one_of({"float32", "bfloat16", "float16"}));
}

// A reduce-scatter of flat gradients: launched during backward, finished after it.
struct GradientReduction {
  torch::Tensor gradients;  // the flat gradients, kept alive while the collective reads them
  torch::Tensor chunk;      // this rank's chunk of their sum
  c10::intrusive_ptr<c10d::Work> work;
};

class DistributedStrategy : public Strategy {
 public:
  // Joins the ranks named by the launcher's environment (RANK, WORLD_SIZE, MASTER_ADDR,
  // MASTER_PORT) through c10d's TCPStore; `name` is the strategy's, for messages.
  DistributedStrategy(const std::string& name, const DistributedOptions& options,
                      const StrategyContext& context);

  void step(torch::optim::Optimizer& optimizer, const torch::Tensor& found_inf) override;
  void all_reduce_sum(torch::Tensor& tensor) override;
  void all_reduce_max(torch::Tensor& tensor) override;
  int world_size() const override { return world_size_; }
  double communicated_bytes() const override { return communicated_bytes_; }
  c10::ScalarType reduce_dtype() const override { return reduce_dtype_; }
  int rank() const override { return rank_; }
  void before_evaluation(Model& model) override;
  // Refused unless the strategy overrides it (ddp and zero2 do; fsdp's forwards gather, so its
  // ranks cannot run micro-batches apart): validation refuses auto where it is missing.
  void synchronize_gradients() override;

 protected:
  // Moves the model to the device and gives every rank rank 0's parameters and buffers.
  void setup_replicated(Model& model, const torch::Device& device, c10::ScalarType param_dtype);
  void broadcast(torch::Tensor& tensor);
  // Gives every rank rank 0's buffers (BatchNorm's running statistics), one broadcast per dtype,
  // as PyTorch's DDP does before each training forward (broadcast_buffers).
  void broadcast_buffers(Model& model);
  void all_reduce(torch::Tensor& tensor, c10d::ReduceOp op);

  // to_model_layout / to_optimizer_layout for strategies whose optimizer updates one chunk of each
  // of `groups` (in optimizer_parameters() order).
  std::vector<torch::Tensor> chunks_to_model_layout(Model& model,
                                                    const std::vector<FlatParameters*>& groups,
                                                    const std::vector<torch::Tensor>& chunks);
  std::vector<torch::Tensor> model_layout_to_chunks(Model& model,
                                                    const std::vector<FlatParameters*>& groups,
                                                    const std::vector<torch::Tensor>& model_layout);

  // Starts averaging `flat_gradients` across ranks (divided by their number, then summed) into
  // this rank's chunk (zero2 and fsdp).
  void launch_reduce_scatter(GradientReduction& reduction, torch::Tensor flat_gradients,
                             int64_t chunk_numel);
  // Waits for it; returns this rank's chunk of the average, in `dtype`.
  torch::Tensor finish_reduce_scatter(GradientReduction& reduction, c10::ScalarType dtype);

  // Counts a gradient or parameter collective on `buffer` (the whole buffer, not this rank's
  // chunk).
  void count(const torch::Tensor& buffer) {
    communicated_bytes_ += static_cast<double>(buffer.nbytes());
  }

  c10::intrusive_ptr<c10d::Backend> group_;
  double communicated_bytes_ = 0;
  int rank_ = 0, world_size_ = 1;
  c10::ScalarType reduce_dtype_ = c10::ScalarType::Float;
  torch::Device device_{torch::kCPU};  // where this rank's collectives run (NCCL: its GPU)
  std::string backend_name_;
};

// Collects the gradient accumulators of `parameters` and calls `ready(i)` after the gradient of
// parameters[i] has been accumulated in a backward pass (DDP's Reducer hooks the same way).
class GradientReadyHooks {
 public:
  void attach(const std::vector<torch::Tensor>& parameters, std::function<void(size_t)> ready);

 private:
  std::vector<std::shared_ptr<torch::autograd::Node>>
      accumulators_;  // the tensors hold them weakly
};

// Indices of `parameters` in buckets of about `bucket_bytes` (each element counted as
// `element_size` bytes), last parameters first: the order backward produces their gradients.
std::vector<std::vector<size_t>> bucket_parameters(const std::vector<torch::Tensor>& parameters,
                                                   int64_t bucket_bytes, int64_t element_size);

// The bucketed gradient reduction of ddp and zero2. In a backward that synchronises, bucket b goes
// to `launch` as soon as all its gradients are in and buckets 0..b-1 have gone — the same
// collectives in the same order on every rank, while backward still computes the earlier layers.
// Buckets whose parameters got no gradient (unused in this forward) go when backward returns.
class GradientBuckets {
 public:
  using Launch = std::function<void(size_t bucket)>;
  void attach(const std::vector<torch::Tensor>& parameters,
              std::vector<std::vector<size_t>> buckets, Launch launch);
  // loss.backward(); with `sync`, every bucket has been launched when it returns.
  void backward(const torch::Tensor& loss, bool sync);

 private:
  void launch_ready();

  std::vector<std::vector<size_t>> buckets_;
  std::vector<size_t> bucket_of_;  // parameter index -> bucket
  std::vector<size_t> pending_;    // per bucket: gradients still to come in this backward
  size_t next_launch_ = 0;
  bool syncing_ = false;
  Launch launch_;
  GradientReadyHooks hooks_;
};

}  // namespace trainyard
