// Vision Transformer (Dosovitskiy et al.), laid out as torchvision's VisionTransformer so its
// parameter names match torchvision's state dict: conv_proj, class_token, encoder.pos_embedding,
// encoder.layers.encoder_layer_{i}.{ln_1, self_attention, ln_2, mlp.0, mlp.3}, encoder.ln,
// heads.head. The defaults are vit_b_16.
#pragma once

#include "trainyard/model.h"

namespace trainyard {

struct VitOptions {
  int64_t image_size = 224;
  int64_t patch_size = 16;
  int64_t depth = 12;
  int64_t width = 768;
  int64_t heads = 12;
  int64_t mlp_dim = 3072;
  int64_t num_classes = 1000;
  double dropout = 0.0;
  double attention_dropout = 0.0;
};

void register_vit(Registry& registry);

}  // namespace trainyard
