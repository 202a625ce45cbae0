#include "components/data/image_decode.h"

#include <png.h>
#include <turbojpeg.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <memory>

#include <fmt/format.h>

#include "common/files.h"
#include "trainyard/error.h"

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

std::string read_bytes(const std::string& path) {
  std::error_code ec;
  if (const uintmax_t size = std::filesystem::file_size(path, ec); !ec && size > kMaxFileBytes)
    throw UserError(fmt::format("image {}: {} bytes, more than the limit of {} for an image", path,
                                size, kMaxFileBytes));
  std::ifstream in(path, std::ios::binary);
  if (!in) throw UserError(fmt::format("image {}: cannot read the file", path));
  std::string bytes;
  if (!read_at_most(in, kMaxFileBytes, bytes))  // a device or a pipe: its size said nothing
    throw UserError(
        fmt::format("image {}: more than the limit of {} bytes for an image", path, kMaxFileBytes));
  return bytes;
}

DecodedImage decode_jpeg(const std::string& path) {
  const std::string file = read_bytes(path);
  const auto* bytes = reinterpret_cast<const unsigned char*>(file.data());
  std::unique_ptr<void, int (*)(tjhandle)> handle(tjInitDecompress(), tjDestroy);
  int width = 0, height = 0, subsampling = 0, colorspace = 0;
  if (tjDecompressHeader3(handle.get(), bytes, static_cast<unsigned long>(file.size()), &width,
                          &height, &subsampling, &colorspace) != 0)
    throw UserError(
        fmt::format("image {}: not a readable JPEG ({})", path, tjGetErrorStr2(handle.get())));
  check_size(path, width, height);
  DecodedImage image{.height = height, .width = width};
  image.rgb.resize(static_cast<size_t>(height) * width * 3);
  if (tjDecompress2(handle.get(), bytes, static_cast<unsigned long>(file.size()), image.rgb.data(),
                    width, 0, height, TJPF_RGB, TJFLAG_ACCURATEDCT) != 0 &&
      tjGetErrorCode(handle.get()) == TJERR_FATAL)
    throw UserError(
        fmt::format("image {}: the JPEG data is corrupt ({})", path, tjGetErrorStr2(handle.get())));
  return image;
}

DecodedImage decode_png(const std::string& path) {
  const std::string file = read_bytes(path);
  const auto* bytes = reinterpret_cast<const unsigned char*>(file.data());
  png_image png{};
  png.version = PNG_IMAGE_VERSION;
  if (!png_image_begin_read_from_memory(&png, bytes, file.size()))
    throw UserError(fmt::format("image {}: not a readable PNG ({})", path, png.message));
  png.format = PNG_FORMAT_RGB;  // grey, palette and alpha become RGB (alpha composited on black)
  try {
    check_size(path, png.width, png.height);
  } catch (...) {
    png_image_free(&png);
    throw;
  }
  DecodedImage image{.height = png.height, .width = png.width};
  image.rgb.resize(PNG_IMAGE_SIZE(png));
  if (!png_image_finish_read(&png, nullptr, image.rgb.data(), 0, nullptr)) {
    const std::string message = png.message;
    png_image_free(&png);
    throw UserError(fmt::format("image {}: the PNG data is corrupt ({})", path, message));
  }
  return image;
}

}  // namespace

bool is_image_file(const std::string& path) {
  std::string extension = lower_extension(path);
  return extension == ".jpg" || extension == ".jpeg" || extension == ".png";
}

DecodedImage decode_image(const std::string& path) {
  std::string extension = lower_extension(path);
  if (extension == ".png") return decode_png(path);
  if (extension == ".jpg" || extension == ".jpeg") return decode_jpeg(path);
  throw UserError(fmt::format("image {}: unsupported format (JPEG and PNG are read)", path));
}

}  // namespace trainyard
