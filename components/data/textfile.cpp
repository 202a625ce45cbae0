#include "components/data/textfile.h"

#include <cmath>
#include <filesystem>
#include <map>
#include <mutex>

#include <fmt/format.h>

#include "common/files.h"
#include "common/fingerprint.h"
#include "common/text.h"
#include "components/data/text_batch.h"
#include "components/data/text_records.h"
#include "components/text/wordpiece.h"

namespace trainyard {

namespace fs = std::filesystem;

namespace {

// One of the files the options name: which option names it, and where it is.
struct NamedFile {
  std::string option;  // "file", "train", "val" or "test"
  std::string path;
};

// Every file read and checked, every record with its class, and the three splits as indices into
// `records`: what validation knows, and what the dataset tokenises.
struct TextFiles {
  std::vector<NamedFile> files;
  std::vector<TextRecord> records;  // file by file, in the order of `files`
  std::vector<int64_t> classes;     // per record
  LabelSet labels;
  std::vector<int64_t> train, validation, test;
  std::string split;  // how the splits were made, for the run's details
};

// A problem with one file: validation reports it at that file's option.
struct FileProblem : UserError {
  FileProblem(std::string option, const std::string& message)
      : UserError(message), option(std::move(option)) {}
  std::string option;
};

std::vector<NamedFile> named_files(const TextFileOptions& o) {
  if (!o.file.empty()) return {{"file", o.file}};
  std::vector<NamedFile> files{{"train", o.train}};
  if (!o.val.empty()) files.push_back({"val", o.val});
  if (!o.test.empty()) files.push_back({"test", o.test});
  return files;
}

TextFormat format_of(const TextFileOptions& o, const NamedFile& file) {
  if (o.format == "csv") return TextFormat::csv;
  if (o.format == "tsv") return TextFormat::tsv;
  if (o.format == "jsonl") return TextFormat::jsonl;
  if (const auto by_extension = text_format_of(file.path)) return *by_extension;
  throw FileProblem(file.option,
                    fmt::format("textfile: cannot tell the format of '{}' from its extension "
                                "(.csv, .tsv, .jsonl); set dataset.format: csv, tsv or jsonl",
                                file.path));
}

// `count` records of `pool` (indices), numpy.random.RandomState(seed).permutation'd, cut into
// [train | validation | test]; a split given by its own file takes nothing from the pool.
void carve(const TextFileOptions& o, const std::vector<int64_t>& pool, bool carve_validation,
           bool carve_test, TextFiles& out, const std::string& pool_name) {
  const auto n = static_cast<int64_t>(pool.size());
  const int64_t n_val =
      carve_validation ? std::llround(o.val_fraction * static_cast<double>(n)) : 0;
  const int64_t n_test = carve_test ? std::llround(o.test_fraction * static_cast<double>(n)) : 0;
  const int64_t n_train = n - n_val - n_test;
  if (n_train < 1 || (carve_validation && n_val < 1) || (carve_test && n_test < 1))
    throw FileProblem(
        o.file.empty() ? "train" : "file",
        fmt::format("textfile: {} holds {} records, too few to split by val_fraction {} and "
                    "test_fraction {} (each split needs at least one); add records or raise the "
                    "fractions",
                    pool_name, n, o.val_fraction, o.test_fraction));
  const std::vector<int64_t> order = numpy_permutation(static_cast<uint32_t>(o.split_seed), n);
  for (int64_t i = 0; i < n; ++i) {
    const int64_t record = pool[static_cast<size_t>(order[static_cast<size_t>(i)])];
    (i < n_train ? out.train : i < n_train + n_val ? out.validation : out.test).push_back(record);
  }
  std::vector<std::string> carved;
  if (carve_validation) carved.push_back(fmt::format("{} validation", n_val));
  if (carve_test) carved.push_back(fmt::format("{} test", n_test));
  out.split = fmt::format(
      "{}: {} records shuffled by numpy.random.RandomState({}).permutation, then {} train, {}",
      pool_name, n, o.split_seed, n_train, join(carved, ", "));
}

TextFiles read_files(const TextFileOptions& o) {
  TextFiles out;
  out.files = named_files(o);
  const TextFields fields{.text = o.text_field, .label = o.label_field};
  std::vector<std::pair<int64_t, int64_t>> ranges;  // per file: [begin, end) of out.records
  for (const NamedFile& file : out.files) {
    std::error_code ec;
    if (!fs::is_regular_file(file.path, ec))
      throw FileProblem(file.option, fmt::format("textfile: no such file '{}'; set dataset.{} to "
                                                 "a CSV, TSV or JSON Lines file",
                                                 file.path, file.option));
    try {
      std::vector<TextRecord> records = read_text_records(file.path, format_of(o, file), fields);
      // The classes are the training file's (the first), before any other file joins it.
      if (out.records.empty()) out.labels = label_set_of(records, file.path);
      const auto begin = static_cast<int64_t>(out.records.size());
      if (out.records.empty())
        out.records = std::move(records);
      else
        for (auto& r : records) out.records.push_back(std::move(r));
      ranges.emplace_back(begin, static_cast<int64_t>(out.records.size()));
    } catch (const FileProblem&) {
      throw;
    } catch (const UserError& e) {
      throw FileProblem(file.option, e.what());
    }
  }
  try {
    if (out.labels.num_classes() < 2)
      throw UserError(
          fmt::format("textfile: {} has one label ('{}'); a classifier needs at least two classes",
                      out.files[0].path, out.labels.names.empty() ? "" : out.labels.names[0]));
  } catch (const FileProblem&) {
    throw;
  } catch (const UserError& e) {
    throw FileProblem(out.files[0].option, e.what());
  }
  for (size_t f = 0; f < out.files.size(); ++f)
    for (int64_t i = ranges[f].first; i < ranges[f].second; ++i) {
      try {
        out.classes.push_back(
            class_id(out.labels, out.records[static_cast<size_t>(i)], out.files[f].path));
      } catch (const UserError& e) {
        throw FileProblem(out.files[f].option, e.what());
      }
    }
  auto indices = [](std::pair<int64_t, int64_t> range) {
    std::vector<int64_t> v;
    for (int64_t i = range.first; i < range.second; ++i) v.push_back(i);
    return v;
  };
  const bool own_validation = !o.val.empty(), own_test = !o.test.empty();
  carve(o, indices(ranges[0]), !own_validation, !own_test, out, out.files[0].path);
  for (size_t f = 1; f < out.files.size(); ++f) {
    (out.files[f].option == "val" ? out.validation : out.test) = indices(ranges[f]);
    out.split += fmt::format("; {} {} records from {}", out.files[f].option,
                             ranges[f].second - ranges[f].first, out.files[f].path);
  }
  if (own_validation && own_test)
    out.split = fmt::format("{} train, {} validation, {} test records, from their own files",
                            out.train.size(), out.validation.size(), out.test.size());
  return out;
}

// "negative=0, positive=1": the classes as the run's details list them.
std::string class_mapping(const LabelSet& labels) {
  if (labels.integers) return fmt::format("integer labels 0..{}", labels.num_classes() - 1);
  std::vector<std::string> pairs;
  for (size_t i = 0; i < labels.names.size(); ++i)
    pairs.push_back(fmt::format("{}={}", labels.names[i], i));
  return join(pairs);
}

// What validation keeps of the files: a sweep asks once per run, so they are read once per process
// while their sizes and times stay the same, and only this summary is kept (not the texts).
struct TextFilesSummary {
  int64_t num_classes = 0;
  std::string note;     // the split and the classes
  std::string option;   // of the file with a problem, or ""
  std::string problem;  // its message
};

TextFilesSummary summarise_files_once(const TextFileOptions& o) {
  std::string key = fmt::format("{}\n{}\n{}\n{}\n{}\n{}", o.format, o.text_field, o.label_field,
                                o.val_fraction, o.test_fraction, o.split_seed);
  for (const NamedFile& file : named_files(o))
    key += fmt::format("\n{}={} {}", file.option, file.path, file_state(file.path));
  static std::mutex mutex;
  static std::map<std::string, TextFilesSummary> known;
  std::lock_guard<std::mutex> lock(mutex);
  auto it = known.find(key);
  if (it != known.end()) return it->second;
  TextFilesSummary summary;
  try {
    const TextFiles files = read_files(o);
    summary.num_classes = files.labels.num_classes();
    summary.note =
        fmt::format("textfile: {}; classes: {}", files.split, class_mapping(files.labels));
  } catch (const FileProblem& e) {
    summary.option = e.option;
    summary.problem = e.what();
  }
  return known.emplace(key, std::move(summary)).first->second;
}

DatasetCapabilities describe_textfile(const TextFileOptions& o) {
  DatasetCapabilities capabilities{.max_length = o.max_length,
                                   .varying_shapes = o.padding == "dynamic"};
  const TextFilesSummary files = summarise_files_once(o);
  if (files.problem.empty()) {
    capabilities.num_classes = files.num_classes;
    capabilities.files.notes.push_back(files.note);
  } else {
    capabilities.files.problems.emplace_back(files.option, files.problem);
  }
  std::error_code ec;
  if (!fs::is_regular_file(o.vocab, ec)) {
    capabilities.files.problems.emplace_back(
        "vocab", fmt::format("textfile: cannot read the vocabulary '{}'; dataset.vocab must be "
                             "the model's vocab.txt (one WordPiece token a line) or its "
                             "tokenizer.json (WordPiece or byte-level BPE)",
                             o.vocab));
    return capabilities;
  }
  try {
    capabilities.vocab_size = load_text_tokenizer(o.vocab)->vocab_size();
  } catch (const UserError& e) {
    capabilities.files.problems.emplace_back("vocab", e.what());
  }
  return capabilities;
}

// What the token cache is keyed by: the files' contents, how they are read, the tokenizer.
std::string cache_key(const TextFileOptions& o, const TextFiles& files,
                      const TextTokenizer& tokenizer) {
  std::string key =
      fmt::format("tokenizer {} max_length {} fields {} {} format {}", tokenizer.cache_id(),
                  o.max_length, o.text_field, o.label_field, o.format);
  for (const NamedFile& file : files.files)
    key += fmt::format(" {} {}", file.option, content_fingerprint(file.path).hash);
  return key;
}

}  // namespace

void register_textfile(Registry& registry) {
  OptionSet<TextFileOptions> options;
  options
      .add("file", &TextFileOptions::file,
           "one CSV, TSV or JSON Lines file, split by val_fraction and test_fraction (or train)",
           names_data())
      .add("train", &TextFileOptions::train, "the training file (or file)", names_data())
      .add("val", &TextFileOptions::val,
           "the validation file; empty: val_fraction of train, carved from it", names_data())
      .add("test", &TextFileOptions::test,
           "the test file; empty: test_fraction of train, carved from it", names_data())
      .add("format", &TextFileOptions::format, "the files' format; auto: by extension",
           one_of({"auto", "csv", "tsv", "jsonl"}))
      .add("text_field", &TextFileOptions::text_field, "the field (column or key) of the text")
      .add("label_field", &TextFileOptions::label_field,
           "the field of the label: integers are class ids; strings are sorted into classes")
      .add("val_fraction", &TextFileOptions::val_fraction,
           "of the records split (file, or train without val) that validate", between(0, 0.9))
      .add("test_fraction", &TextFileOptions::test_fraction,
           "of the records split (file, or train without test) that test", between(0, 0.9))
      .add("split_seed", &TextFileOptions::split_seed,
           "the split's shuffle: numpy.random.RandomState(split_seed).permutation",
           between(0, 4294967295.0))
      .add("vocab", &TextFileOptions::vocab,
           "the model's tokenizer: a BERT vocab.txt, or a tokenizer.json (the uncased BERT "
           "family's WordPiece, or byte-level BPE: RoBERTa's, GPT-2's)",
           names_data(required()))
      .add("max_length", &TextFileOptions::max_length,
           "tokens per text, the frame ([CLS] and [SEP], <s> and </s>) included", at_least(2))
      .add("padding", &TextFileOptions::padding,
           "max_length: pad every text to max_length; dynamic: to the batch's longest",
           one_of({"max_length", "dynamic"}))
      .add("cache", &TextFileOptions::cache,
           "keep the tokenised texts in .trainyard-cache beside the training file")
      .check([](const TextFileOptions& o) -> std::optional<std::string> {
        if (o.file.empty() == o.train.empty())
          return "set dataset.file (one file, split by val_fraction and test_fraction) or "
                 "dataset.train (with dataset.val and dataset.test, or carved from it), not "
                 "both";
        if (!o.file.empty() && (!o.val.empty() || !o.test.empty()))
          return "dataset.file is split into train, val and test: remove dataset.val and "
                 "dataset.test, or name the training file dataset.train";
        if ((!o.file.empty() || o.val.empty()) && o.val_fraction <= 0)
          return "val_fraction 0 leaves no validation records: raise it, or name a dataset.val "
                 "file";
        if ((!o.file.empty() || o.test.empty()) && o.test_fraction <= 0)
          return "test_fraction 0 leaves no test records: raise it, or name a dataset.test file";
        if (o.val_fraction + o.test_fraction >= 1)
          return fmt::format("val_fraction {} and test_fraction {} leave nothing to train on",
                             o.val_fraction, o.test_fraction);
        return std::nullopt;
      });
  registry.add<DataSplits(const DataContext&)>(
      ComponentKind::dataset, "textfile",
      "your texts from CSV, TSV or JSON Lines files (text and label fields), tokenised as BERT "
      "(WordPiece) or RoBERTa (byte-level BPE)",
      options,
      [](const TextFileOptions& o, const DataContext& context) {
        context.check_sequence_fits("textfile", "dataset.max_length", o.max_length);
        std::shared_ptr<const TextFiles> files;
        try {
          files = std::make_shared<const TextFiles>(read_files(o));
        } catch (const FileProblem& e) {
          throw UserError(e.what());
        }
        const std::unique_ptr<TextTokenizer> tokenizer = load_text_tokenizer(o.vocab);
        const TextCorpus corpus{.dataset = "textfile",
                                .unit = "texts",
                                .labels = files->classes,
                                .text_of = [&](size_t i) { return files->records[i].text; },
                                .num_classes = files->labels.num_classes()};
        const std::string key = cache_key(o, *files, *tokenizer);
        const TokenCacheFile cache{
            .enabled = o.cache,
            .path = (fs::path(files->files[0].path).parent_path() / ".trainyard-cache" /
                     fmt::format("textfile-{}.safetensors", stable_hash(key).substr(0, 16)))
                        .string(),
            .key = key};
        DataSplits splits = text_splits(
            tokenize_corpus(corpus, *tokenizer, o.max_length, cache, context),
            {.train = files->train, .validation = files->validation, .test = files->test},
            o.max_length, o.padding == "dynamic", *tokenizer, files->labels.num_classes());
        splits.details = {{"dataset_classes", class_mapping(files->labels)},
                          {"dataset_split", files->split}};
        return splits;
      },
      describe_textfile);
}

}  // namespace trainyard
