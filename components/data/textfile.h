// Users' own text-classification data: CSV, TSV or JSON Lines files with a text field and a label
// field (components/data/text_records.h reads them as Python's csv and json modules do). Either
// `train` (with `val` and `test` files, each carved from the training file by its fraction when not
// given) or one `file` split by `val_fraction` and `test_fraction`, shuffled by numpy's
// RandomState(split_seed).permutation, so the split can be repeated in Python. Labels that are all
// integers are class ids; otherwise the training file's labels, sorted, are the classes (the
// mapping is listed in the run's details). Every file is read and checked at validation, so a
// malformed line is an error at `validate`, naming the file and line, before anything trains.
// Texts are tokenised with the model's WordPiece vocab.txt (or its tokenizer.json, for the uncased
// BERT family) and cached beside the data, keyed by the files' contents, the vocabulary and
// max_length.
#pragma once

#include <string>

#include "trainyard/dataset.h"

namespace trainyard {

struct TextFileOptions {
  std::string file;   // one file, split by the fractions below
  std::string train;  // or a training file ...
  std::string val;    // ... with validation and test files, carved from it when not given
  std::string test;
  std::string format = "auto";  // auto (by extension) | csv | tsv | jsonl
  std::string text_field = "text";
  std::string label_field = "label";
  double val_fraction = 0.1;
  double test_fraction = 0.1;
  int64_t split_seed = 0;
  std::string vocab;
  int64_t max_length = 512;
  std::string padding = "dynamic";
  bool cache = true;
};

void register_textfile(Registry& registry);

}  // namespace trainyard
