// Datasets for causal language models (task causal-lm): a sample is a window of seq_len + 1
// consecutive tokens; its inputs are the first seq_len, its targets the last seq_len (each
// position's next token). Windows start every seq_len tokens, as llm.c's loader reads them
// (consecutive windows share one token: the next window's first input is this one's last target).
//   tokens            token files (components/data/token_file.h: llm.c's format or nanoGPT's .bin)
//   synthetic-tokens  a seeded Markov chain over a small vocabulary, for quick runs and tests
//   text              .txt or .jsonl files tokenised once into token files
//   (components/data/text.cpp)
#pragma once

#include <functional>
#include <memory>

#include "components/data/token_file.h"
#include "trainyard/dataset.h"

namespace trainyard {

// The windows of a token sequence that `read(start, count, out)` copies out as int64.
class TokenWindows : public Dataset {
 public:
  using Read = std::function<void(int64_t start, int64_t count, int64_t* out)>;
  // The first `windows` windows of seq_len + 1 tokens (every window of the sequence: (tokens - 1)
  // / seq_len).
  TokenWindows(Read read, int64_t windows, int64_t seq_len)
      : read_(std::move(read)), windows_(windows), seq_len_(seq_len) {}
  int64_t size() const override { return windows_; }
  // inputs [B, seq_len] and targets [B, seq_len], int64.
  Batch get_batch(const std::vector<int64_t>& indices) const override;

 private:
  Read read_;
  int64_t windows_;
  int64_t seq_len_;
};

// How token files become a language model's splits (the options tokens and text share).
struct TokenWindowOptions {
  int64_t seq_len = 1024;
  bool sequential = false;  // dataset.sampler: sequential
  int64_t train_size = 0;   // windows of each split: the file's first N; 0 = all
  int64_t val_size = 0;
  int64_t test_size = 0;
};

// The three splits over the token files (`test` may be `val`: its windows then), after checking
// every training and validation token is below the model's vocabulary (context.vocab_size);
// UserError, as `dataset`, for a file that holds no window or a token beyond the vocabulary.
DataSplits token_file_splits(const std::string& dataset,
                             const std::shared_ptr<const TokenFile>& train,
                             const std::shared_ptr<const TokenFile>& val,
                             const std::shared_ptr<const TokenFile>& test,
                             const TokenWindowOptions& options, const DataContext& context);

void register_tokens(Registry& registry);
void register_text(Registry& registry);  // components/data/text.cpp
void register_synthetic_tokens(Registry& registry);

}  // namespace trainyard
