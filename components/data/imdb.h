// The IMDB movie-review dataset from its aclImdb folder: train|test / pos|neg / *.txt.
// The reference split, exactly: the 50,000 reviews read in the studies' order (test/pos, test/neg,
// train/pos, train/neg, files sorted by name), permuted as numpy's RandomState(1).permutation,
// then the first 35,000 train, the next 5,000 validate and the rest test; pos = 1, neg = 0.
// Reviews are tokenised once (BERT WordPiece, all cores) and cached beside the data, keyed by the
// vocabulary's hash and max_length, so later runs start training in seconds.
#pragma once

#include <string>

#include "trainyard/dataset.h"

namespace trainyard {

struct ImdbOptions {
  std::string root;
  std::string vocab;
  int64_t max_length = 512;
  std::string padding = "max_length";
  int64_t train_size = 35000;
  int64_t val_size = 5000;
  bool cache = true;
};

void register_imdb(Registry& registry);

}  // namespace trainyard
