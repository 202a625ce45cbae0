#include "components/text/tokenize_files.h"

#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <thread>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "common/files.h"
#include "components/data/token_file.h"
#include "trainyard/error.h"

namespace trainyard {

static_assert(std::endian::native == std::endian::little, "token files are little-endian");

namespace {

constexpr size_t kPieceBytes = 1 << 20;    // the text one thread encodes at a time
constexpr int64_t kMaxTokens = INT32_MAX;  // llm.c's header counts in an int32

// This machine's name, for temporary files' names.
std::string host_name() {
  char name[256] = {};
  if (gethostname(name, sizeof(name) - 1) != 0) return "host";
  return name;
}

// An output file: written as "<path>.<host>-<pid>.tmp", renamed over `path` by commit(); removed
// if not.
class TokenWriter {
 public:
  TokenWriter(std::string path, int width) : path_(std::move(path)), width_(width) {
    const std::filesystem::path folder = std::filesystem::path(path_).parent_path();
    std::error_code ec;
    if (!folder.empty()) std::filesystem::create_directories(folder, ec);
    file_ = std::fopen(temp().c_str(), "w+b");
    if (file_ == nullptr) throw UserError(file_error("write", temp(), errno));
    const std::vector<int32_t> header(TokenFile::kHeaderInts, 0);
    write(header.data(), header.size() * sizeof(int32_t));
  }
  ~TokenWriter() {
    if (file_ != nullptr) std::fclose(file_);
    if (!committed_) std::remove(temp().c_str());
  }
  TokenWriter(const TokenWriter&) = delete;
  TokenWriter& operator=(const TokenWriter&) = delete;

  void append(const std::vector<int32_t>& ids) {
    if (width_ == 4) {
      write(ids.data(), ids.size() * 4);
      return;
    }
    buffer_.assign(ids.begin(), ids.end());  // each id fits: the vocabulary was checked
    write(buffer_.data(), buffer_.size() * 2);
  }
  // The tokens from `from` on, moved to the end of `other`.
  void move_tail(int64_t from, int64_t count, TokenWriter& other) {
    std::vector<char> bytes(static_cast<size_t>(count * width_));
    if (std::fseek(file_, static_cast<long>(header_bytes() + from * width_), SEEK_SET) != 0 ||
        std::fread(bytes.data(), 1, bytes.size(), file_) != bytes.size())
      throw UserError(file_error("read back", temp(), errno));
    other.write(bytes.data(), bytes.size());
    if (std::fflush(file_) != 0 || ftruncate(fileno(file_), header_bytes() + from * width_) != 0)
      throw UserError(file_error("truncate", temp(), errno));
  }
  // llm.c's header for `tokens` tokens, then the temporary file renamed over the path.
  void commit(int64_t tokens) {
    std::vector<int32_t> header(TokenFile::kHeaderInts, 0);
    header[0] = width_ == 2 ? TokenFile::kMagic : TokenFile::kWideMagic;
    header[1] = width_ == 2 ? 1 : 7;
    header[2] = static_cast<int32_t>(tokens);
    if (std::fseek(file_, 0, SEEK_SET) != 0) throw UserError(file_error("write", temp(), errno));
    write(header.data(), header.size() * sizeof(int32_t));
    const int closed = std::fclose(file_);
    file_ = nullptr;
    if (closed != 0) throw UserError(file_error("write", temp(), errno));
    std::error_code ec;
    std::filesystem::rename(temp(), path_, ec);
    if (ec) throw UserError(file_error("write", path_, ec.value()));
    committed_ = true;
  }

 private:
  static int64_t header_bytes() { return TokenFile::kHeaderInts * 4; }
  // Of this process on this host: two that write one file at once (ranks making one cache, on
  // one node or on several sharing a filesystem) do not mix.
  std::string temp() const { return fmt::format("{}.{}-{}.tmp", path_, host_name(), getpid()); }
  void write(const void* data, size_t bytes) {
    if (std::fwrite(data, 1, bytes, file_) != bytes)
      throw UserError(file_error("write", temp(), errno));
  }

  std::string path_;
  int width_;
  std::FILE* file_ = nullptr;
  std::vector<uint16_t> buffer_;
  bool committed_ = false;
};

// A piece of one input: the text one thread encodes.
struct Piece {
  size_t file = 0;
  size_t begin = 0, end = 0;
  int64_t first_line = 1;  // the line `begin` is on (for .jsonl errors)
};

struct Encoded {
  std::vector<int32_t> ids;
  int64_t documents = 0;
  int64_t bytes = 0;  // the piece's
};

bool is_jsonl(const std::string& path) {
  return std::filesystem::path(path).extension() == ".jsonl";
}

}  // namespace

int64_t separator_token(const ByteBpeTokenizer& tokenizer, const std::string& name,
                        const std::string& option, const std::string& tokenizer_path) {
  if (name == "none") return -1;
  if (name == "auto") {
    for (const char* candidate : {"<|endoftext|>", "</s>"})
      if (tokenizer.token_id(candidate) >= 0) return tokenizer.token_id(candidate);
    return -1;
  }
  const int64_t id = tokenizer.token_id(name);
  if (id < 0)
    throw UserError(fmt::format(
        "{} '{}' is no token of {}; name one of its tokens (such as <|endoftext|>), or none",
        option, name, tokenizer_path));
  return id;
}

std::string default_val_output(const std::string& output) {
  const std::filesystem::path path(output);
  std::string name = path.filename().string();
  const size_t train = name.rfind("train");
  if (train != std::string::npos)
    name.replace(train, 5, "val");
  else
    name = path.stem().string() + "_val" + path.extension().string();
  return (path.parent_path() / name).string();
}

namespace {

// The inputs, mapped: every one first, so that a missing one is said before anything is written.
struct Inputs {
  std::vector<std::unique_ptr<MappedFile>> files;
  int64_t bytes = 0;

  explicit Inputs(const std::vector<std::string>& paths) {
    for (const std::string& input : paths) {
      try {
        files.push_back(std::make_unique<MappedFile>(input));
      } catch (const std::runtime_error& e) {
        throw UserError(fmt::format("tokenize: cannot read {}: {}", input, e.what()));
      }
      bytes += static_cast<int64_t>(files.back()->size());
    }
  }
  std::string_view text(size_t file) const {
    return std::string_view(reinterpret_cast<const char*>(files[file]->data()),
                            files[file]->size());
  }
};

// Cuts the inputs into pieces, in order: about kPieceBytes each, at a line's end where documents
// are lines (or .jsonl records), else where the tokenizer can cut a document (next_cut).
class PieceCutter {
 public:
  PieceCutter(const Inputs& inputs, const TokenizeOptions& options,
              const ByteBpeTokenizer& tokenizer)
      : inputs_(inputs), options_(options), tokenizer_(tokenizer) {}

  // The next piece; false when every input is cut.
  bool next(Piece& piece) {
    while (file_ < inputs_.files.size() && offset_ >= inputs_.files[file_]->size()) {
      ++file_;
      offset_ = 0;
      line_ = 1;
    }
    if (file_ == inputs_.files.size()) return false;
    const std::string_view text = inputs_.text(file_);
    size_t end = text.size();
    if (offset_ + kPieceBytes < text.size()) {
      if (options_.documents == TokenizeOptions::Documents::line ||
          is_jsonl(options_.inputs[file_])) {
        const size_t newline = text.find('\n', offset_ + kPieceBytes);
        end = newline == std::string_view::npos ? text.size() : newline + 1;
      } else {
        end = tokenizer_.next_cut(text, offset_ + kPieceBytes);
      }
    }
    piece = {file_, offset_, end, line_};
    line_ += static_cast<int64_t>(std::count(text.begin() + static_cast<ptrdiff_t>(offset_),
                                             text.begin() + static_cast<ptrdiff_t>(end), '\n'));
    offset_ = end;
    return true;
  }

 private:
  const Inputs& inputs_;
  const TokenizeOptions& options_;
  const ByteBpeTokenizer& tokenizer_;
  size_t file_ = 0, offset_ = 0;
  int64_t line_ = 1;
};

// One piece's ids, each document after the separator (a file's, a line's or a .jsonl record's).
Encoded encode_piece(const ByteBpeTokenizer& tokenizer, const TokenizeOptions& options,
                     const Inputs& inputs, const Piece& piece) {
  Encoded encoded;
  encoded.bytes = static_cast<int64_t>(piece.end - piece.begin);
  const std::string& path = options.inputs[piece.file];
  const std::string_view text =
      inputs.text(piece.file).substr(piece.begin, piece.end - piece.begin);
  auto document = [&](std::string_view doc) {
    if (options.separator >= 0) encoded.ids.push_back(static_cast<int32_t>(options.separator));
    tokenizer.encode_ordinary(doc, encoded.ids);
    ++encoded.documents;
  };
  if (options.documents != TokenizeOptions::Documents::line && !is_jsonl(path)) {
    // The file is one document.
    if (piece.begin == 0 && options.separator >= 0)
      encoded.ids.push_back(static_cast<int32_t>(options.separator));
    tokenizer.encode_ordinary(text, encoded.ids, /*continues=*/piece.begin > 0);
    encoded.documents = piece.begin == 0 ? 1 : 0;
    return encoded;
  }
  int64_t number = piece.first_line;
  for (size_t start = 0; start < text.size(); ++number) {
    size_t stop = text.find('\n', start);
    if (stop == std::string_view::npos) stop = text.size();
    std::string_view current = text.substr(start, stop - start);
    start = stop + 1;
    if (!current.empty() && current.back() == '\r') current.remove_suffix(1);
    if (!is_jsonl(path)) {
      if (!current.empty()) document(current);
      continue;
    }
    if (current.find_first_not_of(" \t") == std::string_view::npos) continue;
    const nlohmann::json record = nlohmann::json::parse(current, nullptr, false);
    if (record.is_discarded() || !record.is_object() || !record.contains("text") ||
        !record["text"].is_string())
      throw UserError(fmt::format(
          "tokenize: {} line {}: {}; each line of a .jsonl file is an object whose \"text\" is "
          "a document (as {{\"text\": \"...\"}})",
          path, number,
          record.is_discarded() ? "not JSON" : "no \"text\" string in this line's object"));
    document(record["text"].get_ref<const std::string&>());
  }
  return encoded;
}

// The last val_fraction of `tokens` (at least one token when it is above 0) moved from `train` to
// the validation file; then both committed.
void split_and_commit(TokenWriter& train, int64_t tokens, const TokenizeOptions& options,
                      TokenizeResult& result) {
  if (tokens == 0)
    throw UserError(fmt::format("tokenize: {} hold no text to tokenise",
                                options.inputs.size() == 1 ? options.inputs[0] : "the files"));
  int64_t val = 0;
  if (options.val_fraction > 0)
    val = std::max<int64_t>(1, std::llround(static_cast<double>(tokens) * options.val_fraction));
  if (tokens - val < 1)
    throw UserError(
        fmt::format("tokenize: {} tokens leave none for training with "
                    "--val-fraction {}",
                    tokens, options.val_fraction));
  if (val > 0) {
    TokenWriter validation(
        options.val_output.empty() ? default_val_output(options.output) : options.val_output,
        result.token_bytes);
    train.move_tail(tokens - val, val, validation);
    validation.commit(val);
  }
  train.commit(tokens - val);
  result.train_tokens = tokens - val;
  result.val_tokens = val;
}

}  // namespace

TokenizeResult tokenize_files(const ByteBpeTokenizer& tokenizer, const TokenizeOptions& options,
                              const std::function<void(int64_t, int64_t)>& progress) {
  if (options.inputs.empty()) throw UserError("tokenize: no text files given");
  if (!(options.val_fraction >= 0 && options.val_fraction < 1))
    throw UserError(
        fmt::format("tokenize: --val-fraction {} is not in [0, 1)", options.val_fraction));
  const Inputs inputs(options.inputs);
  TokenizeResult result;
  result.bytes = inputs.bytes;
  result.token_bytes = tokenizer.vocab_size() <= 65536 ? 2 : 4;
  TokenWriter train(options.output, result.token_bytes);
  PieceCutter cutter(inputs, options, tokenizer);  // used under the lock

  // Threads encode pieces; this thread writes them in order, at most `window` ahead.
  std::mutex mutex;
  std::condition_variable changed;
  std::map<int64_t, Encoded> done;
  int64_t handed_out = 0, written = 0;
  bool no_more = false;
  std::exception_ptr failure;
  const int threads = std::max(1, options.threads);
  const int64_t window = 4 * threads;
  auto work = [&] {
    try {
      while (true) {
        Piece piece;
        int64_t index;
        {
          std::unique_lock lock(mutex);
          changed.wait(lock, [&] { return handed_out - written < window || failure; });
          if (failure || !cutter.next(piece)) {
            no_more = true;
            changed.notify_all();
            return;
          }
          index = handed_out++;
        }
        Encoded encoded = encode_piece(tokenizer, options, inputs, piece);
        std::lock_guard lock(mutex);
        done.emplace(index, std::move(encoded));
        changed.notify_all();
      }
    } catch (...) {
      std::lock_guard lock(mutex);
      if (!failure) failure = std::current_exception();
      changed.notify_all();
    }
  };
  std::vector<std::thread> pool;
  for (int i = 0; i < threads; ++i) pool.emplace_back(work);
  int64_t tokens = 0, bytes_done = 0;
  try {
    while (true) {
      Encoded encoded;
      {
        std::unique_lock lock(mutex);
        changed.wait(lock, [&] {
          return failure || done.count(written) || (no_more && written == handed_out);
        });
        if (failure) break;
        if (!done.count(written)) break;  // every piece written
        encoded = std::move(done[written]);
        done.erase(written);
        ++written;
        changed.notify_all();
      }
      tokens += static_cast<int64_t>(encoded.ids.size());
      result.documents += encoded.documents;
      if (tokens > kMaxTokens)
        throw UserError(fmt::format(
            "tokenize: more than {} tokens, what llm.c's header can count; give the files to "
            "several `trainyard tokenize` commands (one output each)",
            kMaxTokens));
      if (result.token_bytes == 2)
        for (int32_t id : encoded.ids)
          if (id > 65535) throw std::logic_error("a token beyond uint16 in a uint16 file");
      train.append(encoded.ids);
      bytes_done += encoded.bytes;
      progress(bytes_done, result.bytes);
    }
  } catch (...) {
    std::lock_guard lock(mutex);
    if (!failure) failure = std::current_exception();
    changed.notify_all();
  }
  for (std::thread& thread : pool) thread.join();
  if (failure) std::rethrow_exception(failure);
  split_and_commit(train, tokens, options, result);
  progress(result.bytes, result.bytes);
  return result;
}

}  // namespace trainyard
