// A safetensors file, header (JSON) and tensor bytes, with its metadata read too.
#include <map>

#include "engine/io/safetensors.h"
#include "fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace netloom;
  fuzz::MemFile file(fuzz::Input(data, size).rest());
  if (!file.ok()) return 0;
  std::map<std::string, std::string> metadata;
  (void)readSafetensors(file.path(), &metadata);
  return 0;
}
