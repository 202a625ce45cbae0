#include "components/models/vit.h"

#include <cmath>
#include <regex>

#include <ATen/ATen.h>
#include <torch/nn/functional.h>
#include <torch/nn/init.h>
#include <torch/nn/modules.h>

namespace trainyard {

namespace {

namespace F = torch::nn::functional;

// Multi-head self-attention with torchvision's (nn.MultiheadAttention's) parameter names, computed
// with at::scaled_dot_product_attention so the fastest available kernel runs.
struct SelfAttention : torch::nn::Module {
  SelfAttention(int64_t width, int64_t heads, double dropout) : heads(heads), dropout(dropout) {
    in_proj_weight = register_parameter("in_proj_weight", torch::empty({3 * width, width}));
    in_proj_bias = register_parameter("in_proj_bias", torch::zeros({3 * width}));
    out_proj = register_module("out_proj", torch::nn::Linear(width, width));
    torch::nn::init::xavier_uniform_(in_proj_weight);
    torch::nn::init::zeros_(out_proj->bias);
  }

  torch::Tensor forward(const torch::Tensor& x) {
    const int64_t batch = x.size(0), tokens = x.size(1), width = x.size(2);
    auto qkv = F::linear(x, in_proj_weight, in_proj_bias)
                   .view({batch, tokens, 3, heads, width / heads})
                   .permute({2, 0, 3, 1, 4});  // [3, B, heads, T, head_dim]
    auto attended = at::scaled_dot_product_attention(qkv[0], qkv[1], qkv[2], /*attn_mask=*/{},
                                                     is_training() ? dropout : 0.0);
    return out_proj(attended.transpose(1, 2).reshape({batch, tokens, width}));
  }

  int64_t heads;
  double dropout;
  torch::Tensor in_proj_weight, in_proj_bias;
  torch::nn::Linear out_proj{nullptr};
};

// Pre-LayerNorm transformer block: x + attn(ln_1(x)), then x + mlp(ln_2(x)).
struct EncoderBlock : torch::nn::Module {
  EncoderBlock(const VitOptions& o) {
    auto layer_norm = [&] {
      return torch::nn::LayerNorm(torch::nn::LayerNormOptions({o.width}).eps(1e-6));
    };
    ln_1 = register_module("ln_1", layer_norm());
    self_attention = register_module(
        "self_attention", std::make_shared<SelfAttention>(o.width, o.heads, o.attention_dropout));
    dropout = register_module("dropout", torch::nn::Dropout(o.dropout));
    ln_2 = register_module("ln_2", layer_norm());
    mlp = register_module(
        "mlp",
        torch::nn::Sequential(torch::nn::Linear(o.width, o.mlp_dim), torch::nn::GELU(),
                              torch::nn::Dropout(o.dropout), torch::nn::Linear(o.mlp_dim, o.width),
                              torch::nn::Dropout(o.dropout)));
    // torchvision's MLPBlock init.
    for (auto& module : mlp->children()) {
      if (auto* linear = module->as<torch::nn::Linear>()) {
        torch::nn::init::xavier_uniform_(linear->weight);
        torch::nn::init::normal_(linear->bias, 0.0, 1e-6);
      }
    }
  }

  torch::Tensor forward(torch::Tensor x) {
    x = x + dropout(self_attention->forward(ln_1(x)));
    return x + mlp->forward(ln_2(x));
  }

  torch::nn::LayerNorm ln_1{nullptr}, ln_2{nullptr};
  std::shared_ptr<SelfAttention> self_attention;
  torch::nn::Dropout dropout{nullptr};
  torch::nn::Sequential mlp{nullptr};
};

struct Encoder : torch::nn::Module {
  Encoder(const VitOptions& o, int64_t tokens) {
    pos_embedding = register_parameter("pos_embedding", torch::empty({1, tokens, o.width}));
    torch::nn::init::normal_(pos_embedding, 0.0, 0.02);
    dropout = register_module("dropout", torch::nn::Dropout(o.dropout));
    layers = register_module("layers", std::make_shared<torch::nn::Module>());
    for (int64_t i = 0; i < o.depth; ++i)
      blocks.push_back(layers->register_module("encoder_layer_" + std::to_string(i),
                                               std::make_shared<EncoderBlock>(o)));
    ln = register_module("ln",
                         torch::nn::LayerNorm(torch::nn::LayerNormOptions({o.width}).eps(1e-6)));
  }

  torch::Tensor pos_embedding;
  torch::nn::Dropout dropout{nullptr};
  std::shared_ptr<torch::nn::Module> layers;
  std::vector<std::shared_ptr<EncoderBlock>> blocks;
  torch::nn::LayerNorm ln{nullptr};
};

std::string timm_to_torchvision(const std::string& name) {
  static const std::vector<std::pair<std::string, std::string>> top = {
      {"patch_embed.proj.", "conv_proj."},
      {"cls_token", "class_token"},
      {"pos_embed", "encoder.pos_embedding"},
      {"norm.", "encoder.ln."},
      {"head.", "heads.head."}};
  static const std::vector<std::pair<std::string, std::string>> block = {
      {"norm1.", "ln_1."},
      {"norm2.", "ln_2."},
      {"attn.qkv.weight", "self_attention.in_proj_weight"},
      {"attn.qkv.bias", "self_attention.in_proj_bias"},
      {"attn.proj.", "self_attention.out_proj."},
      {"mlp.fc1.", "mlp.0."},
      {"mlp.fc2.", "mlp.3."}};
  static const std::regex block_name(R"(^blocks\.(\d+)\.(.*)$)");
  std::smatch match;
  if (std::regex_match(name, match, block_name)) {
    std::string rest = match[2];
    for (const auto& [from, to] : block)
      if (rest.rfind(from, 0) == 0)
        return "encoder.layers.encoder_layer_" + match[1].str() + "." + to +
               rest.substr(from.size());
    return name;  // an unknown block tensor: reported unexpected
  }
  for (const auto& [from, to] : top)
    if (name.rfind(from, 0) == 0) return to + name.substr(from.size());
  return name;
}

class VisionTransformer : public Model {
 public:
  explicit VisionTransformer(const VitOptions& o) : options_(o) {
    const int64_t patches_per_side = o.image_size / o.patch_size;
    conv_proj_ = register_module(
        "conv_proj",
        torch::nn::Conv2d(torch::nn::Conv2dOptions(3, o.width, o.patch_size).stride(o.patch_size)));
    class_token_ = register_parameter("class_token", torch::zeros({1, 1, o.width}));
    encoder_ = register_module(
        "encoder", std::make_shared<Encoder>(o, patches_per_side * patches_per_side + 1));
    auto heads = register_module("heads", std::make_shared<torch::nn::Module>());
    head_ = heads->register_module("head", torch::nn::Linear(o.width, o.num_classes));

    // torchvision's init: truncated normal patch projection, zero classification head.
    const double fan_in = 3.0 * o.patch_size * o.patch_size;
    // torchvision's trunc_normal_(std=sqrt(1/fan_in)) truncates at ±2 absolute, about 50 standard
    // deviations here: a clamped normal is the same distribution in practice.
    {
      torch::NoGradGuard no_grad;
      torch::nn::init::normal_(conv_proj_->weight, 0.0, std::sqrt(1.0 / fan_in)).clamp_(-2.0, 2.0);
    }
    torch::nn::init::zeros_(conv_proj_->bias);
    torch::nn::init::zeros_(head_->weight);
    torch::nn::init::zeros_(head_->bias);
  }

  torch::Tensor forward(const Batch& batch) override {
    const auto& images = batch.inputs;
    TORCH_CHECK(images.dim() == 4 && images.size(2) == options_.image_size &&
                    images.size(3) == options_.image_size,
                "vit expects images [B, 3, ", options_.image_size, ", ", options_.image_size,
                "], got ", images.sizes());
    auto x = conv_proj_(images).flatten(2).transpose(1, 2);  // [B, patches, width]
    x = torch::cat({class_token_.expand({x.size(0), -1, -1}), x}, 1);
    x = encoder_->dropout(x + encoder_->pos_embedding);
    for (size_t i = 0; i < encoder_->blocks.size(); ++i)
      x = run_block(i, [&] { return encoder_->blocks[i]->forward(x); });
    x = encoder_->ln(x);
    return head_(x.select(1, 0));  // the class token
  }

  std::vector<std::shared_ptr<torch::nn::Module>> blocks() const override {
    return {encoder_->blocks.begin(), encoder_->blocks.end()};
  }

  // torchvision's names are this model's; timm's are renamed (same tensors: timm's fused qkv is
  // torchvision's in_proj, q, k, v in the same order). A "module." prefix (DDP) is dropped.
  std::function<std::string(const std::string&)> checkpoint_names_mapper(
      const std::vector<std::string>& names) const override {
    bool timm =
        std::find(names.begin(), names.end(), "patch_embed.proj.weight") != names.end() ||
        std::find(names.begin(), names.end(), "module.patch_embed.proj.weight") != names.end();
    return [timm](std::string name) {
      if (name.rfind("module.", 0) == 0) name = name.substr(7);
      return timm ? timm_to_torchvision(name) : name;
    };
  }

  bool is_head(const std::string& name) const override { return name.rfind("heads.head.", 0) == 0; }

  // ViT-B/16 at 224 px: 105.4 GFLOP per image.
  double training_flops(const Batch& batch) const override {
    const VitOptions& o = options_;
    const double patches =
        static_cast<double>((o.image_size / o.patch_size) * (o.image_size / o.patch_size));
    const double tokens = patches + 1, width = static_cast<double>(o.width);
    const double block =
        2 * tokens * (4 * width * width + 2 * width * o.mlp_dim)  // projections and MLP
        + 2 * 2 * tokens * tokens * width;                        // scores and weighted sum
    const double forward =
        2 * patches * 3.0 * o.patch_size * o.patch_size * width  // patch embedding
        + static_cast<double>(o.depth) * block + 2 * width * o.num_classes;
    return 3 * forward * static_cast<double>(batch.size());
  }
  void reset_head() override { head_->reset_parameters(); }  // PyTorch's default Linear init

 private:
  VitOptions options_;
  torch::nn::Conv2d conv_proj_{nullptr};
  torch::Tensor class_token_;
  std::shared_ptr<Encoder> encoder_;
  torch::nn::Linear head_{nullptr};
};

}  // namespace

void register_vit(Registry& registry) {
  OptionSet<VitOptions> options;
  options
      .add("image_size", &VitOptions::image_size, "input resolution (square images)", at_least(1))
      .add("patch_size", &VitOptions::patch_size, "side of the square patches; divides image_size",
           at_least(1))
      .add("depth", &VitOptions::depth, "transformer blocks", at_least(1))
      .add("width", &VitOptions::width, "hidden size; divisible by heads", at_least(1))
      .add("heads", &VitOptions::heads, "attention heads", at_least(1))
      .add("mlp_dim", &VitOptions::mlp_dim, "hidden size of each block's MLP", at_least(1))
      .add("num_classes", &VitOptions::num_classes,
           "classes of the classification head; must match the dataset", at_least(2))
      .add("dropout", &VitOptions::dropout, "dropout probability after attention and in the MLP",
           between(0, 1))
      .add("attention_dropout", &VitOptions::attention_dropout, "dropout on attention weights",
           between(0, 1))
      .check([](const VitOptions& o) -> std::optional<std::string> {
        if (o.image_size % o.patch_size == 0) return std::nullopt;
        return "image_size " + std::to_string(o.image_size) + " is not a multiple of patch_size " +
               std::to_string(o.patch_size);
      })
      .check([](const VitOptions& o) -> std::optional<std::string> {
        if (o.width % o.heads == 0) return std::nullopt;
        return "width " + std::to_string(o.width) + " is not divisible by heads " +
               std::to_string(o.heads);
      });
  registry.add<ModelPtr(const ModelContext&)>(
      ComponentKind::model, "vit", "Vision Transformer; defaults are torchvision's vit_b_16",
      options,
      [](const VitOptions& o, const ModelContext& context) -> ModelPtr {
        if (context.num_classes != o.num_classes)
          throw UserError(
              "model 'vit': num_classes is " + std::to_string(o.num_classes) +
              " but the dataset has " + std::to_string(context.num_classes) +
              " classes; set model.num_classes: " + std::to_string(context.num_classes));
        return std::make_shared<VisionTransformer>(o);
      },
      [](const VitOptions& o) {
        return ModelCapabilities{.image_size = o.image_size, .num_classes = o.num_classes};
      });
}

int64_t count_parameters(const torch::nn::Module& module) {
  int64_t total = 0;
  for (const auto& p : module.parameters())
    if (p.requires_grad()) total += p.numel();
  return total;
}

}  // namespace trainyard
