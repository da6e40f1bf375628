// The FIFO is opened non-blocking and waited on with poll(), which a signal always
// interrupts (whatever SA_RESTART says), so SIGTERM stops a held run at once; a
// blocking open() or read() would be restarted and hold the run past its stop.
#include "engine/cli/hold.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

namespace netloom {

Result<StepHold> StepHold::fromEnvironment() {
  StepHold h;
  const char* step = std::getenv("NETLOOM_HOLD_AT_STEP");
  const char* fifo = std::getenv("NETLOOM_HOLD_FIFO");
  if (!step || !fifo) return h;
  char* end = nullptr;
  errno = 0;
  long long n = std::strtoll(step, &end, 10);
  if (errno || end == step || *end || n < 1)
    return makeError("NETLOOM_HOLD_AT_STEP needs a positive step, not '" + std::string(step) + "'");
  if (!*fifo) return makeError("NETLOOM_HOLD_FIFO is empty");
  // Made now, before the first step, so that a test may open it for writing as soon
  // as it sees the run start: its open() then returns when the run holds.
  struct stat st;
  if (::stat(fifo, &st) != 0) {
    if (::mkfifo(fifo, 0600) != 0 && errno != EEXIST)
      return makeError("cannot make the hold FIFO " + std::string(fifo) + ": " +
                       std::strerror(errno));
  } else if (!S_ISFIFO(st.st_mode)) {
    return makeError(std::string(fifo) + " (NETLOOM_HOLD_FIFO) is not a FIFO");
  }
  h.m_step = n;
  h.m_fifo = fifo;
  return h;
}

Status StepHold::after(int64_t step, const std::atomic<bool>& stop) const {
  if (step != m_step) return {};
  int fd = ::open(m_fifo.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return makeError("cannot open the hold FIFO " + m_fifo + ": " + std::strerror(errno));
  // Until a newline arrives, or a writer that came closes without one. Before any
  // writer has come, Linux reports no hang-up on a FIFO, so poll() waits.
  Status result;
  while (!stop.load()) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, -1) < 0) {
      if (errno == EINTR) continue;  // a signal: `stop` says whether it was a stop
      result = makeError("waiting on the hold FIFO " + m_fifo + ": " + std::strerror(errno));
      break;
    }
    char buf[256];
    ssize_t got = ::read(fd, buf, sizeof buf);
    if (got < 0 && (errno == EAGAIN || errno == EINTR)) continue;
    if (got <= 0) break;  // the writer closed
    if (std::string(buf, size_t(got)).find('\n') != std::string::npos) break;
  }
  ::close(fd);
  return result;
}

}  // namespace netloom
