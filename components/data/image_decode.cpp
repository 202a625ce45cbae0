#include "components/data/image_decode.h"

#include <png.h>
#include <turbojpeg.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <memory>
#include <vector>

#include <fmt/format.h>

#include "common/error.h"

namespace trainyard {

namespace {

std::string lower_extension(const std::string& path) {
  std::string extension = std::filesystem::path(path).extension().string();
  std::transform(extension.begin(), extension.end(), extension.begin(),
                 [](unsigned char c) { return std::tolower(c); });
  return extension;
}

// A decompression bomb (a 50,000 x 50,000 PNG of a few kilobytes asks for 7.5 GB) is refused from
// its header, before anything is allocated; so is a file too big to be a training image.
constexpr int64_t kMaxPixels = int64_t{1} << 26;  // 64 megapixels: 8192 x 8192
constexpr uintmax_t kMaxFileBytes = uintmax_t{256} << 20;

void check_size(const std::string& path, int64_t width, int64_t height) {
  if (width <= 0 || height <= 0 || width * height > kMaxPixels)
    throw UserError(fmt::format(
        "image {}: {} x {} pixels, more than the limit of {} (8192 x 8192); a decompression bomb, "
        "or an image to shrink before training",
        path, width, height, kMaxPixels));
}

std::vector<unsigned char> read_bytes(const std::string& path) {
  std::error_code ec;
  if (const uintmax_t size = std::filesystem::file_size(path, ec); !ec && size > kMaxFileBytes)
    throw UserError(fmt::format("image {}: {} bytes, more than the limit of {} for an image", path,
                                size, kMaxFileBytes));
  std::ifstream in(path, std::ios::binary);
  if (!in) throw UserError(fmt::format("image {}: cannot read the file", path));
  return std::vector<unsigned char>(std::istreambuf_iterator<char>(in), {});
}

torch::Tensor decode_jpeg(const std::string& path) {
  std::vector<unsigned char> bytes = read_bytes(path);
  std::unique_ptr<void, int (*)(tjhandle)> handle(tjInitDecompress(), tjDestroy);
  int width = 0, height = 0, subsampling = 0, colorspace = 0;
  if (tjDecompressHeader3(handle.get(), bytes.data(), static_cast<unsigned long>(bytes.size()),
                          &width, &height, &subsampling, &colorspace) != 0)
    throw UserError(
        fmt::format("image {}: not a readable JPEG ({})", path, tjGetErrorStr2(handle.get())));
  check_size(path, width, height);
  auto image = torch::empty({height, width, 3}, torch::kUInt8);
  if (tjDecompress2(handle.get(), bytes.data(), static_cast<unsigned long>(bytes.size()),
                    image.data_ptr<uint8_t>(), width, 0, height, TJPF_RGB,
                    TJFLAG_ACCURATEDCT) != 0 &&
      tjGetErrorCode(handle.get()) == TJERR_FATAL)
    throw UserError(
        fmt::format("image {}: the JPEG data is corrupt ({})", path, tjGetErrorStr2(handle.get())));
  return image.permute({2, 0, 1}).contiguous();
}

torch::Tensor decode_png(const std::string& path) {
  png_image image{};
  image.version = PNG_IMAGE_VERSION;
  if (!png_image_begin_read_from_file(&image, path.c_str()))
    throw UserError(fmt::format("image {}: not a readable PNG ({})", path, image.message));
  image.format = PNG_FORMAT_RGB;  // grey, palette and alpha become RGB (alpha composited on black)
  try {
    check_size(path, image.width, image.height);
  } catch (...) {
    png_image_free(&image);
    throw;
  }
  auto pixels = torch::empty(
      {static_cast<int64_t>(image.height), static_cast<int64_t>(image.width), 3}, torch::kUInt8);
  if (!png_image_finish_read(&image, nullptr, pixels.data_ptr<uint8_t>(), 0, nullptr)) {
    std::string message = image.message;
    png_image_free(&image);
    throw UserError(fmt::format("image {}: the PNG data is corrupt ({})", path, message));
  }
  return pixels.permute({2, 0, 1}).contiguous();
}

}  // namespace

bool is_image_file(const std::string& path) {
  std::string extension = lower_extension(path);
  return extension == ".jpg" || extension == ".jpeg" || extension == ".png";
}

torch::Tensor decode_image(const std::string& path) {
  std::string extension = lower_extension(path);
  if (extension == ".png") return decode_png(path);
  if (extension == ".jpg" || extension == ".jpeg") return decode_jpeg(path);
  throw UserError(fmt::format("image {}: unsupported format (JPEG and PNG are read)", path));
}

}  // namespace trainyard
