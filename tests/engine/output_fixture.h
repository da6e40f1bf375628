// Shared helpers for the tests of files written: what a path is now, what a file
// holds and how long it is, raw bytes written, and a FIFO's reader.
#pragma once

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <QFile>
#include <QtTest>
#include <cstdio>
#include <filesystem>
#include <string>

namespace outputfixture {

inline struct stat statOf(const std::string& path) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) st.st_mode = 0;
  return st;
}

inline std::string readAll(const std::string& path) {
  QFile f(QString::fromStdString(path));
  if (!f.open(QIODevice::ReadOnly)) return {};
  QByteArray b = f.readAll();
  return std::string(b.constData(), size_t(b.size()));
}

// Writes (or appends) bytes as they are, with no atomic replace.
inline void writeRaw(const std::string& path, const std::string& bytes, bool append = false) {
  std::FILE* f = std::fopen(path.c_str(), append ? "ab" : "wb");
  QVERIFY(f);
  QCOMPARE(std::fwrite(bytes.data(), 1, bytes.size(), f), bytes.size());
  std::fclose(f);
}

inline int64_t fileSize(const std::string& path) {
  return int64_t(std::filesystem::file_size(path));
}

inline mode_t typeOf(const std::string& path) {
  return statOf(path).st_mode & S_IFMT;
}

// A FIFO's reader, open before the writer comes so that neither waits for the other:
// what the writer puts there (well under the pipe's 64 KiB) is read once it has
// closed. Were the FIFO replaced instead, the read finds nothing rather than hanging.
class FifoReader {
 public:
  explicit FifoReader(const std::string& path)
      : m_fd(::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC)) {}
  FifoReader(const FifoReader&) = delete;
  FifoReader& operator=(const FifoReader&) = delete;
  ~FifoReader() {
    if (m_fd >= 0) ::close(m_fd);
  }
  bool ok() const { return m_fd >= 0; }
  std::string drain() {
    std::string out;
    char buf[4096];
    for (ssize_t n; (n = ::read(m_fd, buf, sizeof buf)) > 0;) out.append(buf, size_t(n));
    return out;
  }

 private:
  int m_fd;
};

}  // namespace outputfixture
