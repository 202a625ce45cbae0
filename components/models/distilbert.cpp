#include "components/models/distilbert.h"

#include <optional>

#include <ATen/ATen.h>
#include <torch/nn/functional.h>
#include <torch/nn/init.h>
#include <torch/nn/modules.h>

namespace trainyard {

namespace {

namespace F = torch::nn::functional;

torch::nn::LayerNorm layer_norm(int64_t dim) {
  return torch::nn::LayerNorm(torch::nn::LayerNormOptions({dim}).eps(1e-12));
}

struct Attention : torch::nn::Module {
  Attention(const DistilBertOptions& o) : heads(o.heads), dropout(o.attention_dropout) {
    q_lin = register_module("q_lin", torch::nn::Linear(o.dim, o.dim));
    k_lin = register_module("k_lin", torch::nn::Linear(o.dim, o.dim));
    v_lin = register_module("v_lin", torch::nn::Linear(o.dim, o.dim));
    out_lin = register_module("out_lin", torch::nn::Linear(o.dim, o.dim));
  }

  // x [B, T, dim]; keep [B, 1, 1, T] bool, true where a token may be attended to, or undefined.
  torch::Tensor forward(const torch::Tensor& x, const torch::Tensor& keep) {
    const int64_t batch = x.size(0), tokens = x.size(1), dim = x.size(2);
    auto split = [&](const torch::Tensor& t) {
      return t.view({batch, tokens, heads, dim / heads}).transpose(1, 2);
    };
    // No mask (a batch without padding): none at all, so SDPA may take its fused kernels.
    const std::optional<torch::Tensor> mask =
        keep.defined() ? std::optional<torch::Tensor>(keep) : std::nullopt;
    auto attended = at::scaled_dot_product_attention(
        split(q_lin(x)), split(k_lin(x)), split(v_lin(x)), mask, is_training() ? dropout : 0.0);
    return out_lin(attended.transpose(1, 2).reshape({batch, tokens, dim}));
  }

  int64_t heads;
  double dropout;
  torch::nn::Linear q_lin{nullptr}, k_lin{nullptr}, v_lin{nullptr}, out_lin{nullptr};
};

struct FeedForward : torch::nn::Module {
  FeedForward(const DistilBertOptions& o) {
    lin1 = register_module("lin1", torch::nn::Linear(o.dim, o.hidden_dim));
    lin2 = register_module("lin2", torch::nn::Linear(o.hidden_dim, o.dim));
    dropout = register_module("dropout", torch::nn::Dropout(o.dropout));
  }
  torch::Tensor forward(const torch::Tensor& x) { return dropout(lin2(F::gelu(lin1(x)))); }
  torch::nn::Linear lin1{nullptr}, lin2{nullptr};
  torch::nn::Dropout dropout{nullptr};
};

// Post-LayerNorm block: x = ln(x + attn(x)); x = ln(x + ffn(x)).
struct Block : torch::nn::Module {
  Block(const DistilBertOptions& o) {
    attention = register_module("attention", std::make_shared<Attention>(o));
    sa_layer_norm = register_module("sa_layer_norm", layer_norm(o.dim));
    ffn = register_module("ffn", std::make_shared<FeedForward>(o));
    output_layer_norm = register_module("output_layer_norm", layer_norm(o.dim));
  }
  torch::Tensor forward(const torch::Tensor& x, const torch::Tensor& keep) {
    auto h = sa_layer_norm(x + attention->forward(x, keep));
    return output_layer_norm(h + ffn->forward(h));
  }
  std::shared_ptr<Attention> attention;
  torch::nn::LayerNorm sa_layer_norm{nullptr}, output_layer_norm{nullptr};
  std::shared_ptr<FeedForward> ffn;
};

struct Embeddings : torch::nn::Module {
  Embeddings(const DistilBertOptions& o) {
    word_embeddings = register_module("word_embeddings", torch::nn::Embedding(o.vocab_size, o.dim));
    position_embeddings =
        register_module("position_embeddings", torch::nn::Embedding(o.max_positions, o.dim));
    LayerNorm = register_module("LayerNorm", layer_norm(o.dim));
    dropout = register_module("dropout", torch::nn::Dropout(o.dropout));
  }
  torch::Tensor forward(const torch::Tensor& ids) {
    auto positions = torch::arange(ids.size(1), ids.options());
    return dropout(LayerNorm(word_embeddings(ids) + position_embeddings(positions).unsqueeze(0)));
  }
  torch::nn::Embedding word_embeddings{nullptr}, position_embeddings{nullptr};
  torch::nn::LayerNorm LayerNorm{nullptr};
  torch::nn::Dropout dropout{nullptr};
};

struct Encoder : torch::nn::Module {
  Encoder(const DistilBertOptions& o) {
    embeddings = register_module("embeddings", std::make_shared<Embeddings>(o));
    auto transformer = register_module("transformer", std::make_shared<torch::nn::Module>());
    auto layer = transformer->register_module("layer", std::make_shared<torch::nn::Module>());
    for (int64_t i = 0; i < o.layers; ++i)
      blocks.push_back(layer->register_module(std::to_string(i), std::make_shared<Block>(o)));
  }
  std::shared_ptr<Embeddings> embeddings;
  std::vector<std::shared_ptr<Block>> blocks;
};

class DistilBertClassifier : public Model {
 public:
  explicit DistilBertClassifier(const DistilBertOptions& o) : options_(o) {
    distilbert_ = register_module("distilbert", std::make_shared<Encoder>(o));
    pre_classifier_ = register_module("pre_classifier", torch::nn::Linear(o.dim, o.dim));
    classifier_ = register_module("classifier", torch::nn::Linear(o.dim, o.num_classes));
    dropout_ = register_module("dropout", torch::nn::Dropout(o.classifier_dropout));
    // Hugging Face's init: normal(0, 0.02) weights and embeddings, zero biases, unit LayerNorms.
    torch::NoGradGuard no_grad;
    for (auto& module : modules(/*include_self=*/false)) {
      if (auto* linear = module->as<torch::nn::Linear>()) {
        linear->weight.normal_(0.0, 0.02);
        linear->bias.zero_();
      } else if (auto* embedding = module->as<torch::nn::Embedding>()) {
        embedding->weight.normal_(0.0, 0.02);
      }
    }
  }

  torch::Tensor forward(const Batch& batch) override {
    const auto& ids = batch.inputs;
    TORCH_CHECK(ids.dim() == 2 && ids.scalar_type() == torch::kLong,
                "distilbert expects token ids [B, T] int64, got ", ids.sizes(), " ",
                ids.scalar_type());
    TORCH_CHECK(ids.size(1) <= options_.max_positions, "distilbert: sequence of ", ids.size(1),
                " tokens is longer than max_positions ", options_.max_positions);
    torch::Tensor keep;  // no mask: every token attends to every token
    if (batch.attention_mask.defined())
      keep = batch.attention_mask.to(torch::kBool).view({ids.size(0), 1, 1, ids.size(1)});
    auto x = distilbert_->embeddings->forward(ids);
    for (size_t i = 0; i < distilbert_->blocks.size(); ++i)
      x = run_block(i, [&] { return distilbert_->blocks[i]->forward(x, keep); });
    auto pooled = torch::relu(pre_classifier_(x.select(1, 0)));  // the [CLS] token
    return classifier_(dropout_(pooled));
  }

  std::vector<std::shared_ptr<torch::nn::Module>> blocks() const override {
    return {distilbert_->blocks.begin(), distilbert_->blocks.end()};
  }

  // Hugging Face's names are this model's. A bare DistilBertModel checkpoint (no "distilbert."
  // prefix) is accepted too; the masked-LM head of distilbert-base-uncased is dropped.
  std::function<std::string(const std::string&)> checkpoint_names_mapper(
      const std::vector<std::string>& names) const override {
    bool bare =
        std::find(names.begin(), names.end(), "embeddings.word_embeddings.weight") != names.end();
    return [bare](const std::string& name) -> std::string {
      for (const char* mlm : {"vocab_transform.", "vocab_layer_norm.", "vocab_projector."})
        if (name.rfind(mlm, 0) == 0) return "";
      if (name.find("position_ids") != std::string::npos) return "";  // a buffer of old exports
      if (bare && (name.rfind("embeddings.", 0) == 0 || name.rfind("transformer.", 0) == 0))
        return "distilbert." + name;
      return name;
    };
  }

  bool is_head(const std::string& name) const override {
    return name.rfind("pre_classifier.", 0) == 0 || name.rfind("classifier.", 0) == 0;
  }

  // distilbert-base at 512 tokens: 145 GFLOP per sequence.
  double training_flops(const Batch& batch) const override {
    const DistilBertOptions& o = options_;
    const double tokens = static_cast<double>(batch.inputs.size(1)),
                 dim = static_cast<double>(o.dim);
    const double block =
        2 * tokens * (4 * dim * dim + 2 * dim * o.hidden_dim) + 2 * 2 * tokens * tokens * dim;
    const double forward =
        static_cast<double>(o.layers) * block + 2 * (dim * dim + dim * o.num_classes);
    return 3 * forward * static_cast<double>(batch.size());
  }

  void reset_head() override {
    torch::NoGradGuard no_grad;
    for (auto* linear : {pre_classifier_.get(), classifier_.get()}) {
      linear->weight.normal_(0.0, 0.02);  // as Hugging Face initialises a new classification head
      linear->bias.zero_();
    }
  }

 private:
  DistilBertOptions options_;
  std::shared_ptr<Encoder> distilbert_;
  torch::nn::Linear pre_classifier_{nullptr}, classifier_{nullptr};
  torch::nn::Dropout dropout_{nullptr};
};

}  // namespace

void register_distilbert(Registry& registry) {
  OptionSet<DistilBertOptions> options;
  options
      .add("vocab_size", &DistilBertOptions::vocab_size,
           "token embeddings; must cover the vocabulary", at_least(1))
      .add("max_positions", &DistilBertOptions::max_positions,
           "learned positions: the longest sequence", at_least(1))
      .add("dim", &DistilBertOptions::dim, "hidden size; divisible by heads", at_least(1))
      .add("layers", &DistilBertOptions::layers, "transformer blocks", at_least(1))
      .add("heads", &DistilBertOptions::heads, "attention heads", at_least(1))
      .add("hidden_dim", &DistilBertOptions::hidden_dim, "hidden size of each block's feed-forward",
           at_least(1))
      .add("dropout", &DistilBertOptions::dropout, "dropout after embeddings and feed-forwards",
           between(0, 1))
      .add("attention_dropout", &DistilBertOptions::attention_dropout,
           "dropout on attention weights", between(0, 1))
      .add("classifier_dropout", &DistilBertOptions::classifier_dropout,
           "dropout before the classifier", between(0, 1))
      .add("num_classes", &DistilBertOptions::num_classes, "classes; must match the dataset",
           at_least(2))
      .check([](const DistilBertOptions& o) -> std::optional<std::string> {
        if (o.dim % o.heads != 0)
          return "dim " + std::to_string(o.dim) + " is not divisible by heads " +
                 std::to_string(o.heads);
        return std::nullopt;
      });
  registry.add<ModelPtr(const ModelContext&)>(
      ComponentKind::model, "distilbert",
      "DistilBERT for sequence classification; defaults are distilbert-base-uncased", options,
      [](const DistilBertOptions& o, const ModelContext& context) -> ModelPtr {
        if (context.num_classes != o.num_classes)
          throw UserError(
              "model 'distilbert': num_classes is " + std::to_string(o.num_classes) +
              " but the dataset has " + std::to_string(context.num_classes) +
              " classes; set model.num_classes: " + std::to_string(context.num_classes));
        if (context.vocab_size > o.vocab_size)
          throw UserError("model 'distilbert': the tokenizer's vocabulary has " +
                          std::to_string(context.vocab_size) + " tokens but vocab_size is " +
                          std::to_string(o.vocab_size) +
                          "; set model.vocab_size: " + std::to_string(context.vocab_size));
        return std::make_shared<DistilBertClassifier>(o);
      },
      [](const DistilBertOptions& o) {
        return ModelCapabilities{.max_positions = o.max_positions,
                                 .num_classes = o.num_classes,
                                 .vocab_size = o.vocab_size};
      });
}

}  // namespace trainyard
