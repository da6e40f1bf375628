// Augmenter: per-sample random crop, flip and translation of C×H×W images. Every
// stage is a whole-pixel shift or mirror, so the three fold into one mapping per
// axis and a sample is copied row by row, never pixel by pixel through a table.
#include <algorithm>
#include <cstring>

#include "engine/data/dataset.h"
#include "kernels/core/rng.h"

namespace netloom {
namespace {

// Keeps augmentation draws apart from the shuffle, which keys on (seed, epoch) alone.
constexpr uint64_t kAugmentStream = 0xA06;

// Where output coordinates [lo, hi) along one axis read from: src = out + offset.
// Outside [lo, hi) a stage read past the edge, so the value is zero.
struct AxisMap {
  int64_t offset = 0, lo = 0, hi = 0;
};

// Crop by `crop` (out[y] = in[y + crop]) then translate by `shift` (out[y] = in[y - shift]),
// each filling with zero, composed exactly: a pixel survives only if both reads were inside.
AxisMap composeShifts(int64_t n, int64_t crop, int64_t shift) {
  AxisMap m;
  m.offset = crop - shift;
  m.lo = std::max<int64_t>({0, shift, shift - crop});
  m.hi = std::min<int64_t>({n, n + shift, n + shift - crop});
  if (m.hi < m.lo) m.hi = m.lo;
  return m;
}

struct Draws {
  AxisMap rows, cols;
  bool flip = false;
};

// A fixed draw order (crop y, crop x, shift y, shift x, flip), each only when its stage is on.
Draws draw(const Augmenter& a, int64_t h, int64_t w, uint64_t key) {
  Rng rng(key);
  auto symmetric = [&rng](int32_t t) {
    return static_cast<int64_t>(rng.below(2 * static_cast<uint64_t>(t) + 1)) - t;
  };
  int64_t cropY = 0, cropX = 0, shiftY = 0, shiftX = 0;
  if (a.cropPadding > 0) {
    cropY = symmetric(a.cropPadding);
    cropX = symmetric(a.cropPadding);
  }
  if (a.maxTranslation > 0) {
    shiftY = symmetric(a.maxTranslation);
    shiftX = symmetric(a.maxTranslation);
  }
  Draws d;
  d.rows = composeShifts(h, cropY, shiftY);
  d.cols = composeShifts(w, cropX, shiftX);
  d.flip = a.horizontalFlip && (rng.next() >> 63) != 0;
  return d;
}

template <class T>
void applyTo(const Augmenter& a, const T* src, T* dst, const Shape& shape, uint64_t key) {
  const int64_t c = shape[0], h = shape[1], w = shape[2];
  const Draws d = draw(a, h, w, key);
  const int64_t x0 = d.cols.lo, x1 = d.cols.hi;
  for (int64_t ch = 0; ch < c; ++ch) {
    const T* plane = src + ch * h * w;
    for (int64_t y = 0; y < h; ++y) {
      T* out = dst + (ch * h + y) * w;
      std::fill(out, out + w, T(0));
      if (y < d.rows.lo || y >= d.rows.hi || x0 >= x1) continue;
      const T* in = plane + (y + d.rows.offset) * w;
      const int64_t off = d.cols.offset;
      // Unflipped: out[x] = in[x + off] for x in [x0, x1). Flipped: out[w-1-x] takes that value.
      if (!d.flip) {
        std::memcpy(out + x0, in + x0 + off, static_cast<size_t>(x1 - x0) * sizeof(T));
      } else {
        for (int64_t x = x0; x < x1; ++x) out[w - 1 - x] = in[x + off];
      }
    }
  }
}

}  // namespace

Result<Augmenter> Augmenter::fromProto(const proto::Augmentation& def) {
  if (def.crop_padding() < 0) {
    return makeError("augmentation crop_padding must not be negative, got " +
                     std::to_string(def.crop_padding()));
  }
  if (def.max_translation() < 0) {
    return makeError("augmentation max_translation must not be negative, got " +
                     std::to_string(def.max_translation()));
  }
  Augmenter a;
  a.cropPadding = def.crop_padding();
  a.horizontalFlip = def.horizontal_flip();
  a.maxTranslation = def.max_translation();
  return a;
}

Status Augmenter::check(const Shape& sampleShape) const {
  if (!enabled()) return {};
  if (cropPadding < 0 || maxTranslation < 0) {
    return makeError("augmentation crop_padding and max_translation must not be negative");
  }
  if (sampleShape.size() != 3) {
    return makeError(
        "augmentation needs image samples (channels × height × width), the dataset has samples "
        "of shape " +
        shapeToString(sampleShape));
  }
  // A shift as large as the image leaves nothing of it: such a value is a typo.
  const int64_t side = std::min(sampleShape[1], sampleShape[2]);
  auto fits = [&](const char* field, int32_t v) -> Status {
    if (v <= side) return {};
    return makeError("data.augmentation." + std::string(field) + " " + std::to_string(v) +
                     " is larger than the images (" + shapeToString(sampleShape) + "): at most " +
                     std::to_string(side) + " pixels");
  };
  if (Status s = fits("crop_padding", cropPadding); !s) return s;
  return fits("max_translation", maxTranslation);
}

uint64_t Augmenter::sampleKey(uint64_t seed, int64_t epoch, int64_t sampleIndex) {
  const uint64_t epochKey = hashCombine(hashCombine(seed, kAugmentStream), epoch);
  return hashCombine(epochKey, static_cast<uint64_t>(sampleIndex));
}

void Augmenter::apply(const uint8_t* src, uint8_t* dst, const Shape& shape, uint64_t key) const {
  applyTo(*this, src, dst, shape, key);
}

void Augmenter::apply(const float* src, float* dst, const Shape& shape, uint64_t key) const {
  applyTo(*this, src, dst, shape, key);
}

}  // namespace netloom
