#include "editor/panels.h"

#include <QAbstractTableModel>
#include <QCheckBox>
#include <QComboBox>
#include <QDoubleSpinBox>
#include <QFileInfo>
#include <QFormLayout>
#include <QHeaderView>
#include <QLabel>
#include <QLineEdit>
#include <QRegularExpression>
#include <QSpinBox>
#include <QVBoxLayout>
#include <climits>

#include "engine/data/dataset.h"
#include "engine/graph/op.h"
#include "engine/train/heads.h"
#include "engine/train/project_check.h"
#include "kernels/core/checked.h"

namespace netloom::editor {

QString humanCount(double v) {
  const char* units[] = {"", " k", " M", " G", " T"};
  int u = 0;
  while (std::abs(v) >= 1000 && u < 4) v /= 1000, ++u;
  return u == 0 ? QString::number(qint64(v)) : QString::number(v, 'f', v < 10 ? 2 : 1) + units[u];
}

QString humanBytes(double v) {
  const char* units[] = {" B", " KiB", " MiB", " GiB", " TiB"};
  int u = 0;
  while (v >= 1024 && u < 4) v /= 1024, ++u;
  return u == 0 ? QString::number(qint64(v)) + units[0]
                : QString::number(v, 'f', v < 10 ? 2 : 1) + units[u];
}

namespace {

// "3, 3" or "3×3" -> [3, 3]; nullopt when a part is not an integer.
std::optional<std::vector<int64_t>> parseInts(const QString& text) {
  std::vector<int64_t> out;
  for (const QString& part : text.split(QRegularExpression("[,×x\\s]+"), Qt::SkipEmptyParts)) {
    bool ok = false;
    qlonglong v = part.toLongLong(&ok);
    if (!ok) return std::nullopt;
    out.push_back(v);
  }
  return out;
}

QString intsText(const std::vector<int64_t>& v) {
  QStringList parts;
  for (int64_t x : v) parts << QString::number(x);
  return parts.join(", ");
}

int clampInt(double v) {
  return int(std::clamp(v, double(INT_MIN + 1), double(INT_MAX)));
}

}  // namespace

// InspectorWidget -------------------------------------------------------------------

InspectorWidget::InspectorWidget(GraphDocument* doc, QWidget* parent)
    : QWidget(parent), m_doc(doc) {
  new QVBoxLayout(this);
  connect(doc, &GraphDocument::nodeChanged, this, [this](NodeId id) {
    if (id == m_id) reload();
  });
  connect(doc, &GraphDocument::nodeRemoved, this, [this](NodeId id) {
    if (id == m_id) showNode(-1);
  });
  connect(doc, &GraphDocument::reset, this, [this] { showNode(-1); });
  connect(doc, &GraphDocument::analysisChanged, this, [this] {
    if (m_id >= 0) reload();
  });
  rebuild();
}

void InspectorWidget::showNode(NodeId id) {
  m_id = m_doc->contains(id) ? id : -1;
  m_lastKey.clear();
  rebuild();
}

QWidget* InspectorWidget::fieldFor(const std::string& key) const {
  auto it = m_fields.find(key);
  return it == m_fields.end() ? nullptr : it->second;
}

void InspectorWidget::edit(const std::string& key, const std::optional<proto::AttrValue>& v) {
  if (m_loading || m_id < 0) return;
  if (key != m_lastKey) ++m_typingId, m_lastKey = key;  // one burst of edits per field
  m_doc->setAttr(m_id, key, v, m_typingId);
}

void InspectorWidget::rebuild() {
  QLayout* outer = layout();
  while (QLayoutItem* it = outer->takeAt(0)) {
    delete it->widget();
    delete it;
  }
  m_fields.clear();
  m_name = nullptr;
  m_problems = nullptr;
  auto* page = new QWidget(this);
  outer->addWidget(page);
  m_form = new QFormLayout(page);
  m_form->setFieldGrowthPolicy(QFormLayout::AllNonFixedFieldsGrow);
  if (m_id < 0) {
    auto* hint = new QLabel(tr("Select a node to edit its attributes."), page);
    hint->setWordWrap(true);
    m_form->addRow(hint);
    static_cast<QVBoxLayout*>(outer)->addStretch();
    return;
  }
  const proto::NodeDef& def = m_doc->node(m_id).def;
  const OpDef* op = m_doc->opOf(def);
  m_name = new QLineEdit(page);
  m_form->addRow(tr("Name"), m_name);
  connect(m_name, &QLineEdit::editingFinished, this, [this] {
    if (m_loading || m_id < 0) return;
    std::string name = m_name->text().trimmed().toStdString();
    QString why;
    if (name != m_doc->node(m_id).def.name() && !m_doc->renameNode(m_id, name, &why)) {
      m_name->setToolTip(why);
      m_name->setStyleSheet("border: 1px solid #e04f4f");
    }
  });
  auto* opLabel = new QLabel(
      op ? QString("<b>%1</b> — %2")
               .arg(QString::fromStdString(op->name),
                    QString::fromStdString(op->doc).toHtmlEscaped())
         : tr("<b>%1</b> — an op this version does not know; its attributes are kept as they "
              "are")
               .arg(QString::fromStdString(def.op()).toHtmlEscaped()),
      page);
  opLabel->setWordWrap(true);
  m_form->addRow(opLabel);

  auto docLine = [&](const std::string& text) {
    if (text.empty()) return;
    auto* l = new QLabel(QString::fromStdString(text), page);
    l->setWordWrap(true);
    QFont f = l->font();
    f.setPointSizeF(f.pointSizeF() * 0.85);
    l->setFont(f);
    l->setStyleSheet("color: gray");
    m_form->addRow(QString(), l);
  };

  if (op) {
    for (const AttrDef& a : op->attrs) {
      if (a.internal) continue;
      const std::string key = a.name;
      QWidget* w = nullptr;
      switch (a.kind) {
        case AttrKind::Int: {
          auto* s = new QSpinBox(page);
          int lo = clampInt(a.min), hi = clampInt(a.max);
          // A required value that is not set yet shows as "required" below the range.
          s->setRange(a.required ? lo - 1 : lo, hi);
          if (a.required) s->setSpecialValueText(tr("required"));
          s->setKeyboardTracking(true);
          connect(s, &QSpinBox::valueChanged, this, [this, key, s, a](int v) {
            if (a.required && v == s->minimum()) return edit(key, std::nullopt);
            proto::AttrValue av;
            av.set_i(v);
            edit(key, av);
          });
          w = s;
          break;
        }
        case AttrKind::Float: {
          auto* s = new QDoubleSpinBox(page);
          s->setDecimals(6);
          s->setRange(std::max(a.min, -1e12), std::min(a.max, 1e12));
          s->setSingleStep(a.max <= 1 ? 0.01 : 0.1);
          connect(s, &QDoubleSpinBox::valueChanged, this, [this, key](double v) {
            proto::AttrValue av;
            av.set_f(v);
            edit(key, av);
          });
          w = s;
          break;
        }
        case AttrKind::Bool: {
          auto* c = new QCheckBox(page);
          connect(c, &QCheckBox::toggled, this, [this, key](bool v) {
            proto::AttrValue av;
            av.set_b(v);
            edit(key, av);
          });
          w = c;
          break;
        }
        case AttrKind::String: {
          if (!a.choices.empty()) {
            auto* c = new QComboBox(page);
            for (const std::string& ch : a.choices) c->addItem(QString::fromStdString(ch));
            connect(c, &QComboBox::currentTextChanged, this, [this, key](const QString& v) {
              proto::AttrValue av;
              av.set_s(v.toStdString());
              edit(key, av);
            });
            w = c;
          } else {
            auto* e = new QLineEdit(page);
            connect(e, &QLineEdit::textEdited, this, [this, key](const QString& v) {
              proto::AttrValue av;
              av.set_s(v.toStdString());
              edit(key, av);
            });
            w = e;
          }
          break;
        }
        case AttrKind::Ints: {
          auto* e = new QLineEdit(page);
          e->setPlaceholderText(a.required ? tr("required, e.g. 3, 3") : tr("e.g. 3, 3"));
          connect(e, &QLineEdit::textEdited, this, [this, key, e](const QString& v) {
            auto ints = parseInts(v);
            e->setStyleSheet(ints ? QString() : QString("border: 1px solid #e04f4f"));
            e->setToolTip(ints ? QString() : tr("a list of whole numbers, such as 3, 3"));
            if (!ints) return;
            proto::AttrValue av;
            for (int64_t x : *ints) av.mutable_ints()->add_values(x);
            edit(key, av);
          });
          w = e;
          break;
        }
      }
      w->setObjectName(QString::fromStdString(key));
      m_fields[key] = w;
      m_form->addRow(QString::fromStdString(key), w);
      docLine(a.doc);
    }
  } else {
    for (const auto& [key, v] : def.attrs()) {
      auto* l = new QLineEdit(QString::fromStdString(v.ShortDebugString()), page);
      l->setReadOnly(true);
      m_form->addRow(QString::fromStdString(key), l);
    }
  }
  m_problems = new QLabel(page);
  m_problems->setWordWrap(true);
  m_problems->setStyleSheet("color: #e04f4f");
  m_form->addRow(m_problems);
  static_cast<QVBoxLayout*>(outer)->addStretch();
  reload();
}

void InspectorWidget::reload() {
  if (m_id < 0 || !m_name) return;
  m_loading = true;
  const proto::NodeDef& def = m_doc->node(m_id).def;
  if (!m_name->hasFocus()) m_name->setText(QString::fromStdString(def.name()));
  m_name->setStyleSheet({});
  if (const OpDef* op = m_doc->opOf(def)) {
    for (const AttrDef& a : op->attrs) {
      if (a.internal) continue;
      QWidget* w = fieldFor(a.name);
      auto it = def.attrs().find(a.name);
      const proto::AttrValue* v = it == def.attrs().end() ? nullptr : &it->second;
      if (auto* s = qobject_cast<QSpinBox*>(w))
        s->setValue(v ? int(v->i()) : (a.required ? s->minimum() : int(std::get<int64_t>(a.def))));
      else if (auto* s = qobject_cast<QDoubleSpinBox*>(w))
        s->setValue(v ? v->f() : std::get<double>(a.def));
      else if (auto* c = qobject_cast<QCheckBox*>(w))
        c->setChecked(v ? v->b() : std::get<bool>(a.def));
      else if (auto* c = qobject_cast<QComboBox*>(w))
        c->setCurrentText(QString::fromStdString(v ? v->s() : std::get<std::string>(a.def)));
      else if (auto* e = qobject_cast<QLineEdit*>(w); e && !e->hasFocus()) {
        if (a.kind == AttrKind::Ints)
          e->setText(v ? intsText({v->ints().values().begin(), v->ints().values().end()})
                       : intsText(std::get<std::vector<int64_t>>(a.def)));
        else
          e->setText(QString::fromStdString(v ? v->s() : std::get<std::string>(a.def)));
      }
    }
  }
  QStringList problems;
  for (const ModelProblem& p : m_doc->analysis().problems)
    if (p.node == def.name()) problems << QString::fromStdString(p.message);
  if (m_problems) m_problems->setText(problems.join("\n"));
  m_loading = false;
}

// ProblemsWidget --------------------------------------------------------------------

ProblemsWidget::ProblemsWidget(GraphDocument* doc, QWidget* parent)
    : QListWidget(parent), m_doc(doc) {
  connect(doc, &GraphDocument::analysisChanged, this, &ProblemsWidget::reload);
  connect(doc, &GraphDocument::settingsChanged, this, &ProblemsWidget::recheckData);
  connect(doc, &GraphDocument::reset, this, &ProblemsWidget::recheckData);
  // A click is enough, as in an IDE's problem list.
  connect(this, &QListWidget::itemClicked, this, [this](QListWidgetItem* it) {
    NodeId id = m_doc->findNode(it->data(Qt::UserRole).toString().toStdString());
    if (id >= 0) emit nodeActivated(id);
  });
  recheckData();
}

void ProblemsWidget::setExtra(const QStringList& problems) {
  m_extra = problems;
  recheckData();
}

void ProblemsWidget::recheckData() {
  // The data, checked with the graph: a run would fail on it before its first step.
  m_dataDir = m_doc->filePath().isEmpty() ? QString() : QFileInfo(m_doc->filePath()).absolutePath();
  m_dataProblems.clear();
  for (const std::string& p : dataProblems(m_doc->data(), m_dataDir.toStdString()))
    m_dataProblems << QString::fromStdString(p);
  // The settings as a run checks them: a batch size of 0, a FIXED std of 0, ...
  proto::Project settings;
  *settings.mutable_train() = m_doc->train();
  *settings.mutable_data() = m_doc->data();
  if (Status s = checkProject(settings); !s) m_dataProblems << QString::fromStdString(s.message());
  reload();
}

// What would stop a run before its first step that the graph's analysis does not
// see: which node is the loss. Counted off the document, not a copy of the project,
// so an edit of a large graph stays cheap.
QString ProblemsWidget::lossProblem() const {
  if (m_doc->nodes().empty()) return {};
  // Block instances hide their nodes: the engine's own answer, over the inlined model.
  for (NodeId id : m_doc->nodes())
    if (m_doc->isInstance(id)) {
      auto loss = lossNode(m_doc->toProject());
      return loss ? QString() : QString::fromStdString(loss.error().message);
    }
  const std::string& named = m_doc->train().loss();
  if (!named.empty())
    return m_doc->findNode(named) >= 0
               ? QString()
               : tr("train.loss names '%1', but the model has no such node: choose the loss in "
                    "Training Setup")
                     .arg(QString::fromStdString(named));
  std::vector<std::string> losses;
  for (NodeId id : m_doc->nodes())
    if (const OpDef* op = m_doc->opOf(id); op && op->role == OpRole::Loss)
      losses.push_back(m_doc->node(id).def.name());
  if (losses.empty())
    return tr(
        "The model has no loss: add one (SoftmaxCrossEntropy for classes, MSELoss for "
        "values) after the network's last layer");
  if (losses.size() > 1)
    return tr("The model has several losses ('%1', '%2'): choose the one to minimise in "
              "Training Setup")
        .arg(QString::fromStdString(losses[0]), QString::fromStdString(losses[1]));
  return {};
}

void ProblemsWidget::reload() {
  // A file saved elsewhere finds its data elsewhere.
  if (m_dataDir !=
      (m_doc->filePath().isEmpty() ? QString() : QFileInfo(m_doc->filePath()).absolutePath()))
    return recheckData();
  clear();
  QStringList before = m_extra + m_dataProblems;
  if (QString loss = lossProblem(); !loss.isEmpty()) before << loss;
  for (const QString& p : before) {
    auto* it = new QListWidgetItem(p, this);
    it->setForeground(QColor(0xe0, 0x4f, 0x4f));
  }
  // Inputs without a shape: the cause of what their readers cannot infer.
  for (NodeId id : m_doc->nodes()) {
    const QString hint = m_doc->shapeHint(id);
    if (hint.isEmpty()) continue;
    auto* it = new QListWidgetItem(hint, this);
    it->setData(Qt::UserRole, QString::fromStdString(m_doc->node(id).def.name()));
    it->setForeground(QColor(0xe0, 0x4f, 0x4f));
  }
  for (const ModelProblem& p : m_doc->analysis().problems) {
    QString where = p.node.empty() ? tr("model") : QString::fromStdString(p.node);
    auto* it = new QListWidgetItem(where + ": " + QString::fromStdString(p.message), this);
    it->setData(Qt::UserRole, QString::fromStdString(p.node));
    it->setForeground(QColor(0xe0, 0x4f, 0x4f));
  }
  emit countChanged(count());
}

// SummaryWidget ---------------------------------------------------------------------

// The table reads the analysis as rows are drawn, so a change to thousands of nodes
// costs what is on screen, not a row each.
class SummaryWidget::Model : public QAbstractTableModel {
 public:
  explicit Model(GraphDocument* doc, QObject* parent) : QAbstractTableModel(parent), m_doc(doc) {}

  // The nodes, the total, and under a parallel strategy what one rank holds.
  int rowCount(const QModelIndex& parent = {}) const override {
    return parent.isValid() ? 0 : int(m_rows.size()) + 1 + (m_perRank ? 1 : 0);
  }
  bool perRank() const {
    return m_doc->parallel().strategy != ParallelLayout::Strategy::None &&
           m_doc->parallel().error.empty();
  }
  QString rankText(int col) const {
    const ParallelLayout& p = m_doc->parallel();
    switch (col) {
      case 0: return SummaryWidget::tr("Per rank");
      case 1: return QString::fromStdString(p.describe());
      case 2: return SummaryWidget::tr("weights %1").arg(humanBytes(double(p.weights)));
      case 3: return SummaryWidget::tr("gradients %1").arg(humanBytes(double(p.gradients)));
      case 4: return SummaryWidget::tr("optimizer %1").arg(humanBytes(double(p.optimizerState)));
      case 5:
        return SummaryWidget::tr("%1 + boxing %2")
            .arg(humanBytes(double(p.activations)), humanBytes(double(p.boxing)));
      default: return {};
    }
  }
  int columnCount(const QModelIndex& parent = {}) const override {
    return parent.isValid() ? 0 : 6;
  }

  QVariant headerData(int section, Qt::Orientation o, int role) const override {
    if (o != Qt::Horizontal || role != Qt::DisplayRole) return {};
    static const char* names[] = {QT_TR_NOOP("Node"),   QT_TR_NOOP("Op"),
                                  QT_TR_NOOP("Output"), QT_TR_NOOP("Parameters"),
                                  QT_TR_NOOP("FLOPs"),  QT_TR_NOOP("Activations")};
    return section < 6 ? SummaryWidget::tr(names[section]) : QVariant();
  }

  QVariant data(const QModelIndex& index, int role) const override {
    int row = index.row(), col = index.column();
    bool total = row >= int(m_rows.size());
    if (role == Qt::TextAlignmentRole)
      return int((col >= 3 ? Qt::AlignRight : Qt::AlignLeft) | Qt::AlignVCenter);
    if (role == Qt::FontRole && total) {
      QFont f;
      f.setBold(true);
      return f;
    }
    if (role != Qt::DisplayRole) return {};
    return text(row, col);
  }

  QString text(int row, int col) const {
    if (row == int(m_rows.size()) + 1) return rankText(col);
    if (row == int(m_rows.size())) {
      switch (col) {
        case 0: return SummaryWidget::tr("Total");
        case 2: return SummaryWidget::tr("batch %1").arg(m_doc->batch());
        case 3: return QString::number(m_params) + " (" + humanCount(double(m_params)) + ")";
        case 4: return humanCount(double(m_flops));
        case 5: return humanBytes(double(m_bytes));
        default: return {};
      }
    }
    if (row < 0 || row > int(m_rows.size()) || !m_doc->contains(m_rows[row])) return {};
    const proto::NodeDef& def = m_doc->node(m_rows[row]).def;
    if (col == 0) return QString::fromStdString(def.name());
    if (col == 1) return QString::fromStdString(def.op());
    auto it = m_doc->analysis().nodes.find(def.name());
    const NodeAnalysis* n = it == m_doc->analysis().nodes.end() ? nullptr : &it->second;
    switch (col) {
      case 2:
        return n && !n->outputs.empty() ? QString::fromStdString(shapeToString(n->outputs[0].shape))
                                        : QString("?");
      case 3: return n ? QString::number(n->params) : QString();
      case 4: return n ? humanCount(double(n->flops)) : QString();
      case 5: return n ? humanBytes(double(n->activationBytes)) : QString();
      default: return {};
    }
  }

  void reload() {
    // Totals of a huge model saturate rather than wrap negative.
    m_params = m_flops = m_bytes = 0;
    for (const auto& [name, n] : m_doc->analysis().nodes) {
      m_params = saturatingAdd(m_params, n.params);
      m_flops = saturatingAdd(m_flops, n.flops);
      m_bytes = saturatingAdd(m_bytes, n.activationBytes);
    }
    if (m_rows != m_doc->nodes() || m_perRank != perRank()) {
      beginResetModel();
      m_rows = m_doc->nodes();
      m_perRank = perRank();
      endResetModel();
    } else {
      emit dataChanged(index(0, 0), index(rowCount() - 1, 5));
    }
  }

  int64_t params() const { return m_params; }

 private:
  GraphDocument* m_doc;
  std::vector<NodeId> m_rows;  // the node of each row, in document order
  bool m_perRank = false;      // a row of what one rank holds follows the total
  int64_t m_params = 0, m_flops = 0, m_bytes = 0;
};

SummaryWidget::SummaryWidget(GraphDocument* doc, QWidget* parent)
    : QTableView(parent), m_model(new Model(doc, this)) {
  setModel(m_model);
  horizontalHeader()->setSectionResizeMode(QHeaderView::ResizeToContents);
  horizontalHeader()->setResizeContentsPrecision(0);  // the rows in view
  horizontalHeader()->setStretchLastSection(true);
  verticalHeader()->hide();
  setEditTriggers(QAbstractItemView::NoEditTriggers);
  setSelectionBehavior(QAbstractItemView::SelectRows);
  connect(doc, &GraphDocument::analysisChanged, m_model, &Model::reload);
  connect(doc, &GraphDocument::reset, m_model, &Model::reload);
  m_model->reload();
}

int64_t SummaryWidget::totalParams() const {
  return m_model->params();
}

QString SummaryWidget::cellText(int row, int column) const {
  return m_model->text(row, column);
}

}  // namespace netloom::editor
