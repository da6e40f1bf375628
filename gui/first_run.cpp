#include "gui/first_run.h"

#include <QEvent>
#include <QFileInfo>
#include <QGridLayout>
#include <QLabel>
#include <QPushButton>
#include <QVBoxLayout>

namespace netloom::gui {

FirstRunPage::FirstRunPage(const QStringList& examples, QWidget* canvas) : QWidget(canvas) {
  setObjectName("firstRunPage");
  setAttribute(Qt::WA_StyledBackground);
  setStyleSheet(
      "#firstRunPage { background: palette(base); border: 1px solid palette(mid); "
      "border-radius: 8px; }");
  auto* lay = new QVBoxLayout(this);
  lay->setContentsMargins(20, 16, 20, 16);
  auto* title = new QLabel(tr("<h2>Draw a network, then train it</h2>"));
  lay->addWidget(title);

  auto* start = new QPushButton(tr("New from Dataset…"));
  start->setObjectName("newFromDataset");
  start->setDefault(true);
  connect(start, &QPushButton::clicked, this, &FirstRunPage::newFromDataset);
  lay->addWidget(
      new QLabel(tr("Start from the data: the input is shaped for it and the "
                    "labels are read by the loss.")));
  lay->addWidget(start);

  lay->addWidget(new QLabel(tr("Or open an example:")));
  auto* grid = new QGridLayout;
  int i = 0;
  for (const QString& path : examples) {
    auto* b = new QPushButton(QFileInfo(path).completeBaseName());
    b->setObjectName("example:" + QFileInfo(path).completeBaseName());
    connect(b, &QPushButton::clicked, this, [this, path] { emit openExample(path); });
    grid->addWidget(b, i / 3, i % 3);
    ++i;
  }
  lay->addLayout(grid);

  auto* keys =
      new QLabel(tr("<table cellspacing=4>"
                    "<tr><td><b>Tab</b></td><td>add a layer (type its name)</td></tr>"
                    "<tr><td><b>Drag</b></td><td>from an output port to an input port "
                    "to wire them</td></tr>"
                    "<tr><td><b>F5</b></td><td>train, with live charts</td></tr>"
                    "</table>"));
  keys->setObjectName("firstRunKeys");
  lay->addWidget(keys);
  canvas->installEventFilter(this);
  place();
}

bool FirstRunPage::eventFilter(QObject* watched, QEvent* e) {
  if (watched == parent() && e->type() == QEvent::Resize) place();
  return QWidget::eventFilter(watched, e);
}

void FirstRunPage::place() {
  const QWidget* canvas = parentWidget();
  adjustSize();
  QSize size = sizeHint().boundedTo(canvas->size() - QSize(16, 16));
  resize(size);
  move((canvas->width() - size.width()) / 2, (canvas->height() - size.height()) / 2);
}

}  // namespace netloom::gui
