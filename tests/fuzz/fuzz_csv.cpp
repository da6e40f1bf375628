// A CSV data file: the first byte picks the header flag, the delimiter and which
// label column is asked for; the rest is the file.
#include "engine/data/dataset.h"
#include "fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace netloom;
  fuzz::Input in(data, size);
  const uint8_t options = in.byte();
  const bool header = options & 1;
  const char delimiters[] = {',', ';', '\t', ' '};
  const char delimiter = delimiters[(options >> 1) & 3];
  const char* columns[] = {"", "label", "0", "1", "-1", "99999999999999999999", "class", "x"};
  fuzz::MemFile file(in.rest());
  if (!file.ok()) return 0;
  (void)readCsv(file.path(), columns[(options >> 3) & 7], header, delimiter);
  return 0;
}
