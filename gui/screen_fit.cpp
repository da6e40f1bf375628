#include "gui/screen_fit.h"

#include <QGuiApplication>
#include <QScreen>
#include <QWidget>

namespace netloom::gui {

namespace {

// Room for a title bar and borders the window manager adds around the window.
constexpr int kFrameWidth = 16, kFrameHeight = 48;

QRect available(const QWidget* w) {
  QScreen* s = w->screen() ? w->screen() : QGuiApplication::primaryScreen();
  return s ? s->availableGeometry() : QRect(0, 0, 1366, 768);
}

}  // namespace

void fitToScreen(QWidget* w, QSize preferred) {
  const QRect avail = available(w);
  const QSize most(avail.width() - kFrameWidth, avail.height() - kFrameHeight);
  // A layout's minimum never pushes the window past the screen: what does not fit
  // scrolls inside it.
  w->setMaximumSize(QWIDGETSIZE_MAX, QWIDGETSIZE_MAX);
  if (w->minimumWidth() > most.width()) w->setMinimumWidth(most.width());
  if (w->minimumHeight() > most.height()) w->setMinimumHeight(most.height());
  w->resize(preferred.boundedTo(most));
  QRect frame(w->pos(), w->size() + QSize(kFrameWidth, kFrameHeight));
  if (!avail.contains(frame)) {
    QPoint at = frame.topLeft();
    at.setX(std::clamp(at.x(), avail.left(), avail.right() + 1 - frame.width()));
    at.setY(std::clamp(at.y(), avail.top(), avail.bottom() + 1 - frame.height()));
    w->move(at);
  }
}

bool onScreen(const QWidget* w) {
  return available(w).contains(QRect(w->pos(), w->size()));
}

}  // namespace netloom::gui
