// torchvision's ResNets (resnet18, resnet34, resnet50, resnet101, resnet152) as a plugin: the same
// modules under the same names (conv1, bn1, layer1.0.conv1, layer2.0.downsample.0, fc, ...), so a
// torchvision checkpoint converted to safetensors loads as model.weights, and the same
// initialisation. A model with buffers (BatchNorm's running statistics): checkpoints keep them, and
// ddp broadcasts rank 0's before each training forward, as PyTorch's DDP does.
//
// stem: imagenet is torchvision's (7x7 convolution, stride 2, then max pooling); stem: cifar is the
// usual change for 32x32 images (3x3 convolution, stride 1, no pooling), whose conv1 has another
// shape than a torchvision checkpoint's.
#include <trainyard/plugin.h>

#include <cmath>

#include <torch/nn/functional/pooling.h>
#include <torch/nn/init.h>
#include <torch/nn/modules/batchnorm.h>
#include <torch/nn/modules/container/modulelist.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/modules/conv.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/modules/pooling.h>

namespace {

using namespace trainyard;
namespace nn = torch::nn;

struct ResNetOptions {
  int64_t num_classes = 1000;
  int64_t image_size = 224;
  std::string stem = "imagenet";
  bool zero_init_residual = false;
};

// What one residual block is made of: torchvision's BasicBlock (two 3x3 convolutions) or its
// Bottleneck (1x1, 3x3 with the stride, 1x1 widening by 4: "ResNet v1.5").
struct Architecture {
  bool bottleneck = false;
  std::vector<int64_t> blocks_per_layer;
};

// Multiply-adds of a convolution or linear layer, counted as the model is built (for MFU).
struct MacCounter {
  double macs = 0;
  void conv(const nn::Conv2d& c, int64_t out_side) {
    const auto& w = c->weight;
    macs += static_cast<double>(w.numel()) * out_side * out_side;
  }
};

nn::Conv2d conv(int64_t in, int64_t out, int64_t kernel, int64_t stride, MacCounter& counter,
                int64_t& side) {
  const int64_t padding = kernel / 2;
  nn::Conv2d c(nn::Conv2dOptions(in, out, kernel).stride(stride).padding(padding).bias(false));
  side = (side + 2 * padding - kernel) / stride + 1;
  counter.conv(c, side);
  return c;
}

class ResidualBlockImpl : public nn::Module {
 public:
  ResidualBlockImpl(bool bottleneck, int64_t in, int64_t planes, int64_t stride,
                    MacCounter& counter, int64_t& side)
      : bottleneck_(bottleneck) {
    const int64_t out = bottleneck ? planes * 4 : planes;
    const int64_t in_side = side;
    if (bottleneck) {
      conv1_ = register_module("conv1", conv(in, planes, 1, 1, counter, side));
      bn1_ = register_module("bn1", nn::BatchNorm2d(planes));
      conv2_ = register_module("conv2", conv(planes, planes, 3, stride, counter, side));
      bn2_ = register_module("bn2", nn::BatchNorm2d(planes));
      conv3_ = register_module("conv3", conv(planes, out, 1, 1, counter, side));
      bn3_ = register_module("bn3", nn::BatchNorm2d(out));
    } else {
      conv1_ = register_module("conv1", conv(in, planes, 3, stride, counter, side));
      bn1_ = register_module("bn1", nn::BatchNorm2d(planes));
      conv2_ = register_module("conv2", conv(planes, planes, 3, 1, counter, side));
      bn2_ = register_module("bn2", nn::BatchNorm2d(planes));
    }
    if (stride != 1 || in != out) {
      int64_t shortcut_side = in_side;
      downsample_ = register_module(
          "downsample",
          nn::Sequential(conv(in, out, 1, stride, counter, shortcut_side), nn::BatchNorm2d(out)));
    }
  }

  torch::Tensor forward(const torch::Tensor& x) {
    torch::Tensor y = torch::relu(bn1_->forward(conv1_->forward(x)));
    y = bn2_->forward(conv2_->forward(y));
    if (bottleneck_) y = bn3_->forward(conv3_->forward(torch::relu(y)));
    const torch::Tensor identity = downsample_ ? downsample_->forward(x) : x;
    return torch::relu(y + identity);
  }

  // The last BatchNorm's scale, zeroed by zero_init_residual (each block then starts as identity).
  nn::BatchNorm2d& last_norm() { return bottleneck_ ? bn3_ : bn2_; }

 private:
  bool bottleneck_;
  nn::Conv2d conv1_{nullptr}, conv2_{nullptr}, conv3_{nullptr};
  nn::BatchNorm2d bn1_{nullptr}, bn2_{nullptr}, bn3_{nullptr};
  nn::Sequential downsample_{nullptr};
};
TORCH_MODULE(ResidualBlock);

class ResNet : public Model {
 public:
  ResNet(const Architecture& a, const ResNetOptions& o) {
    int64_t side = o.image_size;
    const bool imagenet_stem = o.stem == "imagenet";
    conv1_ = register_module(
        "conv1", conv(3, 64, imagenet_stem ? 7 : 3, imagenet_stem ? 2 : 1, counter_, side));
    bn1_ = register_module("bn1", nn::BatchNorm2d(64));
    if (imagenet_stem) side = (side + 2 - 3) / 2 + 1;  // the max pooling
    max_pool_ = imagenet_stem;

    int64_t in = 64;
    const int64_t expansion = a.bottleneck ? 4 : 1;
    for (size_t layer = 0; layer < 4; ++layer) {
      const int64_t planes = 64 << layer;
      nn::ModuleList blocks;
      for (int64_t b = 0; b < a.blocks_per_layer[layer]; ++b) {
        const int64_t stride = (layer > 0 && b == 0) ? 2 : 1;
        ResidualBlock block(a.bottleneck, in, planes, stride, counter_, side);
        in = planes * expansion;
        blocks->push_back(block);
        blocks_.push_back(block.ptr());
      }
      layers_.push_back(register_module("layer" + std::to_string(layer + 1), blocks));
    }
    fc_ = register_module("fc", nn::Linear(in, o.num_classes));
    counter_.macs += static_cast<double>(fc_->weight.numel());

    initialise(o.zero_init_residual);
  }

  torch::Tensor forward(const Batch& batch) override {
    torch::Tensor x = torch::relu(bn1_->forward(conv1_->forward(batch.inputs)));
    if (max_pool_)
      x = nn::functional::max_pool2d(x,
                                     nn::functional::MaxPool2dFuncOptions(3).stride(2).padding(1));
    for (size_t i = 0; i < blocks_.size(); ++i)
      x = run_block(i, [&] { return blocks_[i]->forward(x); });
    x = nn::functional::adaptive_avg_pool2d(x, nn::functional::AdaptiveAvgPool2dFuncOptions(1));
    return fc_->forward(x.flatten(1));
  }

  std::vector<std::shared_ptr<nn::Module>> blocks() const override {
    return {blocks_.begin(), blocks_.end()};
  }
  bool is_head(const std::string& name) const override { return name.rfind("fc.", 0) == 0; }
  void reset_head() override { fc_->reset_parameters(); }
  // 2 FLOPs per multiply-add of the convolutions and the head (BatchNorm, ReLU and pooling are
  // not counted, as torchvision's GFLOPS figures do not), times 3 for forward and backward.
  double training_flops(const Batch& batch) const override {
    return 6.0 * counter_.macs * static_cast<double>(batch.size());
  }

 private:
  // As torchvision's ResNet.__init__: Kaiming-normal convolutions (fan_out, ReLU), BatchNorm
  // scale 1 and shift 0; the head keeps nn.Linear's own initialisation.
  void initialise(bool zero_init_residual) {
    torch::NoGradGuard no_grad;
    for (auto& module : modules(/*include_self=*/false)) {
      if (auto* c = module->as<nn::Conv2d>()) {
        nn::init::kaiming_normal_(c->weight, 0, torch::kFanOut, torch::kReLU);
      } else if (auto* bn = module->as<nn::BatchNorm2d>()) {
        nn::init::ones_(bn->weight);
        nn::init::zeros_(bn->bias);
      }
    }
    if (zero_init_residual)
      for (auto& block : blocks_) nn::init::zeros_(block->last_norm()->weight);
  }

  MacCounter counter_;
  nn::Conv2d conv1_{nullptr};
  nn::BatchNorm2d bn1_{nullptr};
  bool max_pool_ = true;
  std::vector<nn::ModuleList> layers_;
  std::vector<std::shared_ptr<ResidualBlockImpl>> blocks_;  // every layer's, in forward order
  nn::Linear fc_{nullptr};
};

void register_resnets(Registry& registry) {
  const std::vector<std::pair<std::string, Architecture>> architectures = {
      {"resnet18", {false, {2, 2, 2, 2}}},  {"resnet34", {false, {3, 4, 6, 3}}},
      {"resnet50", {true, {3, 4, 6, 3}}},   {"resnet101", {true, {3, 4, 23, 3}}},
      {"resnet152", {true, {3, 8, 36, 3}}},
  };
  for (const auto& [name, architecture] : architectures) {
    OptionSet<ResNetOptions> options;
    options
        .add("num_classes", &ResNetOptions::num_classes,
             "classes of the classification head (fc); must match the dataset", at_least(2))
        .add("image_size", &ResNetOptions::image_size, "input resolution (square images)",
             at_least(8))
        .add("stem", &ResNetOptions::stem,
             "imagenet: torchvision's 7x7/2 convolution and max pooling; cifar: one 3x3/1 "
             "convolution, for 32x32 images",
             one_of({"imagenet", "cifar"}))
        .add("zero_init_residual", &ResNetOptions::zero_init_residual,
             "start each block's last BatchNorm scale at 0 (torchvision's option)");
    const Architecture a = architecture;
    const std::string model_name = name;
    registry.add<ModelPtr(const ModelContext&)>(
        ComponentKind::model, name,
        "torchvision's " + name + " (BatchNorm; torchvision's tensor names; example plugin)",
        options,
        [a, model_name](const ResNetOptions& o, const ModelContext& context) -> ModelPtr {
          if (context.num_classes != o.num_classes)
            throw UserError(
                "model '" + model_name + "': num_classes is " + std::to_string(o.num_classes) +
                " but the dataset has " + std::to_string(context.num_classes) +
                " classes; set model.num_classes: " + std::to_string(context.num_classes));
          return std::make_shared<ResNet>(a, o);
        },
        [](const ResNetOptions& o) {
          return ModelCapabilities{.image_size = o.image_size, .num_classes = o.num_classes};
        });
  }
}

}  // namespace

TRAINYARD_PLUGIN(register_resnets)
