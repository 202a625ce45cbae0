// Decoding JPEG (libjpeg-turbo) and PNG (libpng) files into RGB uint8 tensors [3, H, W].
// Grey, palette and alpha images are converted to RGB. Throws UserError naming the file when it
// cannot be read or decoded.
#pragma once

#include <string>

#include <torch/types.h>

namespace trainyard {

torch::Tensor decode_image(const std::string& path);

// True for the extensions decode_image reads: .jpg, .jpeg, .png, in any case.
bool is_image_file(const std::string& path);

}  // namespace trainyard
