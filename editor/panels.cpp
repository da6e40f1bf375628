#include "editor/panels.h"

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
#include "engine/ops/op.h"
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
  connect(doc, &GraphDocument::settingsChanged, this, &ProblemsWidget::reload);
  connect(doc, &GraphDocument::reset, this, &ProblemsWidget::reload);
  // A click is enough, as in an IDE's problem list.
  connect(this, &QListWidget::itemClicked, this, [this](QListWidgetItem* it) {
    NodeId id = m_doc->findNode(it->data(Qt::UserRole).toString().toStdString());
    if (id >= 0) emit nodeActivated(id);
  });
  reload();
}

void ProblemsWidget::setExtra(const QStringList& problems) {
  m_extra = problems;
  reload();
}

void ProblemsWidget::reload() {
  clear();
  for (const QString& p : m_extra) {
    auto* it = new QListWidgetItem(p, this);
    it->setForeground(QColor(0xe0, 0x4f, 0x4f));
  }
  // The data, checked with the graph: a run would fail on it before its first step.
  const QString dir =
      m_doc->filePath().isEmpty() ? QString() : QFileInfo(m_doc->filePath()).absolutePath();
  for (const std::string& p : dataProblems(m_doc->data(), dir.toStdString())) {
    auto* it = new QListWidgetItem(QString::fromStdString(p), this);
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

SummaryWidget::SummaryWidget(GraphDocument* doc, QWidget* parent)
    : QTableWidget(parent), m_doc(doc) {
  setColumnCount(6);
  setHorizontalHeaderLabels(
      {tr("Node"), tr("Op"), tr("Output"), tr("Parameters"), tr("FLOPs"), tr("Activations")});
  horizontalHeader()->setSectionResizeMode(QHeaderView::ResizeToContents);
  horizontalHeader()->setStretchLastSection(true);
  verticalHeader()->hide();
  setEditTriggers(QAbstractItemView::NoEditTriggers);
  setSelectionBehavior(QAbstractItemView::SelectRows);
  connect(doc, &GraphDocument::analysisChanged, this, &SummaryWidget::reload);
  reload();
}

void SummaryWidget::reload() {
  const ModelAnalysis& a = m_doc->analysis();
  const std::vector<NodeId>& ids = m_doc->nodes();
  setUpdatesEnabled(false);
  setRowCount(int(ids.size()) + 1);
  int64_t params = 0, flops = 0, bytes = 0;
  auto set = [&](int row, int col, const QString& text, bool right = false) {
    QTableWidgetItem* it = item(row, col);
    if (!it) setItem(row, col, it = new QTableWidgetItem);
    it->setText(text);
    it->setTextAlignment(right ? Qt::AlignRight | Qt::AlignVCenter
                               : Qt::AlignLeft | Qt::AlignVCenter);
  };
  for (size_t r = 0; r < ids.size(); ++r) {
    const proto::NodeDef& def = m_doc->node(ids[r]).def;
    auto it = a.nodes.find(def.name());
    const NodeAnalysis* n = it == a.nodes.end() ? nullptr : &it->second;
    QString shape = n && !n->outputs.empty()
                        ? QString::fromStdString(shapeToString(n->outputs[0].shape))
                        : QString("?");
    set(int(r), 0, QString::fromStdString(def.name()));
    set(int(r), 1, QString::fromStdString(def.op()));
    set(int(r), 2, shape);
    set(int(r), 3, n ? QString::number(n->params) : QString(), true);
    set(int(r), 4, n ? humanCount(double(n->flops)) : QString(), true);
    set(int(r), 5, n ? humanBytes(double(n->activationBytes)) : QString(), true);
    // Totals of a huge model saturate rather than wrap negative.
    if (n) {
      params = saturatingAdd(params, n->params);
      flops = saturatingAdd(flops, n->flops);
      bytes = saturatingAdd(bytes, n->activationBytes);
    }
  }
  int last = int(ids.size());
  set(last, 0, tr("Total"));
  set(last, 1, QString());
  set(last, 2, tr("batch %1").arg(m_doc->batch()));
  set(last, 3, QString::number(params) + " (" + humanCount(double(params)) + ")", true);
  set(last, 4, humanCount(double(flops)), true);
  set(last, 5, humanBytes(double(bytes)), true);
  for (int c = 0; c < 6; ++c) {
    QFont f = item(last, c)->font();
    f.setBold(true);
    item(last, c)->setFont(f);
  }
  m_params = params;
  setUpdatesEnabled(true);
}

}  // namespace netloom::editor
