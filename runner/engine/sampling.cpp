#include "runner/engine/sampling.h"

#include <limits>

#include <ATen/CPUGeneratorImpl.h>
#include <fmt/format.h>
#include <torch/torch.h>
#include <unicode/unistr.h>

#include "components/weights/load_weights.h"
#include "trainyard/error.h"
#include "trainyard/model.h"

namespace trainyard {

namespace {

std::vector<int64_t> prompt_ids(const ByteBpeTokenizer& tokenizer, const std::string& prompt) {
  if (prompt.empty()) {
    for (const char* start : {"<|endoftext|>", "<s>"})
      if (tokenizer.token_id(start) >= 0) return {tokenizer.token_id(start)};
    throw UserError(
        "sample: the tokenizer has no <|endoftext|> or <s> to start from; give a prompt");
  }
  std::vector<int32_t> ids;
  tokenizer.encode_ordinary(prompt, ids);
  return {ids.begin(), ids.end()};
}

std::vector<int64_t> draw(Model& model, std::vector<int64_t> context, int64_t max_positions,
                          const SampleOptions& options, uint64_t seed) {
  at::Generator generator = at::make_generator<at::CPUGeneratorImpl>(seed);
  std::vector<int64_t> drawn;
  for (int64_t i = 0; i < options.tokens; ++i) {
    // The last max_positions tokens: the context the model can read.
    const size_t start = max_positions > 0 && static_cast<int64_t>(context.size()) > max_positions
                             ? context.size() - static_cast<size_t>(max_positions)
                             : 0;
    Batch batch;
    batch.inputs =
        torch::tensor(
            std::vector<int64_t>(context.begin() + static_cast<ptrdiff_t>(start), context.end()))
            .unsqueeze(0);
    batch.targets = batch.inputs;
    torch::Tensor logits = model.forward(batch).select(1, -1).squeeze(0).to(torch::kFloat);
    int64_t next;
    if (options.temperature <= 0) {
      next = logits.argmax().item<int64_t>();
    } else {
      logits = logits / options.temperature;
      if (options.top_k > 0 && options.top_k < logits.size(0)) {
        const torch::Tensor kth = std::get<0>(logits.topk(options.top_k)).select(0, -1);
        logits = logits.masked_fill(logits < kth, -std::numeric_limits<float>::infinity());
      }
      next = at::multinomial(logits.softmax(0), 1, false, generator).item<int64_t>();
    }
    drawn.push_back(next);
    context.push_back(next);
  }
  return drawn;
}

}  // namespace

std::vector<std::string> sample_texts(const RunSpec& run, const std::string& weights_path,
                                      const ByteBpeTokenizer& tokenizer, const std::string& prompt,
                                      const SampleOptions& options, const Registry& registry) {
  const ModelCapabilities& model_caps = run.model.capabilities;
  if (tokenizer.vocab_size() > model_caps.vocab_size)
    throw UserError(fmt::format(
        "sample: the tokenizer has {} tokens, more than the model embeds ({}); is it the one its "
        "token files were written with?",
        tokenizer.vocab_size(), model_caps.vocab_size));
  ModelPtr model =
      build_model(registry, run.model, ModelContext{.vocab_size = model_caps.vocab_size});
  load_weights(*model, weights_path, /*strict=*/true);
  torch::NoGradGuard no_grad;
  model->eval();
  const std::vector<int64_t> start = prompt_ids(tokenizer, prompt);
  std::vector<std::string> texts;
  for (int64_t i = 0; i < options.texts; ++i) {
    // Text to show: bytes that are no UTF-8 (a character the draw cut short) become U+FFFD, as
    // the tokenizers library decodes.
    const std::string bytes = tokenizer.decode(draw(
        *model, start, model_caps.max_positions, options, options.seed + static_cast<uint64_t>(i)));
    std::string text;
    icu::UnicodeString::fromUTF8(bytes).toUTF8String(text);
    texts.push_back(std::move(text));
  }
  return texts;
}

}  // namespace trainyard
