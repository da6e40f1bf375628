// The TrainEvent stream as a tailer reads it: from bytes that arrived over SSH,
// at every offset a resumed follower may start from, and from a file.
#include "engine/io/event_stream.h"
#include "fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace netloom;
  fuzz::Input in(data, size);
  const uint8_t offset = in.byte();
  const std::string bytes(in.rest());
  (void)parseEvents(bytes, 0);
  (void)parseEvents(bytes, offset);
  fuzz::MemFile file(bytes);
  if (file.ok()) (void)readEvents(file.path(), offset % (bytes.size() + 1));
  return 0;
}
