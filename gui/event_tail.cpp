#include "gui/event_tail.h"

#include <chrono>

#include "engine/io/event_stream.h"

namespace netloom::gui {

namespace {
// How often the reader looks for new bytes: well inside a frame.
constexpr auto kReadEvery = std::chrono::milliseconds(4);
}  // namespace

EventTail::EventTail(int frameMs, QObject* parent) : QObject(parent) {
  m_frame.setInterval(frameMs);
  m_frame.setTimerType(Qt::PreciseTimer);
  connect(&m_frame, &QTimer::timeout, this, &EventTail::deliver);
  m_reader = std::thread([this] { readLoop(); });
}

EventTail::~EventTail() {
  {
    std::lock_guard<std::mutex> lock(m_mutex);
    m_quit = true;
  }
  m_wake.notify_all();
  m_reader.join();
}

void EventTail::follow(int stream, const QString& path, int64_t offset) {
  {
    std::lock_guard<std::mutex> lock(m_mutex);
    m_streams[stream] = Stream{path.toStdString(), offset};
  }
  m_wake.notify_all();
  if (!m_frame.isActive()) m_frame.start();
}

void EventTail::wake() {
  m_wake.notify_all();
}

void EventTail::readNow(int stream, Batch& into) {
  auto it = m_streams.find(stream);
  if (it == m_streams.end()) return;
  auto r = readEvents(it->second.path, it->second.offset);
  if (!r || r->events.empty()) return;
  it->second.offset = r->nextOffset;
  into.nextOffset = r->nextOffset;
  for (auto& e : r->events) into.events.push_back(std::move(e));
}

EventTail::Batch EventTail::drain(int stream) {
  Batch out{stream, {}, 0};
  std::lock_guard<std::mutex> lock(m_mutex);
  for (auto it = m_ready.begin(); it != m_ready.end();) {
    if (it->stream != stream) {
      ++it;
      continue;
    }
    for (auto& e : it->events) out.events.push_back(std::move(e));
    out.nextOffset = it->nextOffset;
    it = m_ready.erase(it);
  }
  // The reader, reading meanwhile without the lock, finds the offset moved and drops
  // what it read.
  readNow(stream, out);
  return out;
}

void EventTail::unfollow(int stream) {
  std::lock_guard<std::mutex> lock(m_mutex);
  m_streams.erase(stream);
  for (auto it = m_ready.begin(); it != m_ready.end();)
    it = it->stream == stream ? m_ready.erase(it) : it + 1;
  if (m_streams.empty()) m_frame.stop();  // nothing to deliver: no tick
}

void EventTail::clear() {
  std::lock_guard<std::mutex> lock(m_mutex);
  m_streams.clear();
  m_ready.clear();
  m_frame.stop();
}

std::vector<int> EventTail::streams() const {
  std::lock_guard<std::mutex> lock(m_mutex);
  std::vector<int> out;
  for (const auto& [id, s] : m_streams) out.push_back(id);
  return out;
}

void EventTail::readLoop() {
  std::unique_lock<std::mutex> lock(m_mutex);
  while (!m_quit) {
    // Read without the lock: a stream's file is read by this thread alone.
    std::map<int, Stream> streams = m_streams;
    lock.unlock();
    std::vector<Batch> read;
    for (auto& [id, s] : streams) {
      auto r = readEvents(s.path, s.offset);
      if (!r || r->events.empty()) continue;
      read.push_back(Batch{id, std::move(r->events), r->nextOffset});
    }
    lock.lock();
    for (Batch& b : read) {
      auto it = m_streams.find(b.stream);
      // Unfollowed or followed anew meanwhile: what was read is not its news.
      if (it == m_streams.end() || it->second.path != streams[b.stream].path ||
          it->second.offset != streams[b.stream].offset)
        continue;
      it->second.offset = b.nextOffset;
      m_ready.push_back(std::move(b));
    }
    // Following nothing, the reader sleeps until a stream is followed.
    if (m_streams.empty())
      m_wake.wait(lock, [this] { return m_quit || !m_streams.empty(); });
    else
      m_wake.wait_for(lock, kReadEvery);
  }
}

void EventTail::deliver() {
  std::vector<Batch> batches;
  {
    std::lock_guard<std::mutex> lock(m_mutex);
    batches.swap(m_ready);
  }
  if (!batches.empty()) emit frame(batches);
}

}  // namespace netloom::gui
