#include "gui/dock_layout.h"

#include <QDockWidget>
#include <QGuiApplication>
#include <QMainWindow>
#include <QScreen>
#include <QScrollArea>
#include <QSettings>
#include <algorithm>

namespace netloom::gui {

QDockWidget* DockLayout::add(const char* title, QWidget* w, Qt::DockWidgetArea area,
                             bool scrollsItself) {
  auto* d = new QDockWidget(tr(title), m_window);
  d->setObjectName(tr(title));
  m_docks[title] = d;
  if (scrollsItself) {
    w->setMinimumSize(80, 60);
    d->setWidget(w);
    m_window->addDockWidget(area, d);
    return d;
  }
  auto* scroll = new QScrollArea;
  scroll->setWidget(w);
  scroll->setWidgetResizable(true);
  scroll->setFrameShape(QFrame::NoFrame);
  scroll->setMinimumSize(80, 60);
  d->setWidget(scroll);
  m_window->addDockWidget(area, d);
  return d;
}

void DockLayout::restore() {
  // Never larger than the screen it opens on.
  const QRect avail = availableScreen();
  m_window->resize(std::min(1400, avail.width()), std::min(900, avail.height()));
  fit();
  m_default = m_window->saveState();
  QSettings settings;
  m_window->restoreGeometry(settings.value(settingsKey() + "geometry").toByteArray());
  m_window->restoreState(settings.value(settingsKey() + "docks").toByteArray());
  if (m_window->width() > avail.width() || m_window->height() > avail.height()) {
    m_window->resize(std::min(m_window->width(), avail.width()),
                     std::min(m_window->height(), avail.height()));
    m_window->move(avail.topLeft());
  }
}

QRect DockLayout::availableScreen() const {
  QScreen* s = m_window->screen() ? m_window->screen() : QGuiApplication::primaryScreen();
  return s ? s->availableGeometry() : QRect(0, 0, 1366, 768);
}

QString DockLayout::settingsKey() const {
  const QRect avail = availableScreen();
  return QString("layout/%1x%2/").arg(avail.width()).arg(avail.height());
}

// The canvas gets most of the window; the docks share the rest in proportion to the
// window, so a 768-pixel screen still shows a chart, the inspector and a settings tab
// at a usable size.
void DockLayout::fit() {
  const int w = m_window->width(), h = m_window->height();
  m_window->resizeDocks(
      {m_docks.value("Layers"), m_docks.value("Inspector"), m_docks.value("Runs")},
      {std::clamp(w / 7, 150, 200), std::clamp(w / 4, 260, 340), std::clamp(w / 4, 260, 340)},
      Qt::Horizontal);
  m_window->resizeDocks(
      {m_docks.value("Inspector"), m_docks.value("Runs"), m_docks.value("Problems")},
      {h * 2 / 5, h * 3 / 5, std::clamp(h * 2 / 5, 200, 330)}, Qt::Vertical);
}

void DockLayout::reset() {
  m_window->restoreState(m_default);
  for (QDockWidget* d : m_window->findChildren<QDockWidget*>()) d->show();
  m_docks.value("Training")->raise();
  m_docks.value("Runs")->raise();
}

void DockLayout::save() {
  QSettings settings;
  settings.setValue(settingsKey() + "geometry", m_window->saveGeometry());
  settings.setValue(settingsKey() + "docks", m_window->saveState());
}

void DockLayout::raiseDockOf(QWidget* w) {
  // A dock holds its widget in a scroll area.
  for (QDockWidget* d : m_window->findChildren<QDockWidget*>())
    if (d->widget() == w || (d->widget() && d->widget()->isAncestorOf(w))) d->show(), d->raise();
}

}  // namespace netloom::gui
