#include "editor/palette.h"

#include <QApplication>
#include <QHeaderView>
#include <QKeyEvent>
#include <QLineEdit>
#include <QMimeData>
#include <QVBoxLayout>
#include <algorithm>

#include "editor/library.h"
#include "editor/scene.h"
#include "editor/view.h"
#include "engine/graph/blocks.h"
#include "engine/graph/op.h"

namespace netloom::editor {

std::vector<const OpDef*> placeableOps() {
  std::vector<const OpDef*> ops;
  for (const OpDef* op : OpRegistry::instance().all())
    if (isPlaceable(*op)) ops.push_back(op);
  std::sort(ops.begin(), ops.end(), [](const OpDef* a, const OpDef* b) {
    return std::tie(a->category, a->name) < std::tie(b->category, b->name);
  });
  return ops;
}

bool opMatches(const OpDef& op, const QString& filter) {
  QString hay = QString::fromStdString(op.name + " " + op.category + " " + op.doc);
  for (const QString& word : filter.split(' ', Qt::SkipEmptyParts))
    if (!hay.contains(word, Qt::CaseInsensitive)) return false;
  return true;
}

// OpTree ----------------------------------------------------------------------------

OpTree::OpTree(QWidget* parent) : QTreeWidget(parent) {
  setHeaderHidden(true);
  setDragEnabled(true);
  setDragDropMode(QAbstractItemView::DragOnly);
  setSelectionMode(QAbstractItemView::SingleSelection);
  setRootIsDecorated(true);
}

QStringList OpTree::mimeTypes() const {
  return {kOpMimeType};
}

QMimeData* OpTree::mimeData(const QList<QTreeWidgetItem*>& items) const {
  for (QTreeWidgetItem* it : items) {
    QString op = it->data(0, Qt::UserRole).toString();
    if (op.isEmpty()) continue;  // a category
    auto* m = new QMimeData;
    m->setData(kOpMimeType, op.toUtf8());
    m->setText(op);
    return m;
  }
  return nullptr;
}

// PaletteWidget ---------------------------------------------------------------------

PaletteWidget::PaletteWidget(QWidget* parent)
    : QWidget(parent), m_search(new QLineEdit(this)), m_tree(new OpTree(this)) {
  m_search->setPlaceholderText(tr("Search layers"));
  m_search->setClearButtonEnabled(true);
  auto* lay = new QVBoxLayout(this);
  lay->setContentsMargins(4, 4, 4, 4);
  lay->addWidget(m_search);
  lay->addWidget(m_tree);
  std::map<std::string, QTreeWidgetItem*> groups;
  for (const OpDef* op : placeableOps()) addItem(groups, *op);
  connect(m_search, &QLineEdit::textChanged, this, &PaletteWidget::setFilter);
  connect(m_tree, &QTreeWidget::itemDoubleClicked, this, [this](QTreeWidgetItem* it) {
    QString op = it->data(0, Qt::UserRole).toString();
    if (!op.isEmpty()) emit opActivated(op);
  });
}

QTreeWidgetItem* PaletteWidget::addItem(std::map<std::string, QTreeWidgetItem*>& groups,
                                        const OpDef& op) {
  QTreeWidgetItem*& g = groups[op.category];
  if (!g) {
    g = new QTreeWidgetItem(m_tree, {QString::fromStdString(op.category)});
    g->setFlags(Qt::ItemIsEnabled);
    g->setExpanded(true);
  }
  auto* it = new QTreeWidgetItem(g, {QString::fromStdString(op.name)});
  it->setData(0, Qt::UserRole, QString::fromStdString(op.name));
  it->setToolTip(0, QString::fromStdString(op.doc));
  it->setFlags(Qt::ItemIsEnabled | Qt::ItemIsSelectable | Qt::ItemIsDragEnabled);
  return it;
}

void PaletteWidget::setBlocks(std::vector<OpDef> blocks) {
  for (int g = m_tree->topLevelItemCount(); g-- > 0;)
    if (m_tree->topLevelItem(g)->text(0) == QLatin1String("Blocks"))
      delete m_tree->takeTopLevelItem(g);
  m_blocks = std::move(blocks);
  std::map<std::string, QTreeWidgetItem*> groups;
  for (const OpDef& b : m_blocks) addItem(groups, b);
  setFilter(m_search->text());
}

std::vector<OpDef> paletteBlocks(const GraphDocument& doc) {
  std::vector<OpDef> out;
  for (const proto::ModelDef& b : doc.placeableBlocks()) out.push_back(blockOp(b));
  return out;
}

QTreeWidgetItem* PaletteWidget::itemFor(const QString& op) const {
  for (int g = 0; g < m_tree->topLevelItemCount(); ++g)
    for (int i = 0; i < m_tree->topLevelItem(g)->childCount(); ++i)
      if (m_tree->topLevelItem(g)->child(i)->data(0, Qt::UserRole).toString() == op)
        return m_tree->topLevelItem(g)->child(i);
  return nullptr;
}

void PaletteWidget::setFilter(const QString& text) {
  const OpRegistry& reg = OpRegistry::instance();
  for (int g = 0; g < m_tree->topLevelItemCount(); ++g) {
    QTreeWidgetItem* group = m_tree->topLevelItem(g);
    int shown = 0;
    for (int i = 0; i < group->childCount(); ++i) {
      QTreeWidgetItem* it = group->child(i);
      std::string name = it->data(0, Qt::UserRole).toString().toStdString();
      const OpDef* op = reg.find(name);
      for (const OpDef& b : m_blocks)
        if (!op && b.name == name) op = &b;
      bool match = op && opMatches(*op, text);
      it->setHidden(!match);
      shown += match;
    }
    group->setHidden(shown == 0);
  }
}

// QuickAdd --------------------------------------------------------------------------

QuickAdd::QuickAdd(GraphView* view)
    : QFrame(view), m_view(view), m_field(new QLineEdit(this)), m_list(new QListWidget(this)) {
  setFrameStyle(QFrame::StyledPanel | QFrame::Raised);
  setAutoFillBackground(true);
  auto* lay = new QVBoxLayout(this);
  lay->setContentsMargins(3, 3, 3, 3);
  m_field->setPlaceholderText(tr("Add node…"));
  lay->addWidget(m_field);
  lay->addWidget(m_list);
  resize(220, 260);
  hide();
  m_field->installEventFilter(this);
  connect(m_field, &QLineEdit::textChanged, this, &QuickAdd::refilter);
  connect(m_list, &QListWidget::itemActivated, this, [this] { accept(); });
}

void QuickAdd::open(QPointF scenePos, const std::vector<std::string>& allowed, NodeId from,
                    int fromPort) {
  m_at = scenePos;
  m_allowed = allowed;
  m_from = from;
  m_fromPort = fromPort;
  m_field->clear();
  refilter();
  QPoint at = m_view->mapFromScene(scenePos);
  at.setX(std::clamp(at.x(), 0, std::max(0, m_view->viewport()->width() - width())));
  at.setY(std::clamp(at.y(), 0, std::max(0, m_view->viewport()->height() - height())));
  move(at);
  show();
  raise();
  m_field->setFocus();
}

const std::vector<std::string>& suggestedAfter(const std::string& op) {
  static const std::vector<std::string> sequence = {"MultiHeadAttention",
                                                    "TransformerBlock",
                                                    "ScaledDotProductAttention",
                                                    "PositionEmbedding",
                                                    "RotaryEmbedding",
                                                    "LayerNorm",
                                                    "RMSNorm",
                                                    "Linear",
                                                    "Dropout"};
  static const std::map<std::string, std::vector<std::string>> after = {
      {"Embedding", sequence},
      {"PositionEmbedding", sequence},
      {"MultiHeadAttention", {"Add", "LayerNorm", "RMSNorm", "Linear", "Dropout"}},
      {"TransformerBlock", {"TransformerBlock", "LayerNorm", "RMSNorm", "Linear"}},
      {"ViTPatchEmbedding", {"TransformerBlock", "MultiHeadAttention", "LayerNorm"}},
      {"LayerNorm", {"Linear", "MultiHeadAttention", "TransformerBlock"}},
      {"RMSNorm", {"Linear", "MultiHeadAttention", "TransformerBlock"}},
      {"Conv2d", {"BatchNorm", "ReLU", "MaxPool2d", "ConvBNReLU"}},
      {"BatchNorm", {"ReLU", "Conv2d", "MaxPool2d"}},
      {"ReLU", {"Conv2d", "MaxPool2d", "Linear", "Dropout", "Flatten"}},
      {"MaxPool2d", {"Conv2d", "Flatten", "ConvBNReLU"}},
      {"Flatten", {"Linear", "Dropout"}},
      {"Linear", {"ReLU", "GELU", "Dropout", "SoftmaxCrossEntropy", "LayerNorm"}},
      {"Input", {"Conv2d", "Linear", "Embedding", "GPT", "Flatten", "ConvBNReLU"}},
  };
  static const std::vector<std::string> none;
  auto it = after.find(op);
  return it == after.end() ? none : it->second;
}

// With no text, what usually follows the source node first, then the rest; with
// text, exact names first, then names that start with the text, then other names
// that contain it, then matches in the category or doc line.
void QuickAdd::refilter() {
  m_list->clear();
  QString text = m_field->text().trimmed();
  std::vector<std::pair<int, const OpDef*>> ranked;
  std::vector<const OpDef*> ops = placeableOps();
  const GraphDocument& doc = *m_view->graphScene()->document();
  std::vector<OpDef> blocks = paletteBlocks(doc);
  for (const OpDef& b : blocks) ops.push_back(&b);
  const std::vector<std::string>& likely =
      doc.contains(m_from) ? suggestedAfter(doc.node(m_from).def.op()) : suggestedAfter("");
  for (const OpDef* op : ops) {
    if (!m_allowed.empty() &&
        std::find(m_allowed.begin(), m_allowed.end(), op->name) == m_allowed.end())
      continue;
    if (!opMatches(*op, text)) continue;
    QString name = QString::fromStdString(op->name);
    auto suggested = std::find(likely.begin(), likely.end(), op->name);
    int rank = text.isEmpty() && suggested != likely.end()
                   ? int(suggested - likely.begin()) - int(likely.size())
               : text.isEmpty()                               ? 0
               : name.compare(text, Qt::CaseInsensitive) == 0 ? 0
               : name.startsWith(text, Qt::CaseInsensitive)   ? 1
               : name.contains(text, Qt::CaseInsensitive)     ? 2
                                                              : 3;
    ranked.push_back({rank, op});
  }
  std::stable_sort(ranked.begin(), ranked.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  for (const auto& [rank, op] : ranked) {
    auto* it = new QListWidgetItem(QString::fromStdString(op->name), m_list);
    it->setToolTip(QString::fromStdString(op->doc));
  }
  if (m_list->count()) m_list->setCurrentRow(0);
}

void QuickAdd::accept() {
  QListWidgetItem* it = m_list->currentItem();
  hide();
  m_view->setFocus();
  if (!it) return;
  m_view->graphScene()->addNodeAt(it->text().toStdString(), m_at, m_from, m_fromPort);
}

bool QuickAdd::eventFilter(QObject* o, QEvent* e) {
  if (o == m_field && e->type() == QEvent::KeyPress) {
    auto* k = static_cast<QKeyEvent*>(e);
    int row = m_list->currentRow();
    switch (k->key()) {
      case Qt::Key_Down: m_list->setCurrentRow(std::min(row + 1, m_list->count() - 1)); return true;
      case Qt::Key_Up: m_list->setCurrentRow(std::max(row - 1, 0)); return true;
      case Qt::Key_Return:
      case Qt::Key_Enter: accept(); return true;
      case Qt::Key_Escape:
        hide();
        m_view->setFocus();
        return true;
      default: break;
    }
  }
  if (o == m_field && e->type() == QEvent::FocusOut && !m_list->hasFocus()) hide();
  return QFrame::eventFilter(o, e);
}

}  // namespace netloom::editor
