// Text files to token files in llm.c's format: what `trainyard tokenize` runs.
//
//   documents  a .txt file is one document (or each of its lines, with Documents::line); a .jsonl
//              file's lines are documents, each a JSON object whose "text" is the document
//   separator  a token written before each document, as llm.c's data scripts put <|endoftext|>
//   output     llm.c's format (components/data/token_file.h): uint16 tokens where the vocabulary
//              fits (magic 20240520, version 1), else uint32 (20240801, version 7); the last
//              val_fraction of the tokens go to a second file of the same format
//
// The text is cut into pieces of about a megabyte where the ids cannot change
// (ByteBpeTokenizer::next_cut, or between lines), encoded by `threads` threads and written in
// order, so memory stays a few megabytes per thread whatever the input's size. Files are written
// whole or not at all (a temporary file renamed at the end).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "components/text/byte_bpe.h"

namespace trainyard {

struct TokenizeOptions {
  std::vector<std::string> inputs{};                                // .txt or .jsonl files
  enum class Documents { file, line } documents = Documents::file;  // for .txt files
  int64_t separator = -1;  // the token before each document; -1: none
  double val_fraction = 0;
  std::string output{};      // the training tokens
  std::string val_output{};  // the validation tokens, when val_fraction > 0
  int threads = 1;
};

struct TokenizeResult {
  int64_t bytes = 0;  // read from the inputs
  int64_t documents = 0;
  int64_t train_tokens = 0, val_tokens = 0;
  int token_bytes = 2;  // 2 (uint16) or 4 (uint32)
};

// Writes the token files. `progress(bytes_done, bytes_total)` is called from the calling thread as
// pieces are written. UserError naming the file (and line, for .jsonl) for an input that cannot be
// read or is not what its extension says, text that gives no tokens, or more tokens than llm.c's
// header can count; the outputs are then left as they were.
TokenizeResult tokenize_files(const ByteBpeTokenizer& tokenizer, const TokenizeOptions& options,
                              const std::function<void(int64_t, int64_t)>& progress);

// The separator a name means: "auto" picks <|endoftext|> (GPT-2's), else </s> (RoBERTa's), else
// none (-1); "none" is none; any other text must be one token of the tokenizer, else UserError
// "<option> '<name>' is no token of <tokenizer_path>; ...".
int64_t separator_token(const ByteBpeTokenizer& tokenizer, const std::string& name,
                        const std::string& option, const std::string& tokenizer_path);

// The validation file beside `output`: "train" in its name becomes "val"
// (data/shakespeare_train.bin
// -> data/shakespeare_val.bin), else "_val" goes before the extension (tokens.bin ->
// tokens_val.bin).
std::string default_val_output(const std::string& output);

}  // namespace trainyard
