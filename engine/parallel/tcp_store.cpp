#include "engine/parallel/tcp_store.h"

#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <thread>

namespace netloom {

namespace {

// How long a read on `fd` may wait before it fails.
void receiveTimeout(int fd, std::chrono::milliseconds t) {
  timeval limit{time_t(t.count() / 1000), suseconds_t(t.count() % 1000 * 1000)};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &limit, sizeof limit);
}

// Frames: a byte of kind, then u32 lengths and bytes. Requests 'S' key value, 'G'
// key, 'W' key milliseconds (the server answers when the key is set, or when the time
// is up); answers 'K' (stored, or set), 'V' value, 'N' (no such key yet). The first frame of a
// connection is 'H' secret, answered 'K' or by closing it.
bool writeAll(int fd, const void* data, size_t n) {
  const char* p = static_cast<const char*>(data);
  while (n > 0) {
    ssize_t w = ::send(fd, p, n, MSG_NOSIGNAL);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    p += w;
    n -= size_t(w);
  }
  return true;
}

bool readAll(int fd, void* data, size_t n) {
  char* p = static_cast<char*>(data);
  while (n > 0) {
    ssize_t r = ::recv(fd, p, n, 0);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    p += r;
    n -= size_t(r);
  }
  return true;
}

constexpr uint32_t kMaxField = 1 << 20;  // a key, value or secret; addresses are small

bool writeField(int fd, const void* data, size_t n) {
  uint32_t len = uint32_t(n);
  return writeAll(fd, &len, sizeof len) && writeAll(fd, data, n);
}

bool readField(int fd, std::string& out) {
  uint32_t len = 0;
  if (!readAll(fd, &len, sizeof len) || len > kMaxField) return false;
  out.resize(len);
  return readAll(fd, out.data(), len);
}

// Equal without telling, by its timing, how much of the secret was right.
bool sameSecret(const std::string& given, const std::string& secret) {
  if (secret.empty() || given.size() != secret.size()) return false;
  unsigned char diff = 0;
  for (size_t i = 0; i < secret.size(); ++i) diff |= uint8_t(given[i] ^ secret[i]);
  return diff == 0;
}

std::string lastError(const std::string& what) {
  return what + ": " + std::strerror(errno);
}

}  // namespace

struct TcpStoreServer::Impl {
  int listenFd = -1;
  int wake[2] = {-1, -1};  // written to on shutdown
  std::string secret;
  std::mutex mutex;
  std::map<std::string, std::string> values;
  std::condition_variable changed;  // a value set, or the server stopping
  bool stopping = false;
  std::thread acceptor;
  std::vector<std::thread> clients;
  std::vector<int> clientFds;

  void serve(int fd) {
    char kind = 0;
    std::string field, value;
    if (!readAll(fd, &kind, 1) || kind != 'H' || !readField(fd, field) ||
        !sameSecret(field, secret) || !writeAll(fd, "K", 1))
      return;  // a stranger: nothing said, nothing kept
    while (readAll(fd, &kind, 1)) {
      if (kind == 'S' && readField(fd, field) && readField(fd, value)) {
        {
          std::lock_guard lock(mutex);
          values[field] = value;
        }
        changed.notify_all();
        if (!writeAll(fd, "K", 1)) return;
      } else if (kind == 'W' && readField(fd, field) && readField(fd, value)) {
        bool have = false;
        {
          std::unique_lock lock(mutex);
          changed.wait_for(lock,
                           std::chrono::milliseconds(std::strtoll(value.c_str(), nullptr, 10)),
                           [&] { return stopping || values.count(field) > 0; });
          have = values.count(field) > 0;
        }
        if (!writeAll(fd, have ? "K" : "N", 1)) return;
      } else if (kind == 'G' && readField(fd, field)) {
        std::string found;
        bool have = false;
        {
          std::lock_guard lock(mutex);
          auto it = values.find(field);
          if (it != values.end()) found = it->second, have = true;
        }
        if (!(have ? writeAll(fd, "V", 1) && writeField(fd, found.data(), found.size())
                   : writeAll(fd, "N", 1)))
          return;
      } else {
        return;
      }
    }
  }

  void accept() {
    for (;;) {
      pollfd fds[2] = {{listenFd, POLLIN, 0}, {wake[0], POLLIN, 0}};
      if (::poll(fds, 2, -1) < 0) {
        if (errno == EINTR) continue;
        return;
      }
      if (fds[1].revents) return;
      int fd = ::accept4(listenFd, nullptr, nullptr, SOCK_CLOEXEC);
      if (fd < 0) continue;
      std::lock_guard lock(mutex);
      clientFds.push_back(fd);
      clients.emplace_back([this, fd] {
        serve(fd);
        ::shutdown(fd, SHUT_RDWR);  // the peer sees the end; closed with the server
      });
    }
  }
};

TcpStoreServer::TcpStoreServer() : m_impl(std::make_unique<Impl>()) {}

TcpStoreServer::~TcpStoreServer() {
  if (m_impl->wake[1] >= 0) (void)!::write(m_impl->wake[1], "x", 1);
  if (m_impl->acceptor.joinable()) m_impl->acceptor.join();
  {
    std::lock_guard lock(m_impl->mutex);
    m_impl->stopping = true;
    for (int fd : m_impl->clientFds) ::shutdown(fd, SHUT_RDWR);
  }
  m_impl->changed.notify_all();
  for (std::thread& t : m_impl->clients) t.join();
  for (int fd : m_impl->clientFds) ::close(fd);
  for (int fd : {m_impl->listenFd, m_impl->wake[0], m_impl->wake[1]})
    if (fd >= 0) ::close(fd);
}

Result<std::unique_ptr<TcpStoreServer>> TcpStoreServer::start(const std::string& host, int port,
                                                              const std::string& secret) {
  if (secret.empty()) return makeError("the rendezvous needs the job's secret");
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE;
  addrinfo* found = nullptr;
  if (int e = ::getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &found); e != 0)
    return makeError("the rendezvous address " + host + ": " + gai_strerror(e));
  std::unique_ptr<TcpStoreServer> server(new TcpStoreServer());
  Impl& impl = *server->m_impl;
  impl.secret = secret;
  std::string why = "no address";
  for (addrinfo* a = found; a && impl.listenFd < 0; a = a->ai_next) {
    int fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) continue;
    int on = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof on);
    if (::bind(fd, a->ai_addr, a->ai_addrlen) == 0 && ::listen(fd, 64) == 0) {
      impl.listenFd = fd;
    } else {
      why = lastError("cannot listen on " + host + ":" + std::to_string(port));
      ::close(fd);
    }
  }
  ::freeaddrinfo(found);
  if (impl.listenFd < 0) return makeError(why);
  sockaddr_storage bound{};
  socklen_t len = sizeof bound;
  ::getsockname(impl.listenFd, reinterpret_cast<sockaddr*>(&bound), &len);
  server->m_port = bound.ss_family == AF_INET6
                       ? ntohs(reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port)
                       : ntohs(reinterpret_cast<sockaddr_in*>(&bound)->sin_port);
  if (::pipe2(impl.wake, O_CLOEXEC) != 0) return makeError(lastError("the rendezvous"));
  impl.acceptor = std::thread([&impl] { impl.accept(); });
  return server;
}

TcpStoreClient::~TcpStoreClient() {
  if (m_fd >= 0) ::close(m_fd);
}

Result<std::unique_ptr<TcpStoreClient>> TcpStoreClient::connect(const std::string& host, int port,
                                                                const std::string& secret,
                                                                std::chrono::milliseconds timeout) {
  const std::string where = host + ":" + std::to_string(port);
  auto deadline = std::chrono::steady_clock::now() + timeout;
  std::string why;
  for (;;) {
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* found = nullptr;
    if (int e = ::getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &found); e != 0)
      return makeError("the rendezvous at " + where + ": " + gai_strerror(e));
    int fd = -1;
    for (addrinfo* a = found; a && fd < 0; a = a->ai_next) {
      fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
      if (fd >= 0 && ::connect(fd, a->ai_addr, a->ai_addrlen) != 0) {
        why = lastError("cannot reach the rendezvous at " + where);
        ::close(fd);
        fd = -1;
      }
    }
    ::freeaddrinfo(found);
    if (fd >= 0) {
      std::unique_ptr<TcpStoreClient> c(new TcpStoreClient());
      c->m_fd = fd;
      int on = 1;
      ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &on, sizeof on);
      // A server that stops answering fails the call instead of hanging it.
      c->m_timeout = timeout;
      receiveTimeout(fd, timeout);
      char answer = 0;
      if (!writeAll(fd, "H", 1) || !writeField(fd, secret.data(), secret.size()) ||
          !readAll(fd, &answer, 1) || answer != 'K')
        return makeError("the rendezvous at " + where + " refused this rank: not the job's secret");
      return c;
    }
    if (std::chrono::steady_clock::now() >= deadline) return makeError(why);
    // The one wait that retries: a refused connection means rank 0 does not listen
    // yet, and nothing on this host can say when it will (its port is on another
    // host, or not yet chosen), so the next attempt is the only way to find out.
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

Status TcpStoreClient::set(const std::string& key, const std::vector<char>& value) {
  char answer = 0;
  if (!writeAll(m_fd, "S", 1) || !writeField(m_fd, key.data(), key.size()) ||
      !writeField(m_fd, value.data(), value.size()) || !readAll(m_fd, &answer, 1) || answer != 'K')
    return makeError("the rendezvous closed the connection");
  return {};
}

Result<bool> TcpStoreClient::wait(const std::string& key, std::chrono::milliseconds timeout) {
  const std::string ms = std::to_string(std::max<int64_t>(0, timeout.count()));
  char answer = 0;
  // The server answers by the deadline: the read may wait that long, and a little more.
  receiveTimeout(m_fd, timeout + std::chrono::seconds(10));
  const bool ok = writeAll(m_fd, "W", 1) && writeField(m_fd, key.data(), key.size()) &&
                  writeField(m_fd, ms.data(), ms.size()) && readAll(m_fd, &answer, 1);
  receiveTimeout(m_fd, m_timeout);
  if (!ok) return makeError("the rendezvous closed the connection");
  return answer == 'K';
}

Result<std::vector<char>> TcpStoreClient::get(const std::string& key, bool& found) {
  char answer = 0;
  if (!writeAll(m_fd, "G", 1) || !writeField(m_fd, key.data(), key.size()) ||
      !readAll(m_fd, &answer, 1))
    return makeError("the rendezvous closed the connection");
  found = answer == 'V';
  std::string value;
  if (found && !readField(m_fd, value)) return makeError("the rendezvous closed the connection");
  return std::vector<char>(value.begin(), value.end());
}

}  // namespace netloom
