// The window's docks: each scrolls what does not fit rather than growing the window;
// their sizes are fitted to the window, and the window's geometry and docks are
// remembered for each screen size, so a laptop and a desktop monitor keep their own.
#pragma once

#include <QByteArray>
#include <QCoreApplication>
#include <QMap>
#include <QRect>

class QDockWidget;
class QMainWindow;
class QWidget;

namespace netloom::gui {

class DockLayout {
  Q_DECLARE_TR_FUNCTIONS(DockLayout)

 public:
  explicit DockLayout(QMainWindow* window) : m_window(window) {}

  // A dock titled `title` (translated here, and its object name) around `w`, in a
  // scroll area unless `w` scrolls itself.
  QDockWidget* add(const char* title, QWidget* w, Qt::DockWidgetArea area,
                   bool scrollsItself = false);
  // Sizes the window for its screen, fits the docks, keeps that as the default, and
  // restores the geometry and docks saved for this screen size.
  void restore();
  void reset();                  // View ▸ Reset Layout: the docks as they were first laid out
  void save();                   // on close
  void raiseDockOf(QWidget* w);  // shows and raises the dock `w` is in

 private:
  QRect availableScreen() const;
  QString settingsKey() const;  // settings key prefix for this screen size
  void fit();

  QMainWindow* m_window;
  QMap<QString, QDockWidget*> m_docks;  // by untranslated title
  QByteArray m_default;
};

}  // namespace netloom::gui
