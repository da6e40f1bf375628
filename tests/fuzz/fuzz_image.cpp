// PNG and JPEG files as the image loader meets them: three option bytes choose the
// channels, the size and the fit the image is converted to; the rest is the file.
#include <vector>

#include "engine/data/image_decode.h"
#include "fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace netloom;
  fuzz::Input in(data, size);
  const uint8_t options = in.byte();
  ImageSpec spec{options & 1 ? 3 : 1, 1 + in.byte() % 64, 1 + in.byte() % 64,
                 options & 2 ? proto::ImageSource::CENTER_CROP : proto::ImageSource::RESIZE};
  fuzz::MemFile file(in.rest());
  if (!file.ok()) return 0;
  int w = 0, h = 0, c = 0;
  std::string error;
  (void)probeImage(file.path(), w, h, c, error);
  std::vector<uint8_t> out(size_t(spec.bytesPerImage()));
  (void)decodeImage(file.path(), spec, out.data(), error);
  return 0;
}
