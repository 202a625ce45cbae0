// `trainyard tokenize`: text files to the token files a language model trains on (llm.c's format,
// components/text/tokenize_files.h), with a byte-level BPE tokenizer.json (GPT-2's, RoBERTa's).
// The one command between a user's text and `dataset: tokens`.
#include <unistd.h>

#include <chrono>
#include <thread>

#include <fmt/format.h>
#include <boost/program_options.hpp>

#include "common/text.h"
#include "components/text/byte_bpe.h"
#include "components/text/tokenize_files.h"
#include "runner/cli/commands.h"
#include "runner/cli/options.h"
#include "trainyard/error.h"

namespace trainyard {

namespace po = boost::program_options;

namespace {

// On a terminal, one line redrawn in place (at most ten times a second); else a line per tenth.
class ProgressLine {
 public:
  ProgressLine() : terminal_(isatty(fileno(stderr)) != 0) {}
  void update(int64_t done, int64_t total) {
    const auto now = std::chrono::steady_clock::now();
    const double seconds = std::chrono::duration<double>(now - start_).count();
    const double fraction = total > 0 ? static_cast<double>(done) / static_cast<double>(total) : 1;
    const std::string text = fmt::format(
        "tokenize: {:3.0f}% ({} of {}, {}/s)", 100 * fraction,
        format_bytes(static_cast<double>(done)), format_bytes(static_cast<double>(total)),
        format_bytes(seconds > 0 ? static_cast<double>(done) / seconds : 0));
    if (terminal_) {
      if (done < total && now - drawn_ < std::chrono::milliseconds(100)) return;
      drawn_ = now;
      constexpr int kBar = 24;
      const int filled = static_cast<int>(fraction * kBar);
      fmt::print(stderr, "\r[{}{}] {}\x1b[K", std::string(static_cast<size_t>(filled), '#'),
                 std::string(static_cast<size_t>(kBar - filled), '.'), text);
      if (done >= total) fmt::print(stderr, "\r\x1b[K");
      return;
    }
    const int tenth = static_cast<int>(fraction * 10);
    if (tenth > printed_tenth_ && done < total) {
      printed_tenth_ = tenth;
      fmt::print(stderr, "{}\n", text);
    }
  }

 private:
  bool terminal_;
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now(), drawn_{};
  int printed_tenth_ = 0;
};

}  // namespace

int tokenize_command(const std::vector<std::string>& args) {
  po::options_description options = command_options(
      "trainyard tokenize --tokenizer tokenizer.json FILE... -o train.bin [--val-fraction 0.05]\n"
      "  text files (.txt, or .jsonl with a \"text\" per line) to llm.c's token files, which "
      "`dataset: tokens` reads");
  std::string tokenizer_path, separator = "auto", documents = "file";
  TokenizeOptions o;
  const int hardware = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  o.threads = hardware;
  options.add_options()("tokenizer", po::value(&tokenizer_path),
                        "a byte-level BPE tokenizer.json (GPT-2's, RoBERTa's, one the tokenizers "
                        "library trained)")("output,o", po::value(&o.output),
                                            "the training tokens' file (train.bin)")(
      "val-fraction", po::value(&o.val_fraction)->default_value(0.0),
      "the last fraction of the tokens, written to a validation file")(
      "val-output", po::value(&o.val_output),
      "the validation file (default: the output's name with train -> val, or _val added)")(
      "separator", po::value(&separator)->default_value("auto"),
      "the token before each document: auto (<|endoftext|>, else </s>, else none), none, or a "
      "token")("documents", po::value(&documents)->default_value("file"),
               "what a document of a .txt file is: file, or line (each line that is not empty)")(
      "threads", po::value(&o.threads)->default_value(hardware), "threads that encode");
  po::options_description arguments;
  arguments.add_options()("files", po::value(&o.inputs)->multitoken(), "text files");
  po::positional_options_description positional;
  positional.add("files", -1);
  po::variables_map vm;
  if (!parse_command_line(args, options, positional, vm, arguments)) return kExitOk;
  if (tokenizer_path.empty())
    throw UserError("tokenize: say which tokenizer: --tokenizer tokenizer.json");
  if (o.output.empty()) throw UserError("tokenize: say where the tokens go: -o train.bin");
  if (o.inputs.empty()) throw UserError("tokenize: name the text files to tokenise");
  if (documents != "file" && documents != "line")
    throw UserError(fmt::format("tokenize: --documents {} is neither file nor line", documents));
  o.documents =
      documents == "line" ? TokenizeOptions::Documents::line : TokenizeOptions::Documents::file;
  if (o.threads < 1) throw UserError("tokenize: --threads must be at least 1");
  if (o.val_fraction > 0 && o.val_output.empty()) o.val_output = default_val_output(o.output);
  if (o.val_fraction > 0 && o.val_output == o.output)
    throw UserError(
        fmt::format("tokenize: the validation file would be {} too; name another "
                    "with --val-output",
                    o.output));

  const ByteBpeTokenizer tokenizer = ByteBpeTokenizer::from_tokenizer_json(tokenizer_path);
  o.separator = separator_token(tokenizer, separator, "tokenize: --separator", tokenizer_path);
  ProgressLine progress;
  const auto start = std::chrono::steady_clock::now();
  const TokenizeResult r = tokenize_files(
      tokenizer, o, [&](int64_t done, int64_t total) { progress.update(done, total); });
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  fmt::print("tokenize: {} of text, {} in {} ({}/s, {})\n",
             format_bytes(static_cast<double>(r.bytes)), plural(r.documents, "document"),
             format_duration(seconds),
             format_bytes(seconds > 0 ? static_cast<double>(r.bytes) / seconds : 0),
             plural(o.threads, "thread"));
  fmt::print("  {}: {} tokens ({}, vocabulary {}{})\n", o.output, r.train_tokens,
             r.token_bytes == 2 ? "uint16" : "uint32", tokenizer.vocab_size(),
             o.separator >= 0
                 ? fmt::format(", '{}' before each document", tokenizer.decode({o.separator}))
                 : "");
  if (r.val_tokens > 0) fmt::print("  {}: {} tokens\n", o.val_output, r.val_tokens);
  if (r.val_tokens > 0)
    fmt::print("next: dataset: {{name: tokens, train: {}, val: {}}}, model vocab_size: {}\n",
               o.output, o.val_output, tokenizer.vocab_size());
  else  // one file of the two `tokens` reads: which one is the user's to say
    fmt::print(
        "next: dataset: {{name: tokens, train: TRAIN.bin, val: VAL.bin}}, model vocab_size: "
        "{}, with {} as one of the two — `tokens` needs both: tokenize the other the same "
        "way, or cut a validation tail from these files with --val-fraction 0.05\n",
        tokenizer.vocab_size(), o.output);
  return kExitOk;
}

}  // namespace trainyard
