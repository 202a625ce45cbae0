// dataset: text — a language model trained on .txt or .jsonl files directly. They are tokenised
// once with a byte-level BPE tokenizer.json (as `trainyard tokenize` does: tokenize_files), the
// token files kept in .trainyard-cache beside the training file under a name keyed by what makes
// the tokens — the files' contents, the tokenizer, the documents and separator, the validation
// fraction — and read from there by every later run until one of those changes; then the tokens
// dataset's windows (token_file_splits).
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <optional>
#include <thread>

#include <fmt/format.h>

#include "common/fingerprint.h"
#include "common/text.h"
#include "components/data/tokens.h"
#include "components/text/tokenize_files.h"
#include "trainyard/error.h"

namespace trainyard {

namespace fs = std::filesystem;

namespace {

struct TextOptions {
  std::string train;
  std::string val;   // empty: the last val_fraction of train's tokens
  std::string test;  // empty: the validation split
  std::string tokenizer;
  std::string documents = "file";
  std::string separator = "auto";
  double val_fraction = 0.05;
  int64_t seq_len = 1024;
  std::string sampler = "random";
  int64_t train_size = 0;
  int64_t val_size = 0;
  int64_t test_size = 0;
  bool cache = true;
};

// What `path` is not, as text the dataset reads; "" when it is a .txt or .jsonl file.
std::string text_file_problem(const std::string& path) {
  std::error_code ec;
  if (!fs::is_regular_file(path, ec)) return fmt::format("text: no such file '{}'", path);
  const std::string extension = fs::path(path).extension().string();
  if (extension != ".txt" && extension != ".jsonl")
    return fmt::format(
        "text: '{}' is neither .txt nor .jsonl; name plain text (.txt) or JSON Lines with a "
        "\"text\" per line (.jsonl)",
        path);
  return "";
}

DatasetCapabilities describe_text(const TextOptions& o) {
  DatasetCapabilities capabilities{.max_length = o.seq_len, .task = Task::causal_lm};
  for (const auto& [key, path] :
       {std::pair<const char*, std::string>{"train", o.train}, {"val", o.val}, {"test", o.test}})
    if (!path.empty())
      if (std::string problem = text_file_problem(path); !problem.empty())
        capabilities.files.problems.emplace_back(key, std::move(problem));
  try {
    const ByteBpeTokenizer tokenizer = ByteBpeTokenizer::from_tokenizer_json(o.tokenizer);
    separator_token(tokenizer, o.separator, "text: dataset.separator", o.tokenizer);
    capabilities.vocab_size = tokenizer.vocab_size();
  } catch (const UserError& e) {
    capabilities.files.problems.emplace_back("tokenizer", e.what());
  }
  return capabilities;
}

// The token files of one tokenisation: train, val (the held-out tail, or the val file's), test
// (the test file's; empty without one).
struct TokenPaths {
  std::string train, val, test;
  bool all_exist() const {
    std::error_code ec;
    return fs::is_regular_file(train, ec) && fs::is_regular_file(val, ec) &&
           (test.empty() || fs::is_regular_file(test, ec));
  }
};

TokenPaths token_paths(const fs::path& folder, const std::string& stem, bool test) {
  return {(folder / (stem + "-train.bin")).string(), (folder / (stem + "-val.bin")).string(),
          test ? (folder / (stem + "-test.bin")).string() : ""};
}

// The token files at `paths`, mapped; UserError when one is missing or damaged.
struct OpenedTokens {
  std::shared_ptr<const TokenFile> train, val, test;
};
OpenedTokens open_tokens(const TokenPaths& paths) {
  const auto format = TokenFile::Format::llmc;
  OpenedTokens opened{std::make_shared<const TokenFile>(paths.train, format),
                      std::make_shared<const TokenFile>(paths.val, format), nullptr};
  opened.test =
      paths.test.empty() ? opened.val : std::make_shared<const TokenFile>(paths.test, format);
  return opened;
}

void remove_files(const TokenPaths& paths) {
  for (const std::string& path : {paths.train, paths.val, paths.test})
    if (!path.empty()) std::remove(path.c_str());
}

// Tokenises the options' files into `paths`, each written whole or not at all.
void tokenize_into(const TextOptions& o, const ByteBpeTokenizer& tokenizer, int64_t separator,
                   const TokenPaths& paths) {
  TokenizeOptions base{
      .documents = o.documents == "line" ? TokenizeOptions::Documents::line
                                         : TokenizeOptions::Documents::file,
      .separator = separator,
      .threads = static_cast<int>(std::clamp(std::thread::hardware_concurrency(), 1u, 8u))};
  auto run = [&](const std::string& input, const std::string& output, double val_fraction,
                 const std::string& val_output) {
    TokenizeOptions options = base;
    options.inputs = {input};
    options.output = output;
    options.val_fraction = val_fraction;
    options.val_output = val_output;
    tokenize_files(tokenizer, options, [](int64_t, int64_t) {});
  };
  if (o.val.empty()) {
    run(o.train, paths.train, o.val_fraction, paths.val);
  } else {
    run(o.train, paths.train, 0, "");
    run(o.val, paths.val, 0, "");
  }
  if (!o.test.empty()) run(o.test, paths.test, 0, "");
}

// What the cache's name is keyed by: everything that makes the tokens.
std::string cache_key(const TextOptions& o, const ByteBpeTokenizer& tokenizer, int64_t separator) {
  std::string key = fmt::format("text 1 tokenizer {} documents {} separator {} val_fraction {}",
                                tokenizer.cache_id(), o.documents, separator,
                                o.val.empty() ? o.val_fraction : 0.0);
  // The extension too: the same bytes as .txt and as .jsonl are other documents.
  for (const auto& [name, path] :
       {std::pair<const char*, std::string>{"train", o.train}, {"val", o.val}, {"test", o.test}})
    if (!path.empty())
      key += fmt::format(" {} {} {}", name, fs::path(path).extension().string(),
                         content_fingerprint(path).hash);
  return key;
}

}  // namespace

void register_text(Registry& registry) {
  OptionSet<TextOptions> options;
  options
      .add("train", &TextOptions::train,
           "the training text: a .txt file (one document, or one per line with documents: line) "
           "or .jsonl (a \"text\" per line)",
           names_data(required()))
      .add("val", &TextOptions::val,
           "the validation text; empty: the last val_fraction of the training text's tokens",
           names_data())
      .add("test", &TextOptions::test, "the test text; empty: the validation split", names_data())
      .add("tokenizer", &TextOptions::tokenizer,
           "a byte-level BPE tokenizer.json (GPT-2's, RoBERTa's, one the tokenizers library "
           "trained); `trainyard sample` and the report decode with it too",
           names_data(required()))
      .add("documents", &TextOptions::documents,
           "a .txt file is one document (file) or each of its lines is (line)",
           one_of({"file", "line"}))
      .add("separator", &TextOptions::separator,
           "the token before each document: auto (<|endoftext|>, else </s>, else none), none, "
           "or a token of the tokenizer")
      .add("val_fraction", &TextOptions::val_fraction,
           "without a val file: the share of the training tokens held out, from the end",
           between(0.001, 0.5))
      .add("seq_len", &TextOptions::seq_len,
           "the context: a sample is seq_len + 1 tokens (inputs, and targets shifted by one)",
           at_least(1))
      .add("sampler", &TextOptions::sampler,
           "random: the windows in a new seeded order each epoch; sequential: in file order",
           one_of({"random", "sequential"}))
      .add("train_size", &TextOptions::train_size, "training windows: the first N; 0 = all",
           at_least(0))
      .add("val_size", &TextOptions::val_size, "validation windows: the first N; 0 = all",
           at_least(0))
      .add("test_size", &TextOptions::test_size, "test windows: the first N; 0 = all", at_least(0))
      .add("cache", &TextOptions::cache,
           "keep the token files in .trainyard-cache beside the training text (else tokenise at "
           "every run)");
  registry.add<DataSplits(const DataContext&)>(
      ComponentKind::dataset, "text",
      "your text (.txt, .jsonl) for causal language models, tokenised once with a byte-level "
      "BPE tokenizer.json and cached",
      options,
      [](const TextOptions& o, const DataContext& context) {
        context.check_sequence_fits("text", "dataset.seq_len", o.seq_len);
        for (const std::string& path : {o.train, o.val, o.test})
          if (!path.empty())
            if (const std::string problem = text_file_problem(path); !problem.empty())
              throw UserError(problem);
        const ByteBpeTokenizer tokenizer = ByteBpeTokenizer::from_tokenizer_json(o.tokenizer);
        const int64_t separator =
            separator_token(tokenizer, o.separator, "text: dataset.separator", o.tokenizer);
        auto log = [&](const std::string& line) {
          if (context.log) context.log(line);
        };
        const std::string key = cache_key(o, tokenizer, separator);
        const std::string stem = "text-" + stable_hash(key).substr(0, 16);
        const fs::path cache_folder = fs::path(o.train).parent_path() / ".trainyard-cache";
        TokenPaths paths = token_paths(cache_folder, stem, !o.test.empty());
        bool temporary = !o.cache;
        std::optional<OpenedTokens> tokens;
        if (o.cache && paths.all_exist()) {
          try {
            tokens = open_tokens(paths);
            log(fmt::format("text: tokens of {} from the cache ({})", o.train, paths.train));
          } catch (const UserError& e) {  // damaged: made again
            log(fmt::format("text: the cached tokens are unreadable ({}); tokenising again",
                            e.what()));
          }
        }
        if (!tokens) {
          std::error_code ec;
          if (o.cache) {
            fs::create_directories(cache_folder, ec);
            if (ec || access(cache_folder.c_str(), W_OK) != 0) {
              log(fmt::format("text: {} cannot be written; the tokens are made for this run only",
                              cache_folder.string()));
              temporary = true;
            }
          }
          if (temporary)
            paths = token_paths(fs::temp_directory_path(),
                                fmt::format("trainyard-{}-{}", stem, getpid()), !o.test.empty());
          log(fmt::format("text: tokenising {}{}{} with {}", o.train,
                          o.val.empty() ? "" : ", " + o.val, o.test.empty() ? "" : ", " + o.test,
                          o.tokenizer));
          try {
            tokenize_into(o, tokenizer, separator, paths);
            tokens = open_tokens(paths);
          } catch (...) {
            if (temporary) remove_files(paths);  // what an earlier split committed
            throw;
          }
          if (temporary) remove_files(paths);  // mapped: their pages stay while the run reads
        }
        const auto& [train, val, test] = *tokens;
        DataSplits splits = token_file_splits("text", train, val, test,
                                              {.seq_len = o.seq_len,
                                               .sequential = o.sampler == "sequential",
                                               .train_size = o.train_size,
                                               .val_size = o.val_size,
                                               .test_size = o.test_size},
                                              context);
        log(fmt::format("text: {} training windows of {} + 1 tokens ({} tokens; validation {})",
                        splits.train->size(), o.seq_len, train->size(), val->size()));
        return splits;
      },
      describe_text);
}

}  // namespace trainyard
