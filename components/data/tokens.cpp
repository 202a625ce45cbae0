#include "components/data/tokens.h"

#include <filesystem>
#include <random>

#include <fmt/format.h>
#include <torch/types.h>

#include "common/text.h"
#include "components/data/token_file.h"
#include "components/text/byte_bpe.h"
#include "trainyard/error.h"

namespace trainyard {

namespace fs = std::filesystem;

Batch TokenWindows::get_batch(const std::vector<int64_t>& indices) const {
  const auto n = static_cast<int64_t>(indices.size());
  torch::Tensor windows = torch::empty({n, seq_len_ + 1}, torch::kLong);
  int64_t* out = windows.data_ptr<int64_t>();
  for (int64_t i = 0; i < n; ++i) {
    const int64_t window = indices[static_cast<size_t>(i)];
    TORCH_CHECK(window >= 0 && window < windows_, "token window ", window, " of ", windows_);
    read_(window * seq_len_, seq_len_ + 1, out + i * (seq_len_ + 1));
  }
  Batch batch;
  batch.inputs = windows.narrow(1, 0, seq_len_).contiguous();
  batch.targets = windows.narrow(1, 1, seq_len_).contiguous();
  return batch;
}

namespace {

// Every window of a file of `tokens` tokens, or the first `limit` of them (0: all).
int64_t windows_of(int64_t tokens, int64_t seq_len, int64_t limit) {
  const int64_t all = tokens > 0 ? (tokens - 1) / seq_len : 0;
  return limit > 0 ? std::min(all, limit) : all;
}

struct TokensOptions {
  std::string train;
  std::string val;
  std::string test;  // empty: the val file
  std::string format = "llmc";
  int64_t seq_len = 1024;
  std::string sampler = "random";
  int64_t train_size = 0;
  int64_t val_size = 0;
  int64_t test_size = 0;
  std::string tokenizer;  // what wrote the files: for samples of the model's text, not training
};

DatasetCapabilities describe_tokens(const TokensOptions& o) {
  DatasetCapabilities capabilities{.max_length = o.seq_len, .task = Task::causal_lm};
  for (const auto& [key, path] :
       {std::pair<const char*, std::string>{"train", o.train}, {"val", o.val}, {"test", o.test}}) {
    if (path.empty()) continue;
    std::error_code ec;
    if (!fs::is_regular_file(path, ec)) {
      capabilities.files.problems.emplace_back(
          key, fmt::format("tokens: no such file '{}'; make token files from text with `trainyard "
                           "tokenize` (docs/language-models.md)",
                           path));
      continue;
    }
    // Its header against its size, now (mapped, the tokens not read): a file that lies about
    // itself is refused before anything trains. (The tokens against the model's vocabulary are
    // checked when the run starts: that reads the whole file.)
    try {
      TokenFile file(path, token_file_format(o.format));
      if (windows_of(file.size(), o.seq_len, 0) == 0)
        capabilities.files.problems.emplace_back(
            key, fmt::format("tokens: {}: {} tokens hold no window of seq_len + 1 = {} tokens; use "
                             "a longer file or a shorter dataset.seq_len",
                             path, file.size(), o.seq_len + 1));
    } catch (const UserError& e) {
      capabilities.files.problems.emplace_back(key, e.what());
    }
  }
  if (!o.tokenizer.empty()) {
    try {
      ByteBpeTokenizer::from_tokenizer_json(o.tokenizer);
    } catch (const UserError& e) {
      capabilities.files.problems.emplace_back("tokenizer", e.what());
    }
  }
  return capabilities;
}

// One split's windows over `file`, after checking that every token is below the model's
// vocabulary (`vocab_size`; 0: no model vocabulary to check against).
std::shared_ptr<const Dataset> split_of(const std::string& dataset,
                                        const std::shared_ptr<const TokenFile>& file,
                                        int64_t seq_len, int64_t limit, const char* split,
                                        int64_t vocab_size) {
  const int64_t windows = windows_of(file->size(), seq_len, limit);
  if (windows == 0)
    throw UserError(fmt::format(
        "{}: {}: {} tokens hold no window of seq_len + 1 = {} tokens for the {} split; use a "
        "longer file or a shorter dataset.seq_len",
        dataset, file->path(), file->size(), seq_len + 1, split));
  if (vocab_size > 0) {
    const int64_t beyond = file->first_at_or_above(vocab_size);
    if (beyond >= 0) {
      const int64_t largest = file->max_token();
      throw UserError(fmt::format(
          "{}: {}: token {} at position {} is beyond the model's vocabulary of {} tokens "
          "(model.vocab_size), and its largest token is {}: set model.vocab_size: {} or more, "
          "unless the file was tokenized for another model",
          dataset, file->path(), file->token(beyond), beyond, vocab_size, largest, largest + 1));
    }
  }
  return std::make_shared<TokenWindows>(
      [file](int64_t start, int64_t count, int64_t* out) { file->copy(start, count, out); },
      windows, seq_len);
}

struct SyntheticTokensOptions {
  int64_t vocab_size = 256;
  int64_t seq_len = 64;
  int64_t train_size = 512;  // windows
  int64_t val_size = 64;
  int64_t test_size = 64;
  int64_t seed = 0;
};

// A Markov chain: each token is followed by one of 4 successors drawn for it (seeded), so a model
// that learns the table reaches a loss of ln 4 ≈ 1.39 from the uniform ln(vocab_size).
std::vector<int64_t> markov_tokens(int64_t vocab_size, int64_t count, uint64_t table_seed,
                                   uint64_t walk_seed) {
  constexpr int kSuccessors = 4;
  std::mt19937_64 table_generator(table_seed), walk(walk_seed);
  std::uniform_int_distribution<int64_t> any(0, vocab_size - 1);
  std::vector<int64_t> successors(static_cast<size_t>(vocab_size * kSuccessors));
  for (auto& s : successors) s = any(table_generator);
  std::uniform_int_distribution<int> pick(0, kSuccessors - 1);
  std::vector<int64_t> tokens(static_cast<size_t>(count));
  int64_t token = any(walk);
  for (auto& t : tokens) {
    t = token;
    token = successors[static_cast<size_t>(token * kSuccessors + pick(walk))];
  }
  return tokens;
}

}  // namespace

DataSplits token_file_splits(const std::string& dataset,
                             const std::shared_ptr<const TokenFile>& train,
                             const std::shared_ptr<const TokenFile>& val,
                             const std::shared_ptr<const TokenFile>& test,
                             const TokenWindowOptions& o, const DataContext& context) {
  DataSplits splits;
  splits.train = split_of(dataset, train, o.seq_len, o.train_size, "train", context.vocab_size);
  splits.validation = split_of(dataset, val, o.seq_len, o.val_size, "val", context.vocab_size);
  splits.test = split_of(dataset, test, o.seq_len, o.test_size, "test",
                         test == val ? 0 : context.vocab_size);  // (val's tokens were checked)
  splits.vocab_size = context.vocab_size;
  splits.train_in_order = o.sequential;
  splits.details["dataset_tokens"] = fmt::format(
      "train {} tokens ({} windows), val {} tokens, test {}", train->size(), splits.train->size(),
      val->size(), test == val ? "the val file" : std::to_string(test->size()) + " tokens");
  return splits;
}

void register_tokens(Registry& registry) {
  OptionSet<TokensOptions> options;
  options.add("train", &TokensOptions::train, "training token file", names_data(required()))
      .add("val", &TokensOptions::val, "validation token file", names_data(required()))
      .add("test", &TokensOptions::test, "test token file; empty: the val file", names_data())
      .add("format", &TokensOptions::format,
           "llmc: llm.c's (a 1 KiB header, then uint16 or uint32 tokens); nanogpt: nanoGPT's "
           "headerless uint16 .bin",
           one_of({"llmc", "nanogpt"}))
      .add("seq_len", &TokensOptions::seq_len,
           "the context: a sample is seq_len + 1 tokens (inputs, and targets shifted by one)",
           at_least(1))
      .add("sampler", &TokensOptions::sampler,
           "random: the windows in a new seeded order each epoch; sequential: in file order",
           one_of({"random", "sequential"}))
      .add("train_size", &TokensOptions::train_size,
           "training windows: the file's first N; 0 = all", at_least(0))
      .add("val_size", &TokensOptions::val_size, "validation windows: the first N; 0 = all",
           at_least(0))
      .add("test_size", &TokensOptions::test_size, "test windows: the first N; 0 = all",
           at_least(0))
      .add("tokenizer", &TokensOptions::tokenizer,
           "the byte-level BPE tokenizer.json the files were written with (trainyard tokenize): "
           "`trainyard sample` and the report decode the model's text with it; training never "
           "reads it");
  registry.add<DataSplits(const DataContext&)>(
      ComponentKind::dataset, "tokens",
      "token files for causal language models (llm.c's format, or nanoGPT's .bin), "
      "memory-mapped",
      options,
      [](const TokensOptions& o, const DataContext& context) {
        context.check_sequence_fits("tokens", "dataset.seq_len", o.seq_len);
        const TokenFile::Format format = token_file_format(o.format);
        auto open = [&](const std::string& path) {
          return std::make_shared<const TokenFile>(path, format);
        };
        auto train = open(o.train), val = open(o.val);
        auto test = o.test.empty() || o.test == o.val ? val : open(o.test);
        DataSplits splits = token_file_splits("tokens", train, val, test,
                                              {.seq_len = o.seq_len,
                                               .sequential = o.sampler == "sequential",
                                               .train_size = o.train_size,
                                               .val_size = o.val_size,
                                               .test_size = o.test_size},
                                              context);
        if (context.log)
          context.log(
              fmt::format("tokens: {} training windows of {} + 1 tokens from {} ({}-byte "
                          "tokens)",
                          splits.train->size(), o.seq_len, o.train, train->token_bytes()));
        return splits;
      },
      describe_tokens);
}

void register_synthetic_tokens(Registry& registry) {
  OptionSet<SyntheticTokensOptions> options;
  options
      .add("vocab_size", &SyntheticTokensOptions::vocab_size,
           "distinct token ids; at most the model's vocab_size", at_least(8))
      .add("seq_len", &SyntheticTokensOptions::seq_len,
           "the context: a sample is seq_len + 1 tokens", at_least(1))
      .add("train_size", &SyntheticTokensOptions::train_size, "training windows", at_least(1))
      .add("val_size", &SyntheticTokensOptions::val_size, "validation windows", at_least(1))
      .add("test_size", &SyntheticTokensOptions::test_size, "test windows", at_least(1))
      .add("seed", &SyntheticTokensOptions::seed, "seed of the data (fixed across runs)",
           at_least(0));
  registry.add<DataSplits(const DataContext&)>(
      ComponentKind::dataset, "synthetic-tokens",
      "a seeded Markov chain of tokens (4 successors each: the best loss is ln 4), for quick "
      "causal-lm runs and tests",
      options,
      [](const SyntheticTokensOptions& o, const DataContext& context) {
        context.check_sequence_fits("synthetic-tokens", "dataset.seq_len", o.seq_len);
        const auto seed = static_cast<uint64_t>(o.seed) * 4;
        auto split = [&](int64_t windows, uint64_t walk_seed) {
          auto tokens = std::make_shared<const std::vector<int64_t>>(
              markov_tokens(o.vocab_size, windows * o.seq_len + 1, seed, walk_seed));
          return std::make_shared<TokenWindows>(
              [tokens](int64_t start, int64_t count, int64_t* out) {
                std::copy_n(tokens->begin() + start, count, out);
              },
              windows, o.seq_len);
        };
        DataSplits splits;
        splits.train = split(o.train_size, seed + 1);
        splits.validation = split(o.val_size, seed + 2);
        splits.test = split(o.test_size, seed + 3);
        splits.vocab_size = o.vocab_size;
        return splits;
      },
      [](const SyntheticTokensOptions& o) {
        return DatasetCapabilities{
            .vocab_size = o.vocab_size, .max_length = o.seq_len, .task = Task::causal_lm};
      });
}

}  // namespace trainyard
