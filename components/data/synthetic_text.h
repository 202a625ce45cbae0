// A deterministic text-classification dataset generated in memory: random token sequences in which
// each class plants its own "signal" tokens. DistilBERT learns it in seconds on a CPU, so tests and
// benchmarks train on text without downloads or a tokenizer.
#pragma once

#include "trainyard/dataset.h"

namespace trainyard {

struct SyntheticTextOptions {
  int64_t train_size = 1024;
  int64_t val_size = 256;
  int64_t test_size = 256;
  int64_t vocab_size = 1000;
  int64_t min_length = 16;
  int64_t max_length = 128;
  int64_t num_classes = 2;
  std::string padding = "dynamic";
  int64_t seed = 0;
};

void register_synthetic_text(Registry& registry);

}  // namespace trainyard
