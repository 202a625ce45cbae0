#include "components/models/gpt2.h"

#include <cmath>

#include <ATen/ATen.h>
#include <torch/nn/functional.h>
#include <torch/nn/modules.h>

namespace trainyard {

namespace {

namespace F = torch::nn::functional;

torch::nn::LayerNorm layer_norm(int64_t dim) {
  return torch::nn::LayerNorm(torch::nn::LayerNormOptions({dim}).eps(1e-5));
}

// GPT-2's Conv1D: a linear layer whose weight is stored [in, out]; y = x W + b, by addmm as
// Hugging Face computes it.
struct Conv1D : torch::nn::Module {
  Conv1D(int64_t in, int64_t out) {
    weight = register_parameter("weight", torch::empty({in, out}));
    bias = register_parameter("bias", torch::zeros({out}));
  }
  torch::Tensor forward(const torch::Tensor& x) {
    auto shape = x.sizes().vec();
    shape.back() = weight.size(1);
    return torch::addmm(bias, x.reshape({-1, x.size(-1)}), weight).view(shape);
  }
  torch::Tensor weight, bias;
};

struct Attention : torch::nn::Module {
  explicit Attention(const Gpt2Options& o) : heads(o.heads), dropout(o.dropout) {
    c_attn = register_module("c_attn", std::make_shared<Conv1D>(o.width, 3 * o.width));
    c_proj = register_module("c_proj", std::make_shared<Conv1D>(o.width, o.width));
    resid_dropout = register_module("resid_dropout", torch::nn::Dropout(o.dropout));
  }
  // x [B, T, width]: each position attends to itself and the positions before it.
  torch::Tensor forward(const torch::Tensor& x) {
    const int64_t batch = x.size(0), tokens = x.size(1), width = x.size(2);
    auto qkv = c_attn->forward(x).split(width, /*dim=*/2);
    auto split = [&](const torch::Tensor& t) {
      return t.view({batch, tokens, heads, width / heads}).transpose(1, 2);
    };
    auto attended =
        at::scaled_dot_product_attention(split(qkv[0]), split(qkv[1]), split(qkv[2]), {},
                                         is_training() ? dropout : 0.0, /*is_causal=*/true);
    return resid_dropout(c_proj->forward(attended.transpose(1, 2).reshape({batch, tokens, width})));
  }
  int64_t heads;
  double dropout;
  std::shared_ptr<Conv1D> c_attn, c_proj;
  torch::nn::Dropout resid_dropout{nullptr};
};

struct Mlp : torch::nn::Module {
  explicit Mlp(const Gpt2Options& o) {
    c_fc = register_module("c_fc", std::make_shared<Conv1D>(o.width, 4 * o.width));
    c_proj = register_module("c_proj", std::make_shared<Conv1D>(4 * o.width, o.width));
    dropout = register_module("dropout", torch::nn::Dropout(o.dropout));
  }
  // GPT-2's GELU is the tanh approximation (Hugging Face's "gelu_new").
  torch::Tensor forward(const torch::Tensor& x) {
    return dropout(
        c_proj->forward(F::gelu(c_fc->forward(x), F::GELUFuncOptions().approximate("tanh"))));
  }
  std::shared_ptr<Conv1D> c_fc, c_proj;
  torch::nn::Dropout dropout{nullptr};
};

// Pre-LayerNorm block: x = x + attn(ln_1(x)); x = x + mlp(ln_2(x)).
struct Block : torch::nn::Module {
  explicit Block(const Gpt2Options& o) {
    ln_1 = register_module("ln_1", layer_norm(o.width));
    attn = register_module("attn", std::make_shared<Attention>(o));
    ln_2 = register_module("ln_2", layer_norm(o.width));
    mlp = register_module("mlp", std::make_shared<Mlp>(o));
  }
  torch::Tensor forward(const torch::Tensor& x) {
    auto h = x + attn->forward(ln_1(x));
    return h + mlp->forward(ln_2(h));
  }
  torch::nn::LayerNorm ln_1{nullptr}, ln_2{nullptr};
  std::shared_ptr<Attention> attn;
  std::shared_ptr<Mlp> mlp;
};

struct Transformer : torch::nn::Module {
  explicit Transformer(const Gpt2Options& o) {
    wte = register_module("wte", torch::nn::Embedding(o.vocab_size, o.width));
    wpe = register_module("wpe", torch::nn::Embedding(o.max_positions, o.width));
    drop = register_module("drop", torch::nn::Dropout(o.dropout));
    auto h = register_module("h", std::make_shared<torch::nn::Module>());
    for (int64_t i = 0; i < o.depth; ++i)
      blocks.push_back(h->register_module(std::to_string(i), std::make_shared<Block>(o)));
    ln_f = register_module("ln_f", layer_norm(o.width));
  }
  torch::nn::Embedding wte{nullptr}, wpe{nullptr};
  torch::nn::Dropout drop{nullptr};
  std::vector<std::shared_ptr<Block>> blocks;
  torch::nn::LayerNorm ln_f{nullptr};
};

class Gpt2LMHead : public Model {
 public:
  explicit Gpt2LMHead(const Gpt2Options& o) : options_(o) {
    transformer_ = register_module("transformer", std::make_shared<Transformer>(o));
    // Hugging Face's init: normal(0, 0.02) weights and embeddings, zero biases, unit LayerNorms;
    // each residual branch's output projection scaled by 1/sqrt(2 x depth) (GPT-2's paper).
    torch::NoGradGuard no_grad;
    for (auto& module : modules(/*include_self=*/false)) {
      if (auto* conv = module->as<Conv1D>()) conv->weight.normal_(0.0, 0.02);
      if (auto* embedding = module->as<torch::nn::Embedding>())
        embedding->weight.normal_(0.0, 0.02);
    }
    const double residual_std = 0.02 / std::sqrt(2.0 * static_cast<double>(o.depth));
    for (auto& block : transformer_->blocks) {
      block->attn->c_proj->weight.normal_(0.0, residual_std);
      block->mlp->c_proj->weight.normal_(0.0, residual_std);
    }
  }

  // Logits [B, T, vocab_size]: at each position, the next token's.
  torch::Tensor forward(const Batch& batch) override {
    const auto& ids = batch.inputs;
    TORCH_CHECK(ids.dim() == 2 && ids.scalar_type() == torch::kLong,
                "gpt2 expects token ids [B, T] int64, got ", ids.sizes(), " ", ids.scalar_type());
    TORCH_CHECK(ids.size(1) <= options_.max_positions, "gpt2: a context of ", ids.size(1),
                " tokens is longer than max_positions ", options_.max_positions);
    auto positions = torch::arange(ids.size(1), ids.options());
    auto x = transformer_->drop(transformer_->wte(ids) + transformer_->wpe(positions));
    for (size_t i = 0; i < transformer_->blocks.size(); ++i)
      x = run_block(i, [&] { return transformer_->blocks[i]->forward(x); });
    // The head is the token embedding (tied): no parameter of its own.
    return F::linear(transformer_->ln_f(x), transformer_->wte->weight);
  }

  std::vector<std::shared_ptr<torch::nn::Module>> blocks() const override {
    return {transformer_->blocks.begin(), transformer_->blocks.end()};
  }

  // Hugging Face's names are this model's. The Hub's model.safetensors is a bare GPT2Model (no
  // "transformer." prefix); old exports carry the attention's causal-mask buffers (attn.bias,
  // attn.masked_bias), which are not weights; lm_head.weight is the token embedding again (tied).
  std::function<std::string(const std::string&)> checkpoint_names_mapper(
      const std::vector<std::string>& names) const override {
    const bool bare = std::find(names.begin(), names.end(), "wte.weight") != names.end();
    return [bare](const std::string& name) -> std::string {
      if (name == "lm_head.weight") return "";
      for (const char* buffer : {".attn.bias", ".attn.masked_bias"})
        if (name.size() > std::strlen(buffer) &&
            name.compare(name.size() - std::strlen(buffer), std::string::npos, buffer) == 0)
          return "";
      return bare ? "transformer." + name : name;
    };
  }

  // FLOPs per token as nanoGPT's estimate_mfu and llm.c count them (PaLM's appendix B): 6 per
  // parameter outside the position embeddings (the tied head counted once, in the matrix product
  // that uses it), plus attention's 12 x depth x width x context; times the batch's tokens.
  double training_flops(const Batch& batch) const override {
    const Gpt2Options& o = options_;
    const double context = static_cast<double>(batch.inputs.size(1));
    const double parameters = static_cast<double>(count_parameters(*this)) -
                              static_cast<double>(o.max_positions * o.width);
    const double per_token = 6 * parameters + 12.0 * static_cast<double>(o.depth) *
                                                  static_cast<double>(o.width) * context;
    return per_token * context * static_cast<double>(batch.size());
  }

 private:
  Gpt2Options options_;
  std::shared_ptr<Transformer> transformer_;
};

}  // namespace

void register_gpt2(Registry& registry) {
  OptionSet<Gpt2Options> options;
  options
      .add("vocab_size", &Gpt2Options::vocab_size,
           "token embeddings (and the tied output head); must cover the data's tokens", at_least(1))
      .add("max_positions", &Gpt2Options::max_positions, "learned positions: the longest context",
           at_least(1))
      .add("depth", &Gpt2Options::depth, "transformer blocks", at_least(1))
      .add("width", &Gpt2Options::width, "hidden size; divisible by heads", at_least(1))
      .add("heads", &Gpt2Options::heads, "attention heads", at_least(1))
      .add("dropout", &Gpt2Options::dropout,
           "dropout on the embeddings, attention weights and residual branches", between(0, 1))
      .check([](const Gpt2Options& o) -> std::optional<std::string> {
        if (o.width % o.heads != 0)
          return "width " + std::to_string(o.width) + " is not divisible by heads " +
                 std::to_string(o.heads);
        return std::nullopt;
      });
  registry.add<ModelPtr(const ModelContext&)>(
      ComponentKind::model, "gpt2",
      "GPT-2 causal language model (Hugging Face GPT2LMHeadModel names); defaults are the 124M "
      "model",
      options,
      [](const Gpt2Options& o, const ModelContext& context) -> ModelPtr {
        if (context.vocab_size > o.vocab_size)
          throw UserError("model 'gpt2': the data's vocabulary has " +
                          std::to_string(context.vocab_size) + " tokens but vocab_size is " +
                          std::to_string(o.vocab_size) +
                          "; set model.vocab_size: " + std::to_string(context.vocab_size));
        return std::make_shared<Gpt2LMHead>(o);
      },
      [](const Gpt2Options& o) {
        return ModelCapabilities{
            .max_positions = o.max_positions, .vocab_size = o.vocab_size, .task = Task::causal_lm};
      });
}

}  // namespace trainyard
