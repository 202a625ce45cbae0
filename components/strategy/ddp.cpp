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
  bool broadcast_buffers = true;
};

class DistributedDataParallel : public DistributedStrategy {
 public:
  DistributedDataParallel(const DdpOptions& o, const StrategyContext& context)
      : DistributedStrategy("ddp", {o.backend, o.reduce_dtype}, context), options_(o) {}

  void setup(Model& model, const torch::Device& device, c10::ScalarType param_dtype) override {
    setup_replicated(model, device, param_dtype);
    parameters_ = model.parameters();
    has_buffers_ = !model.buffers().empty();
    const auto bucket_bytes = static_cast<int64_t>(options_.bucket_mb * 1024 * 1024);
    buckets_ = bucket_parameters(parameters_, bucket_bytes, c10::elementSize(reduce_dtype_));
    in_flight_.resize(buckets_.size());
    gradient_buckets_.attach(parameters_, buckets_, [this](size_t b) { launch(b); });
  }

  // Rank 0's buffers before each training forward, as PyTorch's DDP (broadcast_buffers): each rank
  // then updates BatchNorm's running statistics from rank 0's and its own share of the batch.
  // (Before an evaluation every strategy gives every rank rank 0's: before_evaluation.)
  torch::Tensor forward(Model& model, const Batch& batch) override {
    if (options_.broadcast_buffers && has_buffers_ && model.is_training()) {
      try {
        broadcast_buffers(model);
      } catch (const std::exception& e) {
        throw CollectiveError(std::string("ddp: giving every rank rank 0's buffers failed: ") +
                              e.what());
      }
    }
    return model.forward(batch);
  }

  void backward(const torch::Tensor& loss, bool sync) override {
    gradient_buckets_.backward(loss, sync);
    if (sync) finish_all();
  }

  // Each bucket finished before the next is launched: the same collectives in the same order,
  // with one bucket's copy in memory at a time (nothing overlaps after the backwards anyway).
  void synchronize_gradients() override {
    for (size_t b = 0; b < buckets_.size(); ++b) {
      launch(b);
      finish(b);
    }
  }

 private:
  // A bucket's gradients in the reduce dtype, while they are all-reduced.
  struct InFlight {
    torch::Tensor flat;
    c10::intrusive_ptr<c10d::Work> work;
  };

  // Starts the all-reduce of bucket b (a parameter without a gradient contributes zeros).
  void launch(size_t b) {
    std::vector<torch::Tensor> parts;
    for (size_t i : buckets_[b]) {
      const torch::Tensor& p = parameters_[i];
      parts.push_back(p.grad().defined()
                          ? p.grad().reshape({-1}).to(reduce_dtype_)
                          : torch::zeros({p.numel()}, p.options().dtype(reduce_dtype_)));
    }
    InFlight& bucket = in_flight_[b];
    // Divided before the sum, as PyTorch's allreduce_hook does: in a 16-bit reduce dtype a sum of
    // loss-scaled gradients over the ranks could overflow where their average does not.
    bucket.flat = torch::cat(parts).div_(world_size_);
    std::vector<torch::Tensor> tensors = {bucket.flat};
    bucket.work = group_->allreduce(tensors);
    count(bucket.flat);
  }

  void finish_all() {
    for (size_t b = 0; b < buckets_.size(); ++b) finish(b);
  }

  // Waits for bucket b's all-reduce (of gradients divided by the ranks: their average) and writes
  // it back into the gradients.
  void finish(size_t b) {
    InFlight& bucket = in_flight_[b];
    bucket.work->wait();
    int64_t offset = 0;
    torch::NoGradGuard no_grad;
    for (size_t i : buckets_[b]) {
      torch::Tensor& p = parameters_[i];
      torch::Tensor average = bucket.flat.narrow(0, offset, p.numel()).view_as(p);
      if (p.grad().defined())
        p.mutable_grad().copy_(average);
      else
        p.mutable_grad() = average.to(p.dtype());
      offset += p.numel();
    }
    bucket = InFlight();
  }

  DdpOptions options_;
  std::vector<torch::Tensor> parameters_;
  bool has_buffers_ = false;
  std::vector<std::vector<size_t>> buckets_;  // parameter indices
  std::vector<InFlight> in_flight_;           // per bucket
  GradientBuckets gradient_buckets_;
};

}  // namespace

void register_ddp(Registry& registry) {
  OptionSet<DdpOptions> options;
  options
      .add("bucket_mb", &DdpOptions::bucket_mb, "gradients all-reduced together, in MiB",
           greater_than(0))
      .add("broadcast_buffers", &DdpOptions::broadcast_buffers,
           "give every rank rank 0's buffers (BatchNorm statistics) before each training forward");
  add_distributed_options(options);
  registry.add<StrategyPtr(const StrategyContext&)>(
      ComponentKind::strategy, "ddp",
      "data parallel: the whole model on every rank, gradients averaged during backward", options,
      [](const DdpOptions& o, const StrategyContext& context) -> StrategyPtr {
        return std::make_shared<DistributedDataParallel>(o, context);
      },
      [](const auto&) {
        return StrategyCapabilities{.multi_process = true, .agrees_on_micro_batch = true};
      });
}

}  // namespace trainyard
