// The `ddp` strategy: every rank holds the whole model and the same optimizer state; gradients are
// averaged over the ranks so every rank takes the same step. As in PyTorch's DDP, parameters are
// grouped into buckets of about `bucket_mb`, last parameters first (the order backward produces
// their gradients); a hook on each gradient accumulator counts the bucket down, and a full bucket
// is all-reduced at once — while backward is still computing the earlier layers. Buckets are
// launched in a fixed order, so every rank issues the same collectives in the same order.
#include "components/strategy/distributed.h"

#include <fmt/format.h>

namespace trainyard {

namespace {

struct DdpOptions {
  double bucket_mb = 25.0;
  std::string backend = "auto";
  std::string reduce_dtype = "float32";
};

struct Bucket {
  std::vector<size_t> parameters;  // indices into DistributedDataParallel::parameters_
  int64_t numel = 0;
  size_t pending = 0;              // gradients still to come in this backward
  torch::Tensor flat;              // the bucket's gradients in the reduce dtype, while reduced
  c10::intrusive_ptr<c10d::Work> work;
};

class DistributedDataParallel : public DistributedStrategy {
 public:
  DistributedDataParallel(const DdpOptions& o, const StrategyContext& context)
      : DistributedStrategy("ddp", {o.backend, o.reduce_dtype}, context), options_(o) {}

  void setup(Model& model, const torch::Device& device, c10::ScalarType param_dtype) override {
    setup_replicated(model, device, param_dtype);
    parameters_ = model.parameters();
    const auto bucket_bytes = static_cast<int64_t>(options_.bucket_mb * 1024 * 1024);
    const int64_t element = c10::elementSize(reduce_dtype_);
    bucket_of_.resize(parameters_.size());
    for (size_t i = parameters_.size(); i-- > 0;) {
      if (buckets_.empty() || buckets_.back().numel * element >= bucket_bytes) buckets_.emplace_back();
      buckets_.back().parameters.push_back(i);
      buckets_.back().numel += parameters_[i].numel();
      bucket_of_[i] = buckets_.size() - 1;
    }
    hooks_.attach(parameters_, [this](size_t i) { on_gradient_ready(i); });
  }

  void backward(const torch::Tensor& loss, bool sync) override {
    syncing_ = sync;
    next_launch_ = 0;
    for (auto& bucket : buckets_) bucket.pending = bucket.parameters.size();
    loss.backward();
    if (!sync) return;
    // Parameters that took no part in this forward got no gradient: their buckets go now, with zeros.
    for (size_t b = next_launch_; b < buckets_.size(); ++b) buckets_[b].pending = 0;
    launch_ready_buckets();
    for (auto& bucket : buckets_) finish(bucket);
  }

 private:
  void on_gradient_ready(size_t i) {
    if (!syncing_) return;
    Bucket& bucket = buckets_[bucket_of_[i]];
    if (--bucket.pending == 0) launch_ready_buckets();
  }

  // Starts the all-reduce of every complete bucket whose predecessors have started.
  void launch_ready_buckets() {
    while (next_launch_ < buckets_.size() && buckets_[next_launch_].pending == 0) {
      Bucket& bucket = buckets_[next_launch_++];
      std::vector<torch::Tensor> parts;
      for (size_t i : bucket.parameters) {
        const torch::Tensor& p = parameters_[i];
        parts.push_back(p.grad().defined() ? p.grad().reshape({-1}).to(reduce_dtype_)
                                           : torch::zeros({p.numel()}, p.options().dtype(reduce_dtype_)));
      }
      bucket.flat = torch::cat(parts);
      std::vector<torch::Tensor> tensors = {bucket.flat};
      bucket.work = group_->allreduce(tensors);
      count(bucket.flat);
    }
  }

  // Waits for the bucket's all-reduce and writes the average back into the gradients.
  void finish(Bucket& bucket) {
    bucket.work->wait();
    bucket.flat.div_(world_size_);
    int64_t offset = 0;
    torch::NoGradGuard no_grad;
    for (size_t i : bucket.parameters) {
      torch::Tensor& p = parameters_[i];
      torch::Tensor average = bucket.flat.narrow(0, offset, p.numel()).view_as(p);
      if (p.grad().defined()) p.mutable_grad().copy_(average);
      else p.mutable_grad() = average.to(p.dtype());
      offset += p.numel();
    }
    bucket.flat = torch::Tensor();
    bucket.work.reset();
  }

  DdpOptions options_;
  std::vector<torch::Tensor> parameters_;
  std::vector<Bucket> buckets_;
  std::vector<size_t> bucket_of_;  // parameter index -> bucket
  size_t next_launch_ = 0;
  bool syncing_ = true;
  GradientReadyHooks hooks_;
};

}  // namespace

void register_ddp(Registry& registry) {
  OptionSet<DdpOptions> options;
  options.add("bucket_mb", &DdpOptions::bucket_mb, "gradients all-reduced together, in MiB", greater_than(0));
  add_distributed_options(options);
  registry.add<StrategyPtr(const StrategyContext&)>(
      ComponentKind::strategy, "ddp", "data parallel: the whole model on every rank, gradients averaged during backward",
      options, [](const DdpOptions& o, const StrategyContext& context) -> StrategyPtr {
        return std::make_shared<DistributedDataParallel>(o, context);
      });
}

}  // namespace trainyard
