#include "gui/edit_actions.h"

#include <QClipboard>
#include <QGuiApplication>
#include <QInputDialog>
#include <QMenu>
#include <QThread>
#include <map>
#include <memory>

#include "editor/autolayout.h"
#include "editor/document.h"
#include "editor/scene.h"
#include "editor/view.h"
#include "gui/main_window.h"

namespace netloom::gui {

using namespace netloom::editor;

EditActions::EditActions(MainWindow* window, GraphDocument* doc, GraphScene* scene, GraphView* view)
    : QObject(window), m_window(window), m_doc(doc), m_scene(scene), m_view(view) {
  connect(m_doc, &GraphDocument::changed, this, [this] { ++m_revision; });
  connect(m_doc, &GraphDocument::reset, this, [this] { ++m_revision; });
}

EditActions::~EditActions() {
  if (m_layoutThread) {  // it holds only a copy of the graph; let it end
    m_layoutThread->disconnect(this);
    m_layoutThread->wait();
    delete m_layoutThread;
  }
}

void EditActions::addActions(QMenu* edit) {
  auto make = [this, edit](const QString& name, const QString& text, QKeySequence key,
                           std::function<void()> fn) {
    return m_window->makeAction(edit, name, text, key, std::move(fn), this);
  };
  QAction* undo = m_doc->undoStack()->createUndoAction(m_window, tr("&Undo"));
  undo->setObjectName("undo");
  undo->setShortcut(QKeySequence::Undo);
  QAction* redo = m_doc->undoStack()->createRedoAction(m_window, tr("&Redo"));
  redo->setObjectName("redo");
  redo->setShortcut(QKeySequence::Redo);
  edit->addAction(undo);
  edit->addAction(redo);
  edit->addSeparator();
  make("cut", tr("Cu&t"), QKeySequence::Cut, [this] {
    copySelection();
    deleteSelection();
  });
  make("copy", tr("&Copy"), QKeySequence::Copy, [this] { copySelection(); });
  make("paste", tr("&Paste"), QKeySequence::Paste, [this] { paste(); });
  make("duplicate", tr("&Duplicate"), QKeySequence(Qt::CTRL | Qt::Key_D), [this] {
    std::vector<NodeId> ids = m_doc->duplicate(m_scene->selectedNodes(), QPointF(32, 32));
    m_scene->selectNodes(ids);
  });
  QAction* del = make("delete", tr("De&lete"), QKeySequence::Delete, [this] { deleteSelection(); });
  del->setShortcuts({QKeySequence::Delete, QKeySequence(Qt::Key_Backspace)});
  make("selectAll", tr("Select &All"), QKeySequence::SelectAll, [this] {
    for (QGraphicsItem* it : m_scene->items())
      if (it->flags() & QGraphicsItem::ItemIsSelectable) it->setSelected(true);
  });
  edit->addSeparator();
  make("makeBlock", tr("Make &Block…"), QKeySequence(Qt::CTRL | Qt::Key_G),
       [this] { makeBlock(); });
  make("expandBlock", tr("&Expand Block"), QKeySequence(Qt::CTRL | Qt::SHIFT | Qt::Key_G),
       [this] { expandOrCollapse(true); });
  make("collapseBlock", tr("C&ollapse Block"), QKeySequence(Qt::CTRL | Qt::ALT | Qt::Key_G),
       [this] { expandOrCollapse(false); });
  edit->addSeparator();
  make("layout", tr("Auto-&layout"), QKeySequence(Qt::CTRL | Qt::Key_L), [this] { layoutGraph(); });
}

void EditActions::makeBlock() {
  std::vector<NodeId> ids = m_scene->selectedNodes();
  if (ids.empty()) return m_window->showMessage(tr("Select the nodes to make a block of"));
  QString suggestion = "Block";
  for (int i = 2; m_doc->block(suggestion.toStdString()); ++i)
    suggestion = QString("Block%1").arg(i);
  QString name = m_window->namePrompt()
                     ? m_window->namePrompt()(tr("Make block"), suggestion)
                     : QInputDialog::getText(m_window, tr("Make block"), tr("Block name:"),
                                             QLineEdit::Normal, suggestion);
  if (name.isEmpty()) return;
  auto made = m_doc->makeBlock(ids, name.trimmed().toStdString());
  if (!made) return m_window->showMessage(QString::fromStdString(made.error().message));
  m_scene->selectNodes({*made});
}

void EditActions::expandOrCollapse(bool expand) {
  std::vector<NodeId> ids = m_scene->selectedNodes();
  if (expand) {
    if (ids.size() != 1 || !m_doc->isInstance(ids[0]))
      return m_window->showMessage(tr("Select one block instance to expand"));
    auto nodes = m_doc->expandInstance(ids[0]);
    if (!nodes) return m_window->showMessage(QString::fromStdString(nodes.error().message));
    m_scene->selectNodes(*nodes);
    return;
  }
  auto inst = m_doc->collapse(ids);
  if (!inst) return m_window->showMessage(QString::fromStdString(inst.error().message));
  m_scene->selectNodes({*inst});
}

void EditActions::copySelection() {
  std::vector<NodeId> sel = m_scene->selectedNodes();
  if (sel.empty()) return;
  QGuiApplication::clipboard()->setText(QString::fromStdString(m_doc->copyText(sel)));
  m_pasteCount = 0;
  m_window->showMessage(tr("Copied %n node(s)", "", int(sel.size())));
}

void EditActions::paste() {
  QString text = QGuiApplication::clipboard()->text();
  auto ids = m_doc->pasteText(text.toStdString(), QPointF(32, 32) * (++m_pasteCount));
  if (!ids) {
    m_window->showMessage(QString::fromStdString(ids.error().message));
    return;
  }
  m_scene->selectNodes(*ids);
}

void EditActions::deleteSelection() {
  std::vector<NodeId> sel = m_scene->selectedNodes();
  if (!sel.empty()) m_doc->removeNodes(sel);
}

void EditActions::turnGraph(bool vertical) {
  if (vertical == m_doc->vertical()) return;
  QString why;
  auto positions = runLayout(layoutInput(*m_doc, {}, vertical), &why);
  if (positions.empty() && !m_doc->nodes().empty()) {
    m_window->action("topToBottom")->setChecked(m_doc->vertical());
    return m_window->showMessage(why);
  }
  m_doc->setDirection(vertical ? proto::Layout::TOP_TO_BOTTOM : proto::Layout::LEFT_TO_RIGHT,
                      positions);
  m_view->frameForReading();
}

// Large graphs are laid out on a worker thread from a copy of the graph, so the
// window stays responsive; the result applies as one undo step if nothing changed
// meanwhile.
void EditActions::layoutGraph() {
  if (m_layoutThread) return m_window->showMessage(tr("The graph is being laid out already"));
  std::vector<NodeId> sel = m_scene->selectedNodes();
  bool all = sel.size() <= 1;
  auto in = std::make_shared<LayoutInput>(layoutInput(*m_doc, all ? std::vector<NodeId>{} : sel));
  if (int(in->boxes.size()) < m_backgroundLayoutFrom) {
    QString why;
    auto positions = runLayout(*in, &why);
    if (positions.empty() && !in->boxes.empty()) return m_window->showMessage(why);
    m_doc->placeNodes(positions, tr("Auto-layout"));
    if (all) m_view->frameAll();
    return;
  }
  struct Outcome {
    std::map<NodeId, QPointF> positions;
    QString error;
  };
  auto out = std::make_shared<Outcome>();
  int revision = m_revision;
  m_layoutThread = QThread::create([in, out] { out->positions = runLayout(*in, &out->error); });
  connect(m_layoutThread, &QThread::finished, this, [this, out, revision, all] {
    m_layoutThread->deleteLater();
    m_layoutThread = nullptr;
    if (revision != m_revision)
      return m_window->showMessage(tr("The graph changed while it was laid out: lay it out again"));
    if (out->positions.empty()) return m_window->showMessage(out->error);
    m_doc->placeNodes(out->positions, tr("Auto-layout"));
    if (all) m_view->frameAll();
    m_window->showMessage(tr("Laid out %n node(s)", "", int(out->positions.size())));
  });
  m_window->showMessage(tr("Laying out %n node(s)…", "", int(in->boxes.size())), 0);
  m_layoutThread->start();
}

}  // namespace netloom::gui
