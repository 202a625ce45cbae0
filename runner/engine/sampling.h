// Text from a trained language model: what `trainyard sample` prints and the report shows
// (runner/cli/samples.h finds a run's weights and tokenizer). The run's model is rebuilt from its
// resolved config with the weights it was tested with; tokens are drawn one at a time from the
// last position's logits — divided by the temperature, cut to the top k, softmax, one draw from a
// CPU generator seeded once — as nanoGPT's sample.py draws them, so the same weights, prompt and
// seed give the same text. On the CPU, whatever the run trained on.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "components/text/byte_bpe.h"
#include "runner/config/run_spec.h"
#include "trainyard/registry.h"

namespace trainyard {

struct SampleOptions {
  int64_t tokens = 100;      // drawn after the prompt
  double temperature = 0.8;  // 0: the most likely token each time
  int64_t top_k = 40;        // 0: every token
  uint64_t seed = 1;         // of the first text; the next ones take seed + 1, ...
  int64_t texts = 1;
};

// `options.texts` texts of `run`'s model with the weights at `weights_path` (strictly loaded),
// each going on from `prompt` — or, when it is empty, from the tokenizer's document separator
// (<|endoftext|>, else <s>): text as a document starts. Each text is what was drawn, decoded
// (without the prompt; a character cut short shows as U+FFFD). UserError when the weights do not
// fit the model, or there is nothing to start from.
std::vector<std::string> sample_texts(const RunSpec& run, const std::string& weights_path,
                                      const ByteBpeTokenizer& tokenizer, const std::string& prompt,
                                      const SampleOptions& options, const Registry& registry);

}  // namespace trainyard
