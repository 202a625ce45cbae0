// GPT-2 (Radford et al.) as a causal language model, laid out as Hugging Face's GPT2LMHeadModel so
// parameter names match its state dict: transformer.{wte, wpe}, transformer.h.{i}.{ln_1,
// attn.c_attn, attn.c_proj, ln_2, mlp.c_fc, mlp.c_proj}, transformer.ln_f. Its projections are
// GPT-2's Conv1D: weights stored [in, out], the transpose of nn.Linear's, so a checkpoint loads
// as it is. The output head is the token embedding itself (tied), as in GPT-2. The defaults are
// the 124M model's.
#pragma once

#include "trainyard/model.h"

namespace trainyard {

struct Gpt2Options {
  int64_t vocab_size = 50257;
  int64_t max_positions = 1024;
  int64_t depth = 12;
  int64_t width = 768;
  int64_t heads = 12;
  // One rate for the embeddings', attention weights' and residual branches' dropout, as nanoGPT's
  // `dropout`. 0 as llm.c and nanoGPT pretrain; Hugging Face's config says 0.1 for fine-tuning.
  double dropout = 0.0;
};

void register_gpt2(Registry& registry);

}  // namespace trainyard
