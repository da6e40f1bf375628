// The TrainEvent stream on disk: length-delimited messages (varint size, then the
// bytes), appended and flushed one event at a time so a reader can tail the file.
#pragma once

#include <cstdio>
#include <string>
#include <vector>

#include "engine/proto/events.pb.h"
#include "engine/util/status.h"

namespace netloom {

// One record of the stream: the varint size, then the message.
std::string encodeEvent(const proto::TrainEvent& event);

class EventWriter {
 public:
  ~EventWriter();
  // Creates or truncates; with `append`, keeps the complete events already there and
  // drops a torn last record (a writer that was killed mid-write) before appending.
  Status open(const std::string& path, bool append = false);
  Status write(const proto::TrainEvent& event);
  void close();

 private:
  std::FILE* m_file = nullptr;
  std::string m_path;
};

// Reads every complete event from `offset`; a torn trailing record (a writer still
// writing) is left for the next call. `nextOffset` is where the next read starts.
struct EventReadResult {
  std::vector<proto::TrainEvent> events;
  int64_t nextOffset = 0;
};
Result<EventReadResult> readEvents(const std::string& path, int64_t offset = 0);
// The same over bytes of a stream that start at `offset` (read from elsewhere, a
// remote host): whole records only; `nextOffset` says where the next bytes go.
Result<EventReadResult> parseEvents(const std::string& bytes, int64_t offset);

}  // namespace netloom
