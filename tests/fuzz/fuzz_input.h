// What the harnesses share: readers that take a path get the input as an anonymous
// in-memory file (memfd), reached by its /proc/self/fd name, so no input touches
// the disk; and a few bytes taken off the front choose a reader's options.
#pragma once

#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace netloom::fuzz {

class MemFile {
 public:
  explicit MemFile(std::string_view bytes) : m_fd(::memfd_create("fuzz-input", MFD_CLOEXEC)) {
    size_t done = 0;
    while (m_fd >= 0 && done < bytes.size()) {
      ssize_t n = ::write(m_fd, bytes.data() + done, bytes.size() - done);
      if (n <= 0) break;
      done += size_t(n);
    }
  }
  ~MemFile() {
    if (m_fd >= 0) ::close(m_fd);
  }
  MemFile(const MemFile&) = delete;
  MemFile& operator=(const MemFile&) = delete;
  bool ok() const { return m_fd >= 0; }
  // Each open() of this name starts at offset 0, as a reader of a real file expects.
  std::string path() const { return "/proc/self/fd/" + std::to_string(m_fd); }

 private:
  int m_fd;
};

// Reads the input front to back: option bytes first, then the rest.
class Input {
 public:
  Input(const uint8_t* data, size_t size) : m_data(data), m_size(size) {}
  uint8_t byte() { return m_pos < m_size ? m_data[m_pos++] : 0; }
  // The next `n` bytes (fewer at the end).
  std::string_view take(size_t n) {
    n = std::min(n, m_size - m_pos);
    std::string_view s(reinterpret_cast<const char*>(m_data + m_pos), n);
    m_pos += n;
    return s;
  }
  std::string_view rest() { return take(m_size - m_pos); }

 private:
  const uint8_t* m_data;
  size_t m_size;
  size_t m_pos = 0;
};

}  // namespace netloom::fuzz
