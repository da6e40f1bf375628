// Point-to-point messages over Gloo for the communicator (communicator.cpp). Gloo
// builds only.
#pragma once

#include <gloo/context.h>
#include <gloo/transport/unbound_buffer.h>

#include <chrono>
#include <condition_variable>
#include <deque>
#include <exception>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "kernels/core/communicator.h"

namespace netloom {

// Point-to-point sends over Gloo, where a send completes only once the receiver has
// taken it: each message is copied and posted at once, and its completion awaited on
// a thread of its own, in order, so send() returns at once (as the thread ranks'
// does) and two ranks may each send before they receive.
class GlooSends {
 public:
  GlooSends(std::shared_ptr<gloo::Context> ctx, std::chrono::milliseconds timeout)
      : m_ctx(std::move(ctx)), m_timeout(timeout) {
    m_thread = std::thread([this] { run(); });
  }
  ~GlooSends() {
    {
      std::lock_guard lock(m_mutex);
      m_stop = true;
    }
    m_cv.notify_all();
    m_thread.join();
  }

  void post(const void* data, int64_t bytes, int to, uint64_t slot) {
    auto m = std::make_unique<Message>();
    m->to = to;
    m->data.assign(static_cast<const char*>(data), static_cast<const char*>(data) + bytes);
    m->buf = m_ctx->createUnboundBuffer(m->data.data(), m->data.size());
    std::lock_guard lock(m_mutex);
    if (m_error) std::rethrow_exception(m_error);
    m->buf->send(to, slot);
    m_queue.push_back(std::move(m));
    m_cv.notify_all();
  }

 private:
  struct Message {
    int to = 0;
    std::vector<char> data;
    std::unique_ptr<gloo::transport::UnboundBuffer> buf;
  };

  void run() {
    for (;;) {
      std::unique_lock lock(m_mutex);
      m_cv.wait(lock, [&] { return m_stop || !m_queue.empty(); });
      if (m_queue.empty()) return;
      std::unique_ptr<Message> m = std::move(m_queue.front());
      m_queue.pop_front();
      lock.unlock();
      try {
        m->buf->waitSend(m_timeout);
      } catch (const std::exception& e) {
        lock.lock();
        if (!m_error)
          m_error = std::make_exception_ptr(CommError("a message to rank " + std::to_string(m->to) +
                                                      " was not received: " + e.what()));
      }
    }
  }

  std::shared_ptr<gloo::Context> m_ctx;
  std::chrono::milliseconds m_timeout;
  std::mutex m_mutex;
  std::condition_variable m_cv;
  std::deque<std::unique_ptr<Message>> m_queue;
  std::exception_ptr m_error;
  bool m_stop = false;
  std::thread m_thread;
};

}  // namespace netloom
