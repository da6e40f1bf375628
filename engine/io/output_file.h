// Where the bytes for an output path really go, and the one way every file NetLoom
// writes (weights, checkpoints, summaries, projects, host and job records, event
// streams) is put there: a regular file or a new name is replaced atomically; a
// symlink is followed and its target replaced atomically; a character device or a
// FIFO (or /dev/stdout) is written in place and never replaced; a folder, a block
// device or a socket is refused with a message naming the path.
#pragma once

#include <cstddef>
#include <string>

#include "engine/util/status.h"

namespace netloom {

struct OutputTarget {
  std::string path;  // the path itself, or the end of its symlink chain
  // A character device, a FIFO or a /proc link (/dev/stdout): opened and written,
  // never renamed over.
  bool inPlace = false;
  bool exists = false;  // a regular file or a device is there now
};
// Follows symlinks (relative ones against their own folder) to what will be written.
Result<OutputTarget> resolveOutput(const std::string& path);

// A file being written to its output path. Bytes go to a temporary file beside the
// target, and commit() renames it over the target, so a crash leaves the old file or
// the new one, never a torn one; for a device or FIFO they go straight to it. An
// output that is not committed leaves nothing behind.
class OutputFile {
 public:
  OutputFile() = default;
  OutputFile(const OutputFile&) = delete;
  OutputFile& operator=(const OutputFile&) = delete;
  ~OutputFile();

  // `mode` (such as 0600), when given, is the new file's permission bits whatever the
  // umask; otherwise a replaced file keeps its own.
  Status open(const std::string& path, int mode = -1);
  Status write(const void* data, size_t bytes);
  Status commit();
  // The temporary file, while one is open (empty for a device or FIFO).
  const std::string& temporaryPath() const { return m_tmp; }

 private:
  Status fail(const std::string& step, int err);
  void abandon();

  std::string m_path;  // as the caller named it, for messages
  OutputTarget m_target;
  std::string m_tmp;
  int m_fd = -1;
};

// Writes `bytes` to `path` through an OutputFile.
Status writeFileAtomic(const std::string& path, const std::string& bytes, int mode = -1);

}  // namespace netloom
