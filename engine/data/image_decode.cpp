// stb_image, limited to PNG and JPEG, and the resampling that fits a decoded image to
// the model's input. Only this file compiles stb_image's implementation.
#include "engine/data/image_decode.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <vector>

#define STB_IMAGE_IMPLEMENTATION
#define STBI_ONLY_PNG
#define STBI_ONLY_JPEG
#define STBI_NO_LINEAR
#define STBI_NO_HDR
#define STBI_ASSERT(x) ((void)0)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-function"
#pragma GCC diagnostic ignored "-Wsign-compare"
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"
#include <stb/stb_image.h>
#pragma GCC diagnostic pop

namespace netloom {
namespace {

// Images larger than this (per side) are refused rather than decoded into gigabytes.
constexpr int kMaxSide = 1 << 14;

struct FileCloser {
  void operator()(FILE* f) const { std::fclose(f); }
};
using File = std::unique_ptr<FILE, FileCloser>;

File openFile(const std::string& path, std::string& error) {
  File f(std::fopen(path.c_str(), "rb"));
  if (!f) error = "cannot be opened";
  return f;
}

std::string reason(const char* what) {
  const char* r = stbi_failure_reason();
  return std::string(what) + (r ? std::string(" (") + r + ")" : std::string());
}

bool sizeOk(int width, int height, std::string& error) {
  if (width <= kMaxSide && height <= kMaxSide) return true;
  error = "is " + std::to_string(width) + "×" + std::to_string(height) + " pixels, more than the " +
          std::to_string(kMaxSide) + " per side decoded";
  return false;
}

// A JPEG's Huffman tables, checked before stb_image builds them: a table that claims
// more than 256 codes would be written past the end of stb's (bounded) arrays. Walks
// the markers, skipping entropy-coded data, to every DHT segment; a file cut short
// is left for the decoder to refuse.
bool jpegTablesOk(const std::vector<stbi_uc>& b) {
  // stb takes a file for a JPEG when its first marker, after any 0xFF fill bytes, is
  // the start of an image: every file opening with 0xFF is walked.
  if (b.empty() || b[0] != 0xFF) return true;
  // Past the end of the bytes, stb reads zeros: so does this.
  auto at = [&](size_t i) -> size_t { return i < b.size() ? b[i] : 0; };
  size_t i = 0;
  while (i + 1 < b.size()) {
    if (b[i] != 0xFF) {  // entropy-coded data: on to the next marker
      ++i;
      continue;
    }
    const size_t marker = b[i + 1];
    if (marker == 0xFF) {  // fill bytes before a marker
      ++i;
      continue;
    }
    if (marker == 0x00 || marker == 0x01 || (marker >= 0xD0 && marker <= 0xD8)) {
      i += 2;  // a stuffed byte, TEM, a restart or a start of image: no length follows
      continue;
    }
    if (marker == 0xD9) return true;  // end of image
    const size_t length = at(i + 2) << 8 | at(i + 3);
    if (marker == 0xC4) {
      // As stb reads them: each table's 16 counts, then that many values, for as
      // long as the segment's length says, even past the end of the file.
      for (size_t t = i + 4, end = i + 2 + length; t < end && t < b.size();) {
        size_t codes = 0;
        for (size_t k = 1; k <= 16; ++k) codes += at(t + k);
        if (codes > 256) return false;
        t += 17 + codes;
      }
    }
    i += 2 + std::max<size_t>(length, 2);
  }
  return true;
}

// A PNG's chunks, checked before stb_image reads them: a chunk that claims to run
// past the end of the file would have stb grow its buffer towards its 1 GiB limit
// for data that is not there.
bool pngChunksFit(const std::vector<stbi_uc>& b) {
  static const stbi_uc kSignature[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1A, '\n'};
  if (b.size() < 8 || !std::equal(kSignature, kSignature + 8, b.begin())) return true;
  for (size_t i = 8; i + 12 <= b.size();) {
    const size_t length =
        size_t(b[i]) << 24 | size_t(b[i + 1]) << 16 | size_t(b[i + 2]) << 8 | b[i + 3];
    if (length > b.size() - i - 12) return false;
    if (std::equal(b.begin() + long(i) + 4, b.begin() + long(i) + 8, "IEND")) return true;
    i += 12 + length;
  }
  return true;
}

// Reads `path`, all of it or its first `limit` bytes.
bool readBytes(const std::string& path, size_t limit, std::vector<stbi_uc>& bytes,
               std::string& error) {
  File f = openFile(path, error);
  if (!f) return false;
  long size = -1;
  if (std::fseek(f.get(), 0, SEEK_END) == 0) size = std::ftell(f.get());
  std::rewind(f.get());
  if (size <= 0 || size >= (1L << 31)) {
    error = size == 0 ? "is empty" : "cannot be read";
    return false;
  }
  bytes.resize(std::min(size_t(size), limit));
  if (std::fread(bytes.data(), 1, bytes.size(), f.get()) != bytes.size()) {
    error = "cannot be read";
    return false;
  }
  return true;
}

// The image's size and channels, from its header in `bytes`.
bool header(const std::vector<stbi_uc>& bytes, int& width, int& height, int& channels,
            std::string& error) {
  if (!jpegTablesOk(bytes)) {
    error = "is a corrupt JPEG (a Huffman table holds more than 256 codes)";
    return false;
  }
  if (!stbi_info_from_memory(bytes.data(), int(bytes.size()), &width, &height, &channels)) {
    error = reason("is not a PNG or JPEG image this decoder reads");
    return false;
  }
  return sizeOk(width, height, error);
}

// Bilinear sampling with pixel centres aligned (as PIL and torchvision resize without
// antialiasing): out(x) reads the source at (x + 0.5) * in / out - 0.5.
struct Axis {
  std::vector<int> lo, hi;
  std::vector<float> t;

  Axis(int outSize, double start, double span, int inSize) : lo(outSize), hi(outSize), t(outSize) {
    const double step = span / outSize;
    for (int i = 0; i < outSize; ++i) {
      double src = start + (i + 0.5) * step - 0.5;
      src = std::clamp(src, 0.0, double(inSize - 1));
      lo[i] = int(std::floor(src));
      hi[i] = std::min(lo[i] + 1, inSize - 1);
      t[i] = float(src - lo[i]);
    }
  }
};

}  // namespace

bool isImageFile(const std::string& name) {
  auto dot = name.rfind('.');
  if (dot == std::string::npos) return false;
  std::string ext = name.substr(dot + 1);
  for (char& c : ext) c = char(std::tolower(static_cast<unsigned char>(c)));
  return ext == "png" || ext == "jpg" || ext == "jpeg";
}

bool probeImage(const std::string& path, int& width, int& height, int& channels,
                std::string& error) {
  // The header is near the start; a JPEG whose metadata pushes it further is read whole.
  constexpr size_t kHead = 64 << 10;
  std::vector<stbi_uc> bytes;
  if (!readBytes(path, kHead, bytes, error)) return false;
  if (header(bytes, width, height, channels, error)) return true;
  if (bytes.size() < kHead) return false;
  return readBytes(path, SIZE_MAX, bytes, error) && header(bytes, width, height, channels, error);
}

void fitImage(const uint8_t* pixels, int width, int height, int channels, const ImageSpec& spec,
              uint8_t* out) {
  // The region of the source that fills the output: all of it, or for a centre crop
  // the centred part with the output's aspect ratio.
  double x0 = 0, y0 = 0, w = width, h = height;
  if (spec.fit == proto::ImageSource::CENTER_CROP) {
    const double scale = std::max(double(spec.width) / width, double(spec.height) / height);
    w = spec.width / scale;
    h = spec.height / scale;
    x0 = (width - w) / 2;
    y0 = (height - h) / 2;
  }
  const Axis xs(spec.width, x0, w, width), ys(spec.height, y0, h, height);
  const int64_t plane = int64_t(spec.height) * spec.width;
  const bool same = spec.width == width && spec.height == height && x0 == 0 && y0 == 0;
  for (int c = 0; c < spec.channels; ++c) {
    uint8_t* dst = out + c * plane;
    for (int y = 0; y < spec.height; ++y) {
      const uint8_t* rowLo = pixels + int64_t(ys.lo[y]) * width * channels;
      const uint8_t* rowHi = pixels + int64_t(ys.hi[y]) * width * channels;
      for (int x = 0; x < spec.width; ++x) {
        if (same) {
          dst[int64_t(y) * spec.width + x] = rowLo[int64_t(x) * channels + c];
          continue;
        }
        const int a = xs.lo[x] * channels + c, b = xs.hi[x] * channels + c;
        const float top = rowLo[a] + (rowLo[b] - rowLo[a]) * xs.t[x];
        const float bottom = rowHi[a] + (rowHi[b] - rowHi[a]) * xs.t[x];
        const float v = top + (bottom - top) * ys.t[y];
        dst[int64_t(y) * spec.width + x] = uint8_t(std::clamp(std::lround(v), 0L, 255L));
      }
    }
  }
}

bool decodeImage(const std::string& path, const ImageSpec& spec, uint8_t* out, std::string& error) {
  // One read of the whole file: stb's own file reader refills a small buffer, which
  // costs more than the decoding for the small images datasets often hold.
  std::vector<stbi_uc> bytes;
  int width = 0, height = 0, channels = 0;
  if (!readBytes(path, SIZE_MAX, bytes, error) || !header(bytes, width, height, channels, error))
    return false;
  if (!pngChunksFit(bytes)) {
    error = "is a corrupt PNG (a chunk runs past the end of the file)";
    return false;
  }
  // stb converts to the channels asked for: grey from RGB by luminance, RGB from grey
  // by repetition; alpha is dropped.
  std::unique_ptr<stbi_uc, void (*)(void*)> pixels(
      stbi_load_from_memory(bytes.data(), int(bytes.size()), &width, &height, &channels,
                            spec.channels),
      stbi_image_free);
  if (!pixels) {
    error = reason("cannot be decoded");
    return false;
  }
  fitImage(pixels.get(), width, height, spec.channels, spec, out);
  return true;
}

}  // namespace netloom
