// Output paths. The atomic write (temporary file, then rename) must never put a regular
// file where a device, a FIFO or a symlink was: as root, `--summary-json /dev/null`
// would otherwise replace the machine's /dev/null.
#include "engine/io/output_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>

namespace netloom {

namespace {

// As the kernel's own limit on a chain of links (ELOOP).
constexpr int kMaxLinks = 40;

std::string errnoText(int err) {
  return std::strerror(err != 0 ? err : EIO);
}

// "path" or "path (a link to target)": the name the user gave first.
std::string named(const std::string& path, const std::string& target) {
  return target == path ? path : path + " (a link to " + target + ")";
}

std::string folderOf(const std::string& path) {
  std::string dir = std::filesystem::path(path).parent_path().string();
  return dir.empty() ? "." : dir;
}

void syncFolderOf(const std::string& path) {
  // Makes the rename itself durable; best effort, since some filesystems refuse it.
  int fd = ::open(folderOf(path).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return;
  ::fsync(fd);
  ::close(fd);
}

}  // namespace

Result<OutputTarget> resolveOutput(const std::string& path) {
  if (path.empty()) return makeError("an output path is empty");
  std::string p = path;
  for (int links = 0;; ++links) {
    struct stat st;
    if (::lstat(p.c_str(), &st) != 0) {
      // A new name (a dangling link's target included); a missing folder on the way
      // is reported when the file is created.
      if (errno == ENOENT) return OutputTarget{p, false, false};
      return makeError("cannot write " + named(path, p) + ": " + errnoText(errno));
    }
    if (S_ISREG(st.st_mode)) return OutputTarget{p, false, true};
    if (S_ISCHR(st.st_mode) || S_ISFIFO(st.st_mode)) return OutputTarget{p, true, true};
    if (S_ISDIR(st.st_mode))
      return makeError("cannot write " + named(path, p) + ": it is a directory");
    if (S_ISBLK(st.st_mode))
      return makeError("cannot write " + named(path, p) +
                       ": it is a block device, and a file written there would overwrite a disk");
    if (!S_ISLNK(st.st_mode))
      return makeError("cannot write " + named(path, p) + ": it is a socket or other special file");
    // /proc's links (/dev/stdout ends at /proc/self/fd/1) name open files, pipes and
    // sockets that no path reaches: opened through the link, they are written in place.
    if (p.rfind("/proc/", 0) == 0) return OutputTarget{p, true, true};
    if (links == kMaxLinks)
      return makeError("cannot write " + path + ": more than " + std::to_string(kMaxLinks) +
                       " symbolic links in a row (a loop?)");
    std::string target(size_t(st.st_size > 0 ? st.st_size : 4096) + 1, '\0');
    ssize_t n = ::readlink(p.c_str(), target.data(), target.size());
    if (n <= 0) return makeError("cannot write " + named(path, p) + ": " + errnoText(errno));
    target.resize(size_t(n));
    // A relative target is relative to the link's own folder, not to ours.
    p = target.front() == '/' ? target : (std::filesystem::path(p).parent_path() / target).string();
  }
}

OutputFile::~OutputFile() {
  abandon();
}

void OutputFile::abandon() {
  if (m_fd >= 0) ::close(m_fd);
  m_fd = -1;
  if (!m_tmp.empty()) ::unlink(m_tmp.c_str());
  m_tmp.clear();
}

Status OutputFile::fail(const std::string& step, int err) {
  abandon();
  return makeError("cannot write " + named(m_path, m_target.path) + " (" + step +
                   "): " + errnoText(err));
}

Status OutputFile::open(const std::string& path, int mode) {
  abandon();
  m_path = path;
  auto target = resolveOutput(path);
  if (!target) return target.error();
  m_target = *target;
  if (m_target.inPlace) {
    // No O_CREAT, no O_TRUNC: what is there stays there, and a file behind /proc's
    // link (a redirected stdout) is added to. A FIFO waits here for its reader.
    do {
      m_fd = ::open(m_target.path.c_str(), O_WRONLY | O_APPEND | O_NOCTTY | O_CLOEXEC);
    } while (m_fd < 0 && errno == EINTR);
    if (m_fd < 0) return fail("open", errno);
    return {};
  }
  mode_t bits = mode >= 0 ? mode_t(mode) : mode_t(0666);
  bool keepBits = mode >= 0;
  struct stat st;
  if (mode < 0 && m_target.exists && ::stat(m_target.path.c_str(), &st) == 0) {
    bits = st.st_mode & 0777;  // a replaced file keeps its permissions (not set-id bits)
    keepBits = true;
  }
  // Beside the target, so the rename stays within one filesystem. The counter keeps
  // two writers in one process apart, and steps past a name a crashed one left.
  static std::atomic<unsigned> counter{0};
  const std::string stem = m_target.path + ".tmp." + std::to_string(::getpid()) + ".";
  for (int attempt = 0; m_fd < 0; ++attempt) {
    m_tmp = stem + std::to_string(counter++);
    // Created with its final bits from the start: no moment where others could read it.
    m_fd = ::open(m_tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, bits);
    if (m_fd >= 0) break;
    int err = errno;
    m_tmp.clear();
    if (err != EEXIST || attempt == 8)
      return makeError("cannot write " + named(path, m_target.path) + ": cannot create a file in " +
                       folderOf(m_target.path) + ": " + errnoText(err));
  }
  if (keepBits && ::fchmod(m_fd, bits) != 0) return fail("chmod", errno);
  return {};
}

Status OutputFile::write(const void* data, size_t bytes) {
  if (m_fd < 0) return makeError("cannot write " + m_path + ": not open");
  auto* p = static_cast<const char*>(data);
  while (bytes > 0) {
    ssize_t n = ::write(m_fd, p, bytes);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return fail("write", n < 0 ? errno : EIO);
    p += n;
    bytes -= size_t(n);
  }
  return {};
}

Status OutputFile::commit() {
  if (m_fd < 0) return makeError("cannot write " + m_path + ": not open");
  if (!m_target.inPlace && ::fsync(m_fd) != 0) return fail("fsync", errno);
  int fd = m_fd;
  m_fd = -1;
  if (::close(fd) != 0) return fail("close", errno);
  if (m_target.inPlace) return {};
  if (::rename(m_tmp.c_str(), m_target.path.c_str()) != 0) return fail("rename", errno);
  m_tmp.clear();
  syncFolderOf(m_target.path);
  return {};
}

Status writeFileAtomic(const std::string& path, const std::string& bytes, int mode) {
  OutputFile out;
  if (Status s = out.open(path, mode); !s) return s;
  if (Status s = out.write(bytes.data(), bytes.size()); !s) return s;
  return out.commit();
}

}  // namespace netloom
