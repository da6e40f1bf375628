// Following event streams as they grow, off the GUI thread: a thread of its own reads
// each stream's new bytes and decodes them, and the GUI thread takes what arrived
// once per frame (every `frameMs`), all streams together, as one `frame` signal. A
// burst of thousands of events a second then costs the GUI thread one handful of
// appends and one replot a frame, not a decode and a replot an event.
#pragma once

#include <QObject>
#include <QString>
#include <QTimer>
#include <atomic>
#include <condition_variable>
#include <map>
#include <mutex>
#include <thread>
#include <vector>

#include "engine/proto/events.pb.h"

namespace netloom::gui {

class EventTail : public QObject {
  Q_OBJECT

 public:
  struct Batch {
    int stream = 0;
    std::vector<proto::TrainEvent> events;
    int64_t nextOffset = 0;  // the byte after the last of them
  };

  explicit EventTail(int frameMs = 16, QObject* parent = nullptr);
  ~EventTail() override;

  // follow, unfollow and clear are called on the thread the tail lives in; the frame
  // timer ticks only while a stream is followed, and the reader sleeps while none is.
  // Follows the stream in `path` from byte `offset` (it may not exist yet).
  void follow(int stream, const QString& path, int64_t offset = 0);
  void unfollow(int stream);
  void clear();
  std::vector<int> streams() const;
  // Everything of `stream` the file holds now and no frame has delivered, read on
  // the caller's thread: for a caller that must be up to date at once (a run that
  // ended). Those events are not delivered again.
  Batch drain(int stream);
  // New bytes are there (a mirror was appended to): read now, not at the next look.
  void wake();

 signals:
  void frame(const std::vector<netloom::gui::EventTail::Batch>& batches);

 private:
  struct Stream {
    std::string path;
    int64_t offset = 0;
  };
  void readLoop();
  void deliver();
  // Takes what `stream`'s file holds past its offset: with m_mutex held.
  void readNow(int stream, Batch& into);

  QTimer m_frame;
  mutable std::mutex m_mutex;
  std::condition_variable m_wake;
  std::map<int, Stream> m_streams;
  std::vector<Batch> m_ready;  // decoded, waiting for the next frame
  bool m_quit = false;
  std::thread m_reader;
};

}  // namespace netloom::gui
