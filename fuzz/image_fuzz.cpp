// An image of an image folder, decoded as the loader decodes it: the first byte picks the format
// (even: PNG, odd: JPEG), the rest is the file. Headers, dimensions (decompression bombs), corrupt
// data.
#include "components/data/image_decode.h"
#include "fuzz/fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const bool png = data[0] % 2 == 0;
  const std::string& path = trainyard::fuzz::write_input(data + 1, size - 1, png ? ".png" : ".jpg");
  trainyard::fuzz::expect_clean([&] {
    const trainyard::DecodedImage image = trainyard::decode_image(path);
    if (image.height <= 0 || image.width <= 0 ||
        image.rgb.size() != static_cast<size_t>(image.height * image.width * 3))
      std::abort();
    unsigned sum = 0;  // every pixel readable (ASan checks the buffer's bounds)
    for (size_t i = 0; i < image.rgb.size(); i += 61) sum += image.rgb[i];
    if (sum == 1) std::fprintf(stderr, " ");
  });
  return 0;
}
