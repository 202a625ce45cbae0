// The `zero2` strategy, DeepSpeed's ZeRO stage 2: parameters are replicated as in ddp, but each
// rank keeps only 1/N of the gradients and of the optimizer state. Parameters are grouped into
// buckets of about `bucket_mb`, each laid out flat and split into N chunks; when backward has
// produced a bucket's gradients they are reduce-scattered (while backward goes on), so each rank
// receives the average of its chunk only and the full gradients are released. Each rank's optimizer
// updates its chunks in place, and an all-gather brings every rank the others' updated chunks.
#include <fmt/format.h>

#include "components/strategy/distributed.h"
#include "components/strategy/flat_parameters.h"
#include "trainyard/optimizers.h"

namespace trainyard {

namespace {

struct Zero2Options {
  double bucket_mb = 25.0;
  std::string backend = "auto";
  std::string reduce_dtype = "float32";
};

struct Bucket {
  std::unique_ptr<FlatParameters> flat;
  torch::Tensor chunk;  // this rank's chunk of the flat parameters: what the optimizer updates
  GradientReduction reduction;
};

class ZeroStage2 : public DistributedStrategy {
 public:
  ZeroStage2(const Zero2Options& o, const StrategyContext& context)
      : DistributedStrategy("zero2", {o.backend, o.reduce_dtype}, context), options_(o) {}

  void setup(Model& model, const torch::Device& device, c10::ScalarType param_dtype) override {
    setup_replicated(model, device, param_dtype);
    std::vector<torch::Tensor> parameters = model.parameters();
    const auto bucket_bytes = static_cast<int64_t>(options_.bucket_mb * 1024 * 1024);
    std::vector<std::vector<size_t>> indices =
        bucket_parameters(parameters, bucket_bytes, c10::elementSize(reduce_dtype_));
    for (const auto& bucket_indices : indices) {
      std::vector<torch::Tensor> group;
      for (size_t i : bucket_indices) group.push_back(parameters[i]);
      Bucket bucket;
      bucket.flat = std::make_unique<FlatParameters>(group, rank_, world_size_);
      bucket.chunk = bucket.flat->chunk(bucket.flat->flat());
      buckets_.push_back(std::move(bucket));
    }
    // Once a bucket's gradients are in, they are reduce-scattered and the full ones released.
    gradient_buckets_.attach(parameters, indices, [this](size_t b) { reduce_scatter(b); });
  }

  std::vector<torch::Tensor> optimizer_parameters(Model&) override {
    std::vector<torch::Tensor> chunks;
    for (const auto& bucket : buckets_) chunks.push_back(bucket.chunk);
    return chunks;
  }

  void backward(const torch::Tensor& loss, bool sync) override {
    gradient_buckets_.backward(loss, sync);
    if (sync) finish_reductions();
  }

  // Each bucket reduce-scattered and finished before the next: the same collectives in the same
  // order, with one bucket's flat gradients in memory at a time.
  void synchronize_gradients() override {
    for (size_t b = 0; b < buckets_.size(); ++b) {
      reduce_scatter(b);
      Bucket& bucket = buckets_[b];
      bucket.chunk.mutable_grad() =
          finish_reduce_scatter(bucket.reduction, bucket.chunk.scalar_type());
    }
  }

  bool shards_gradients() const override { return true; }

  void step(torch::optim::Optimizer& optimizer, const torch::Tensor& found_inf) override {
    DistributedStrategy::step(optimizer, found_inf);
    // Every rank updated its own chunks; bring everyone the rest.
    std::vector<c10::intrusive_ptr<c10d::Work>> works;
    std::vector<torch::Tensor> sent;
    for (auto& bucket : buckets_) {
      sent.push_back(bucket.chunk.clone());
      works.push_back(group_->_allgather_base(bucket.flat->flat(), sent.back()));
      count(bucket.flat->flat());
    }
    for (auto& work : works) work->wait();
  }

  std::vector<torch::Tensor> to_model_layout(Model& model,
                                             const std::vector<torch::Tensor>& chunks) override {
    return chunks_to_model_layout(model, groups(), chunks);
  }
  std::vector<torch::Tensor> to_optimizer_layout(Model& model,
                                                 const std::vector<torch::Tensor>& whole) override {
    return model_layout_to_chunks(model, groups(), whole);
  }

  TrainingStateBytes state_bytes(Model& model, const Optimizer& optimizer) const override {
    std::vector<torch::Tensor> chunks;
    for (const auto& bucket : buckets_) chunks.push_back(bucket.chunk);
    return {tensor_bytes(model.parameters()), tensor_bytes(chunks), optimizer.state_bytes()};
  }

 private:
  // Starts bucket b's reduce-scatter; its full gradients are released.
  void reduce_scatter(size_t b) {
    Bucket& bucket = buckets_[b];
    launch_reduce_scatter(bucket.reduction, bucket.flat->take_gradients(reduce_dtype_),
                          bucket.flat->chunk_numel());
  }

  // Waits for every bucket's reduce-scatter: this rank's chunk of the averaged gradients.
  void finish_reductions() {
    for (auto& bucket : buckets_)
      bucket.chunk.mutable_grad() =
          finish_reduce_scatter(bucket.reduction, bucket.chunk.scalar_type());
  }

  // The flat groups whose chunks are optimizer_parameters(), in that order.
  std::vector<FlatParameters*> groups() {
    std::vector<FlatParameters*> out;
    for (auto& bucket : buckets_) out.push_back(bucket.flat.get());
    return out;
  }

  Zero2Options options_;
  std::vector<Bucket> buckets_;
  GradientBuckets gradient_buckets_;
};

}  // namespace

void register_zero2(Registry& registry) {
  OptionSet<Zero2Options> options;
  options.add("bucket_mb", &Zero2Options::bucket_mb, "gradients reduce-scattered together, in MiB",
              greater_than(0));
  add_distributed_options(options);
  registry.add<StrategyPtr(const StrategyContext&)>(
      ComponentKind::strategy, "zero2",
      "ZeRO stage 2 (DeepSpeed): parameters replicated; gradients and optimizer state sharded "
      "across ranks",
      options,
      [](const Zero2Options& o, const StrategyContext& context) -> StrategyPtr {
        return std::make_shared<ZeroStage2>(o, context);
      },
      [](const auto&) {
        return StrategyCapabilities{
            .multi_process = true, .agrees_on_micro_batch = true, .shards_gradients = true};
      });
}

}  // namespace trainyard
