// IDX images and labels (plain or gzip, as Fashion-MNIST ships): the first two
// bytes say how many of the rest are the images file; the remainder is the labels.
#include "engine/data/dataset.h"
#include "fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace netloom;
  fuzz::Input in(data, size);
  size_t imagesSize = size_t(in.byte()) << 8 | in.byte();
  fuzz::MemFile images(in.take(imagesSize)), labels(in.rest());
  if (!images.ok() || !labels.ok()) return 0;
  (void)readIdx(images.path(), labels.path());
  return 0;
}
