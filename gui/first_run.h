// The page an empty canvas shows: where to start (a dataset, or one of the example
// projects) and the three keys that build a network (Tab adds a layer, a drag from a
// port wires it, F5 trains). It lies over the canvas while the graph is empty and
// goes as the first node arrives.
#pragma once

#include <QWidget>

namespace netloom::gui {

class FirstRunPage : public QWidget {
  Q_OBJECT

 public:
  // `examples`: the example projects offered, as file paths.
  FirstRunPage(const QStringList& examples, QWidget* canvas);

 signals:
  void newFromDataset();
  void openExample(const QString& path);

 protected:
  bool eventFilter(QObject* watched, QEvent* e) override;  // follows the canvas's size

 private:
  void place();
};

}  // namespace netloom::gui
