// Image files to C × H × W bytes: PNG and JPEG decoded with stb_image, converted to
// grayscale or RGB, then resized or centre-cropped to the shape the model takes.
// Thread-safe: the prefetch threads decode side by side.
#pragma once

#include <cstdint>
#include <string>

#include "engine/proto/project.pb.h"

namespace netloom {

struct ImageSpec {
  int32_t channels = 0, height = 0, width = 0;
  proto::ImageSource::Fit fit = proto::ImageSource::RESIZE;

  bool valid() const { return (channels == 1 || channels == 3) && height > 0 && width > 0; }
  int64_t bytesPerImage() const { return int64_t(channels) * height * width; }
};

// Whether a file name has an extension this decoder reads (.png, .jpg, .jpeg, any case).
bool isImageFile(const std::string& name);

// Reads only as much of `path` as its size and format need; false with `error` set
// (what is wrong, without the path) when it is not a PNG or JPEG it can decode.
bool probeImage(const std::string& path, int& width, int& height, int& channels,
                std::string& error);

// Decodes `path` into `out` (spec.bytesPerImage() bytes, channel-major); false with
// `error` set, without the path, when the file cannot be read or decoded.
bool decodeImage(const std::string& path, const ImageSpec& spec, uint8_t* out, std::string& error);

// Converts an interleaved H × W × C image (C as decoded) into `out` per `spec`.
// Exposed so tests can check the resampling on known pixels.
void fitImage(const uint8_t* pixels, int width, int height, int channels, const ImageSpec& spec,
              uint8_t* out);

}  // namespace netloom
