// The `fsdp` strategy, PyTorch FSDP's full shard: each rank keeps 1/N of the parameters, of the
// gradients and of the optimizer state. The model's blocks (Model::blocks()) are the units of
// sharding, and everything outside them is one more, the root unit:
//
//   forward   the root is gathered for the step; each block is all-gathered before its forward
//             (BlockHooks) and, with reshard_after_forward, freed right after. The next block's
//             all-gather starts as a block begins computing, so it arrives while that block runs;
//   backward  a hook on the block's output gathers it again before its backward (and starts the
//             previous block's gather); once backward has produced all of a unit's gradients they
//             are reduce-scattered (while backward goes on), the full gradients and parameters
//             freed;
//   step      each rank's optimizer updates its own chunks.
//
// Freed parameters keep their shapes but hold no memory (FlatParameters::release()); the tensors
// autograd saved from them share that memory and see the values gathered back before backward.
#include <fmt/format.h>

#include <torch/csrc/autograd/grad_mode.h>

#include "components/strategy/distributed.h"
#include "components/strategy/flat_parameters.h"
#include "trainyard/optimizers.h"

namespace trainyard {

namespace {

struct FsdpOptions {
  bool reshard_after_forward = true;
  std::string backend = "auto";
  std::string reduce_dtype = "float32";
};

struct Unit {
  std::unique_ptr<FlatParameters> flat;  // the whole parameters, allocated only while gathered
  torch::Tensor shard;   // this rank's chunk, its own memory: what the optimizer updates
  size_t pending = 0;    // gradients still to come in this backward
  bool reduced = false;  // this backward's gradients are on their way
  c10::intrusive_ptr<c10d::Work> gathering;  // an all-gather into flat still in flight (prefetch)
  GradientReduction reduction;               // of this backward's gradients
};

class FullyShardedDataParallel : public DistributedStrategy, public BlockHooks {
 public:
  FullyShardedDataParallel(const FsdpOptions& o, const StrategyContext& context)
      : DistributedStrategy("fsdp", {o.backend, o.reduce_dtype}, context), options_(o) {}

  std::map<std::string, std::string> attributes() const override {
    return {{"fsdp_units", units_described_}};
  }

  ~FullyShardedDataParallel() override {
    if (model_) model_->set_block_hooks(nullptr);
  }

  void setup(Model& model, const torch::Device& device, c10::ScalarType param_dtype) override {
    setup_replicated(model, device, param_dtype);
    // Units: one per block, then the root (every parameter outside the blocks).
    std::vector<std::vector<torch::Tensor>> groups;
    std::set<c10::TensorImpl*> in_blocks;
    for (const auto& block : model.blocks()) {
      groups.push_back(block->parameters());
      for (const auto& p : groups.back())
        TORCH_CHECK(in_blocks.insert(p.unsafeGetTensorImpl()).second,
                    "fsdp: a parameter is shared by two blocks");
    }
    std::vector<torch::Tensor> root;
    for (const auto& p : model.parameters())
      if (!in_blocks.count(p.unsafeGetTensorImpl())) root.push_back(p);
    groups.push_back(root);
    units_described_ =
        model.blocks().empty()
            ? "one unit: the model declares no blocks(), so every parameter is gathered at "
              "once"
            : fmt::format("{} blocks and the root", model.blocks().size());

    std::vector<torch::Tensor> hooked;
    for (auto& group : groups) {
      Unit unit;
      if (!group.empty()) {
        unit.flat = std::make_unique<FlatParameters>(group, rank_, world_size_);
        unit.shard = unit.flat->chunk(unit.flat->flat()).clone();
        unit.flat->release();
        for (const auto& p : group) {
          hooked.push_back(p);
          unit_of_.push_back(units_.size());
        }
      }
      units_.push_back(std::move(unit));
    }
    hooks_.attach(hooked, [this](size_t i) { on_gradient_ready(unit_of_[i]); });
    model_ = &model;
    model.set_block_hooks(this);
  }

  std::vector<torch::Tensor> optimizer_parameters(Model&) override {
    std::vector<torch::Tensor> shards;
    for (const auto& unit : units_)
      if (unit.flat) shards.push_back(unit.shard);
    return shards;
  }

  torch::Tensor forward(Model& model, const Batch& batch) override {
    gather(root());
    prefetch(0);
    torch::Tensor logits = model.forward(batch);
    if (!torch::GradMode::is_enabled()) reshard(root());  // no backward will follow
    return logits;
  }

  void before_block(size_t index) override {
    gather(units_[index]);
    prefetch(index + 1);  // arrives while this block computes
  }

  void after_block(size_t index, const torch::Tensor& output) override {
    if (!torch::GradMode::is_enabled() || !output.requires_grad()) {
      reshard(units_[index]);
      return;
    }
    // Before backward reaches this block, its parameters must be whole again.
    output.register_hook([this, index](const torch::Tensor&) {
      gather(units_[index]);
      if (index > 0) prefetch(index - 1);  // backward runs the blocks in reverse
    });
    if (options_.reshard_after_forward) reshard(units_[index]);
  }

  void backward(const torch::Tensor& loss, bool sync) override {
    syncing_ = sync;
    for (auto& unit : units_) {
      unit.pending = unit.flat ? unit.flat->parameters().size() : 0;
      unit.reduced = false;
    }
    loss.backward();
    // Units whose parameters got no gradient in this backward (unused ones), in a fixed order.
    for (auto& unit : units_)
      if (unit.flat && !unit.reduced) finish_backward(unit);
    if (!sync) return;
    for (auto& unit : units_)
      if (unit.reduction.work)
        unit.shard.mutable_grad() = finish_reduce_scatter(unit.reduction, unit.shard.scalar_type());
  }

  bool shards_gradients() const override { return true; }

  void with_full_parameters(Model& model, const std::function<void()>& fn) override {
    for (auto& unit : units_) gather(unit);
    fn();
    torch::NoGradGuard no_grad;
    for (auto& unit : units_) {
      if (!unit.flat) continue;
      unit.shard.copy_(unit.flat->chunk(unit.flat->flat()));  // keep what fn wrote
      reshard(unit);
    }
  }

  std::vector<torch::Tensor> to_model_layout(Model& model,
                                             const std::vector<torch::Tensor>& chunks) override {
    return chunks_to_model_layout(model, groups(), chunks);
  }
  std::vector<torch::Tensor> to_optimizer_layout(Model& model,
                                                 const std::vector<torch::Tensor>& whole) override {
    return model_layout_to_chunks(model, groups(), whole);
  }

  TrainingStateBytes state_bytes(Model&, const Optimizer& optimizer) const override {
    std::vector<torch::Tensor> shards;
    for (const auto& unit : units_)
      if (unit.flat) shards.push_back(unit.shard);
    const double bytes = tensor_bytes(shards);
    return {bytes, bytes, optimizer.state_bytes()};
  }

 private:
  // The flat groups whose chunks are optimizer_parameters(), in that order.
  std::vector<FlatParameters*> groups() {
    std::vector<FlatParameters*> out;
    for (auto& unit : units_)
      if (unit.flat) out.push_back(unit.flat.get());
    return out;
  }

  Unit& root() { return units_.back(); }

  // Starts the all-gather of block `index` (if there is one and it is not whole already).
  void prefetch(size_t index) {
    if (index >= units_.size() - 1) return;  // the root is gathered for the whole step
    Unit& unit = units_[index];
    if (!unit.flat || unit.flat->allocated()) return;
    unit.flat->allocate();
    unit.gathering = group_->_allgather_base(unit.flat->flat(), unit.shard);
    count(unit.flat->flat());
  }

  // Makes the unit whole: waits for its prefetch, or gathers it now.
  void gather(Unit& unit) {
    if (!unit.flat) return;
    if (!unit.flat->allocated()) {
      unit.flat->allocate();
      unit.gathering = group_->_allgather_base(unit.flat->flat(), unit.shard);
      count(unit.flat->flat());
    }
    if (unit.gathering) {
      unit.gathering->wait();
      unit.gathering.reset();
    }
  }

  void reshard(Unit& unit) {
    if (!unit.flat) return;
    if (unit.gathering) {  // never free memory a collective is still writing
      unit.gathering->wait();
      unit.gathering.reset();
    }
    unit.flat->release();
  }

  void on_gradient_ready(size_t index) {
    Unit& unit = units_[index];
    if (--unit.pending == 0) finish_backward(unit);
  }

  // The unit's backward is over: send its gradients on their way (when syncing) and free its
  // parameters. Without syncing (an accumulating micro-batch) the gradients stay whole.
  void finish_backward(Unit& unit) {
    unit.reduced = true;
    if (syncing_) {
      launch_reduce_scatter(unit.reduction, unit.flat->take_gradients(reduce_dtype_),
                            unit.flat->chunk_numel());
    }
    reshard(unit);
  }

  FsdpOptions options_;
  std::string units_described_;  // what the run details say of the units
  std::vector<Unit> units_;      // the blocks', then the root's
  std::vector<size_t> unit_of_;  // hooked parameter index -> unit
  bool syncing_ = true;
  GradientReadyHooks hooks_;
  Model* model_ = nullptr;
};

}  // namespace

void register_fsdp(Registry& registry) {
  OptionSet<FsdpOptions> options;
  options.add(
      "reshard_after_forward", &FsdpOptions::reshard_after_forward,
      "free each block's gathered parameters after its forward and gather them again for backward "
      "(less memory, one more all-gather per block)");
  add_distributed_options(options);
  registry.add<StrategyPtr(const StrategyContext&)>(
      ComponentKind::strategy, "fsdp",
      "fully sharded data parallel: parameters, gradients and optimizer state sharded; blocks "
      "gathered as they run",
      options,
      [](const FsdpOptions& o, const StrategyContext& context) -> StrategyPtr {
        return std::make_shared<FullyShardedDataParallel>(o, context);
      },
      [](const auto&) {
        return StrategyCapabilities{
            .multi_process = true, .shards_gradients = true, .shards_parameters = true};
      });
}

}  // namespace trainyard
