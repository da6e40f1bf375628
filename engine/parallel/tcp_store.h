// The rendezvous of ranks on several hosts: a small key-value store over TCP that
// rank 0 serves, like PyTorch's TCPStore. Every connection first presents the job's
// secret (the submitter hands it to each rank out of band, never on a command line
// or on disk), so no stranger can join or read the ranks' addresses. Keys are
// written once and read by waiting for them.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "engine/util/status.h"

namespace netloom {

class TcpStoreServer {
 public:
  // Listens on `host`:`port` (0: a free port, then port() says which).
  static Result<std::unique_ptr<TcpStoreServer>> start(const std::string& host, int port,
                                                       const std::string& secret);
  ~TcpStoreServer();
  int port() const { return m_port; }

 private:
  struct Impl;
  std::unique_ptr<Impl> m_impl;
  int m_port = 0;
  TcpStoreServer();
};

class TcpStoreClient {
 public:
  // Connects (trying again until `timeout`) and presents the secret.
  static Result<std::unique_ptr<TcpStoreClient>> connect(const std::string& host, int port,
                                                         const std::string& secret,
                                                         std::chrono::milliseconds timeout);
  ~TcpStoreClient();
  Status set(const std::string& key, const std::vector<char>& value);
  // The value, or nothing yet (found false).
  Result<std::vector<char>> get(const std::string& key, bool& found);
  // Whether `key` is set within `timeout`: the server answers as soon as it is.
  Result<bool> wait(const std::string& key, std::chrono::milliseconds timeout);

 private:
  int m_fd = -1;
  std::chrono::milliseconds m_timeout{0};
  TcpStoreClient() = default;
};

}  // namespace netloom
