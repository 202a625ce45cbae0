// DistilBERT for sequence classification (Sanh et al.), laid out as Hugging Face's
// DistilBertForSequenceClassification so parameter names match its state dict:
// distilbert.embeddings.{word_embeddings, position_embeddings, LayerNorm},
// distilbert.transformer.layer.{i}.{attention.{q,k,v,out}_lin, sa_layer_norm, ffn.lin{1,2},
// output_layer_norm}, pre_classifier, classifier. The defaults are distilbert-base-uncased.
#pragma once

#include "trainyard/model.h"

namespace trainyard {

struct DistilBertOptions {
  int64_t vocab_size = 30522;
  int64_t max_positions = 512;
  int64_t dim = 768;
  int64_t layers = 6;
  int64_t heads = 12;
  int64_t hidden_dim = 3072;
  double dropout = 0.1;
  double attention_dropout = 0.1;
  double classifier_dropout = 0.2;
  int64_t num_classes = 2;
};

void register_distilbert(Registry& registry);

}  // namespace trainyard
