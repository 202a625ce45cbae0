// Decoding JPEG (libjpeg-turbo) and PNG (libpng) files into RGB pixels. Grey, palette and alpha
// images are converted to RGB. LibTorch-free (trainyard_core), so that the fuzzer drives the very
// code the image folders load with; imagefolder.cpp makes the pixels a tensor.
// Throws UserError naming the file when it cannot be read or decoded, or asks for too much: a
// decompression bomb is refused from its header, before anything is allocated.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace trainyard {

struct DecodedImage {
  int64_t height = 0;
  int64_t width = 0;
  std::vector<uint8_t> rgb{};  // height x width x 3, row-major
};

DecodedImage decode_image(const std::string& path);

// True for the extensions decode_image reads: .jpg, .jpeg, .png, in any case.
bool is_image_file(const std::string& path);

}  // namespace trainyard
