#include "gui/settings_form.h"

#include <google/protobuf/descriptor.h>
#include <google/protobuf/message.h>

#include <QApplication>
#include <QCheckBox>
#include <QComboBox>
#include <QDoubleSpinBox>
#include <QFileInfo>
#include <QFormLayout>
#include <QGroupBox>
#include <QLabel>
#include <QLineEdit>
#include <QListWidget>
#include <QPainter>
#include <QPushButton>
#include <QRegularExpression>
#include <QScrollArea>
#include <QSpinBox>
#include <QVBoxLayout>
#include <type_traits>

#include "engine/data/dataset.h"
#include "engine/ops/optimizer_settings.h"
#include "engine/train/project_check.h"
#include "engine/train/schedule.h"
#include "gui/evaluation.h"
#include "gui/settings_hints.h"

namespace netloom::gui {

namespace {

// A number shown as it reads best for its size (0.002, 1e-08, 0.9), not with six
// fixed decimals that turn 1e-8 into 0.000000; typed in either way.
class NumberBox : public QDoubleSpinBox {
 public:
  NumberBox() {
    setDecimals(12);
    setRange(-1e9, 1e9);
    setStepType(QAbstractSpinBox::AdaptiveDecimalStepType);
  }
  QString textFromValue(double v) const override { return QString::number(v, 'g', 10); }
  double valueFromText(const QString& text) const override { return text.trimmed().toDouble(); }
  QValidator::State validate(QString& text, int&) const override {
    bool ok = false;
    text.trimmed().toDouble(&ok);
    if (ok) return QValidator::Acceptable;
    static const QRegularExpression partial("^\\s*[-+]?[0-9]*\\.?[0-9]*([eE][-+]?[0-9]*)?\\s*$");
    return partial.match(text).hasMatch() ? QValidator::Intermediate : QValidator::Invalid;
  }
};

using google::protobuf::Descriptor;
using google::protobuf::FieldDescriptor;
using google::protobuf::Message;

constexpr int kPreviewSamples = 48;

// The message holding `path`'s last field, and that field's name; null when a
// step of the path is not a message field. `Msg` is Message or const Message.
// `created` (where given) tells whether a message on the way was not there before:
// one of a oneof's other choices, or a section never set.
template <class Msg>
Msg* walk(Msg& root, const std::string& path, std::string& leaf, bool* created = nullptr) {
  Msg* m = &root;
  size_t start = 0;
  for (size_t dot; (dot = path.find('.', start)) != std::string::npos; start = dot + 1) {
    const FieldDescriptor* f = m->GetDescriptor()->FindFieldByName(path.substr(start, dot - start));
    if (!f || f->cpp_type() != FieldDescriptor::CPPTYPE_MESSAGE) return nullptr;
    if constexpr (std::is_const_v<Msg>) {
      m = &m->GetReflection()->GetMessage(*m, f);
    } else {
      if (created && !m->GetReflection()->HasField(*m, f)) *created = true;
      m = m->GetReflection()->MutableMessage(m, f);
    }
  }
  leaf = path.substr(start);
  return m;
}

int typingIdOf(const std::string& path) {
  return int(std::hash<std::string>{}(path)&0x3fffffff) | 1;
}

}  // namespace

SettingsForm::SettingsForm(editor::GraphDocument* doc, Part part, QWidget* parent)
    : QWidget(parent), m_doc(doc), m_part(part) {
  auto* inner = new QWidget;
  auto* form = new QFormLayout(inner);
  const Descriptor* d =
      part == Part::Train ? proto::TrainDef::descriptor() : proto::DataDef::descriptor();
  build(form, d, "");
  // Long rows wrap (labels) or shrink (fields) to the dock's width: it scrolls down,
  // never sideways.
  form->setRowWrapPolicy(QFormLayout::WrapLongRows);
  for (QComboBox* c : inner->findChildren<QComboBox*>()) {
    c->setSizeAdjustPolicy(QComboBox::AdjustToMinimumContentsLengthWithIcon);
    c->setMinimumContentsLength(8);
  }
  auto* scroll = new QScrollArea;
  scroll->setWidget(inner);
  scroll->setWidgetResizable(true);
  scroll->setHorizontalScrollBarPolicy(Qt::ScrollBarAlwaysOff);
  auto* lay = new QVBoxLayout(this);
  lay->setContentsMargins(2, 2, 2, 2);
  m_problems = new QLabel;
  m_problems->setObjectName("settingsProblems");
  m_problems->setWordWrap(true);
  m_problems->setTextInteractionFlags(Qt::TextSelectableByMouse);
  m_problems->hide();
  lay->addWidget(m_problems);
  lay->addWidget(scroll, 1);
  if (part == Part::Data) {
    auto* button = new QPushButton(tr("Preview Samples"));
    m_samples = new QListWidget;
    showAsThumbnails(m_samples, 42);
    m_samples->setMinimumHeight(120);
    m_counts = new QLabel;
    m_counts->setWordWrap(true);
    lay->addWidget(button);
    lay->addWidget(m_samples);
    lay->addWidget(m_counts);
    connect(button, &QPushButton::clicked, this, [this] {
      if (Status s = preview(); !s) m_counts->setText(QString::fromStdString(s.message()));
    });
  }
  connect(doc, &editor::GraphDocument::settingsChanged, this, &SettingsForm::reload);
  connect(doc, &editor::GraphDocument::reset, this, &SettingsForm::reload);
  reload();
}

QComboBox* SettingsForm::choiceBox(const FieldHint& hint,
                                   std::function<void(const std::string&)> set) {
  auto* c = new QComboBox;
  for (const char* choice : hint.choices) {
    const QString entry = QString::fromUtf8(choice);
    c->addItem(tr(entry.section('|', 1).toUtf8().constData()), entry.section('|', 0, 0));
  }
  // A device may name any GPU ("cuda:3"): typed where the list lacks it.
  c->setEditable(QString(hint.path) == "device");
  c->setInsertPolicy(QComboBox::NoInsert);
  auto commitChoice = [this, c, set] {
    if (m_loading) return;
    const int i = c->currentIndex();
    // A listed choice stands for its value; anything typed is the value itself.
    const bool listed = i >= 0 && c->itemText(i) == c->currentText() && c->itemData(i).isValid();
    set((listed ? c->itemData(i).toString() : c->currentText().trimmed()).toStdString());
  };
  connect(c, &QComboBox::activated, this, commitChoice);
  if (c->isEditable()) connect(c->lineEdit(), &QLineEdit::editingFinished, this, commitChoice);
  return c;
}

SchedulePlot::SchedulePlot(QWidget* parent) : QWidget(parent) {
  setObjectName("schedulePlot");
  setMinimumHeight(70);
  setToolTip(tr("The learning rate over the run, epoch by epoch"));
}

void SchedulePlot::setSchedule(const proto::LrSchedule& s, double lr, int epochs) {
  // Steps per epoch are not known before the data is loaded: 100 stand for one.
  constexpr int64_t kPerEpoch = 100;
  const int64_t total = kPerEpoch * std::max(1, epochs);
  m_points.clear();
  m_epochs = std::max(1, epochs);
  m_max = 0;
  for (int64_t step = 1; step <= total; step += std::max<int64_t>(1, total / 200)) {
    double rate = learningRate(s, lr, step, kPerEpoch, total);
    m_points.push_back({double(step) / kPerEpoch, rate});
    m_max = std::max(m_max, rate);
  }
  update();
}

void SchedulePlot::paintEvent(QPaintEvent*) {
  QPainter p(this);
  p.setRenderHint(QPainter::Antialiasing);
  const QRectF area = QRectF(rect()).adjusted(4, 14, -4, -14);
  p.setPen(palette().color(QPalette::Mid));
  p.drawRect(area);
  if (m_points.empty() || m_max <= 0) return;
  QPolygonF line;
  for (const QPointF& pt : m_points)
    line << QPointF(area.left() + area.width() * pt.x() / m_epochs,
                    area.bottom() - area.height() * pt.y() / m_max);
  p.setPen(QPen(palette().color(QPalette::Highlight), 1.5));
  p.drawPolyline(line);
  p.setPen(palette().color(QPalette::Text));
  QFont f = font();
  f.setPointSizeF(7.5);
  p.setFont(f);
  p.drawText(QRectF(rect()).adjusted(4, 0, -4, 0), Qt::AlignTop | Qt::AlignLeft,
             tr("learning rate, max %1").arg(m_max, 0, 'g', 3));
  p.drawText(QRectF(rect()).adjusted(4, 0, -4, 0), Qt::AlignBottom | Qt::AlignRight,
             tr("epoch %1").arg(m_epochs));
}

QWidget* SettingsForm::field(const std::string& path) const {
  auto it = m_fields.find(path);
  return it == m_fields.end() ? nullptr : it->second;
}

void SettingsForm::build(QFormLayout* form, const Descriptor* d, const std::string& prefix) {
  for (int i = 0; i < d->field_count(); ++i) {
    const FieldDescriptor* f = d->field(i);
    std::string path = prefix + f->name();
    const FieldHint* hint = fieldHint(m_part == Part::Train, path);
    if (hint && hint->hidden) continue;
    const QString text = hint && hint->label ? tr(hint->label) : fieldLabel(f->name());
    if (f->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE) {
      if (f->is_repeated()) continue;
      auto* box = new QGroupBox(text);
      box->setObjectName(QString::fromStdString(path));
      auto* sub = new QFormLayout(box);
      build(sub, f->message_type(), path + ".");
      if (path == "schedule") {  // what the chosen schedule does over the run
        m_schedule = new SchedulePlot;
        sub->addRow(m_schedule);
      }
      form->addRow(box);
      m_groups[path] = box;
      continue;
    }
    QWidget* w = nullptr;
    auto edit = [this, path](auto fn) { commit(path, fn); };
    if (f->is_repeated()) {
      if (f->cpp_type() != FieldDescriptor::CPPTYPE_STRING) continue;
      auto* e = new QLineEdit;
      e->setPlaceholderText(tr("comma-separated"));
      connect(e, &QLineEdit::editingFinished, this, [this, e, edit] {
        if (m_loading) return;
        QStringList items = e->text().split(',', Qt::SkipEmptyParts);
        edit([items](Message& m, const std::string& leaf) {
          const FieldDescriptor* fd = m.GetDescriptor()->FindFieldByName(leaf);
          m.GetReflection()->ClearField(&m, fd);
          for (const QString& s : items)
            m.GetReflection()->AddString(&m, fd, s.trimmed().toStdString());
        });
      });
      w = e;
    } else {
      switch (f->cpp_type()) {
        case FieldDescriptor::CPPTYPE_INT32:
        case FieldDescriptor::CPPTYPE_INT64:
        case FieldDescriptor::CPPTYPE_UINT32:
        case FieldDescriptor::CPPTYPE_UINT64: {
          auto* s = new QSpinBox;
          bool isUnsigned = f->cpp_type() == FieldDescriptor::CPPTYPE_UINT32 ||
                            f->cpp_type() == FieldDescriptor::CPPTYPE_UINT64;
          s->setRange(isUnsigned ? 0 : -1000000000, 2000000000);
          if (hint && hint->minimum > -1e9) s->setMinimum(int(hint->minimum));
          if (hint && hint->minimumText) s->setSpecialValueText(tr(hint->minimumText));
          connect(s, &QSpinBox::valueChanged, this, [this, edit](int v) {
            if (m_loading) return;
            edit([v](Message& m, const std::string& leaf) {
              const FieldDescriptor* fd = m.GetDescriptor()->FindFieldByName(leaf);
              const auto* r = m.GetReflection();
              switch (fd->cpp_type()) {
                case FieldDescriptor::CPPTYPE_INT32: r->SetInt32(&m, fd, v); break;
                case FieldDescriptor::CPPTYPE_INT64: r->SetInt64(&m, fd, v); break;
                case FieldDescriptor::CPPTYPE_UINT32: r->SetUInt32(&m, fd, uint32_t(v)); break;
                default: r->SetUInt64(&m, fd, uint64_t(v)); break;
              }
            });
          });
          w = s;
          break;
        }
        case FieldDescriptor::CPPTYPE_DOUBLE:
        case FieldDescriptor::CPPTYPE_FLOAT: {
          auto* s = new NumberBox;
          if (hint && hint->minimum > -1e9) s->setMinimum(hint->minimum);
          if (hint && hint->minimumText) s->setSpecialValueText(tr(hint->minimumText));
          connect(s, &QDoubleSpinBox::valueChanged, this, [this, edit](double v) {
            if (m_loading) return;
            edit([v](Message& m, const std::string& leaf) {
              const FieldDescriptor* fd = m.GetDescriptor()->FindFieldByName(leaf);
              if (fd->cpp_type() == FieldDescriptor::CPPTYPE_DOUBLE)
                m.GetReflection()->SetDouble(&m, fd, v);
              else
                m.GetReflection()->SetFloat(&m, fd, float(v));
            });
          });
          w = s;
          break;
        }
        case FieldDescriptor::CPPTYPE_BOOL: {
          auto* c = new QCheckBox;
          connect(c, &QCheckBox::toggled, this, [this, edit](bool v) {
            if (m_loading) return;
            edit([v](Message& m, const std::string& leaf) {
              m.GetReflection()->SetBool(&m, m.GetDescriptor()->FindFieldByName(leaf), v);
            });
          });
          w = c;
          break;
        }
        case FieldDescriptor::CPPTYPE_ENUM: {
          auto* c = new QComboBox;
          for (int k = 0; k < f->enum_type()->value_count(); ++k)
            c->addItem(enumText(f->enum_type()->value(k)), f->enum_type()->value(k)->number());
          connect(c, &QComboBox::currentIndexChanged, this, [this, c, edit](int) {
            if (m_loading) return;
            int number = c->currentData().toInt();
            edit([number](Message& m, const std::string& leaf) {
              m.GetReflection()->SetEnumValue(&m, m.GetDescriptor()->FindFieldByName(leaf), number);
            });
          });
          w = c;
          break;
        }
        case FieldDescriptor::CPPTYPE_STRING: {
          if (hint && !hint->choices.empty()) {
            w = choiceBox(*hint, [edit](const std::string& v) {
              edit([v](Message& m, const std::string& leaf) {
                m.GetReflection()->SetString(&m, m.GetDescriptor()->FindFieldByName(leaf), v);
              });
            });
            break;
          }
          auto* e = new QLineEdit;
          if (hint && hint->tip) e->setPlaceholderText(tr(hint->tip));
          connect(e, &QLineEdit::editingFinished, this, [this, e, edit] {
            if (m_loading) return;
            std::string v = e->text().toStdString();
            edit([v](Message& m, const std::string& leaf) {
              m.GetReflection()->SetString(&m, m.GetDescriptor()->FindFieldByName(leaf), v);
            });
          });
          w = e;
          break;
        }
        default: continue;
      }
    }
    w->setObjectName(QString::fromStdString(path));
    if (hint && hint->tip) w->setToolTip(tr(hint->tip));
    form->addRow(text, w);
    m_fields[path] = w;
    m_forms[path] = form;
  }
}

void SettingsForm::commit(const std::string& path,
                          const std::function<void(Message&, const std::string&)>& set) {
  proto::TrainDef train = m_doc->train();
  proto::DataDef data = m_doc->data();
  Message& root = m_part == Part::Train ? static_cast<Message&>(train) : data;
  const std::string before = root.SerializeAsString();
  std::string leaf;
  bool created = false;
  Message* m = walk(root, path, leaf, &created);
  if (!m) return;
  set(*m, leaf);
  // Leaving a field of a section that is not there (an empty CSV path while the data
  // come from IDX files) as it was is no edit: it must not switch the data source
  // and wipe the one in use.
  if (created && m->ByteSizeLong() == 0) return reload();
  if (root.SerializeAsString() == before) return;
  const FieldHint* hint = fieldHint(m_part == Part::Train, path);
  const QString name =
      hint && hint->label ? tr(hint->label) : fieldLabel(path.substr(path.rfind('.') + 1));
  m_doc->setSettings(train, data, tr("Set %1").arg(name.toLower()), typingIdOf(path));
}

void SettingsForm::reload() {
  m_loading = true;
  const Message& root =
      m_part == Part::Train ? static_cast<const Message&>(m_doc->train()) : m_doc->data();
  // What the optimizer uses where a field is unset (beta1 0.9, not 0).
  auto effective = m_part == Part::Train ? optimizerSettings(m_doc->train().optimizer())
                                         : Result<OptimizerSettings>(makeError("not shown"));
  for (auto& [path, w] : m_fields) {
    // A field being typed in is never rewritten under the cursor.
    if (w->hasFocus() || w->isAncestorOf(QApplication::focusWidget())) continue;
    std::string leaf;
    const Message* m = walk(root, path, leaf);
    if (!m) continue;
    const FieldDescriptor* f = m->GetDescriptor()->FindFieldByName(leaf);
    const auto* r = m->GetReflection();
    if (f->is_repeated()) {
      QStringList items;
      for (int i = 0; i < r->FieldSize(*m, f); ++i)
        items << QString::fromStdString(r->GetRepeatedString(*m, f, i));
      if (auto* e = qobject_cast<QLineEdit*>(w); e && !e->hasFocus()) e->setText(items.join(", "));
      continue;
    }
    switch (f->cpp_type()) {
      case FieldDescriptor::CPPTYPE_INT32: {
        // An optional number left unset shows what a run uses (batch size 32).
        const FieldHint* hint = fieldHint(m_part == Part::Train, path);
        const bool unset = f->has_presence() && !r->HasField(*m, f);
        const int value = unset && hint ? int(hint->unsetValue) : r->GetInt32(*m, f);
        // A value a file holds below the field's range is shown as it is (Problems says
        // why it is refused), so typing a valid one is an edit.
        auto* spin = static_cast<QSpinBox*>(w);
        if (hint && hint->minimum > -1e9) spin->setMinimum(std::min(value, int(hint->minimum)));
        spin->setValue(value);
        break;
      }
      case FieldDescriptor::CPPTYPE_INT64:
        static_cast<QSpinBox*>(w)->setValue(int(r->GetInt64(*m, f)));
        break;
      case FieldDescriptor::CPPTYPE_UINT32:
        static_cast<QSpinBox*>(w)->setValue(int(r->GetUInt32(*m, f)));
        break;
      case FieldDescriptor::CPPTYPE_UINT64:
        static_cast<QSpinBox*>(w)->setValue(int(r->GetUInt64(*m, f)));
        break;
      case FieldDescriptor::CPPTYPE_DOUBLE: {
        double v = r->GetDouble(*m, f);
        if (f->has_presence() && !r->HasField(*m, f) && effective &&
            path.rfind("optimizer.", 0) == 0) {
          if (leaf == "lr") v = effective->lr;
          if (leaf == "beta1") v = effective->beta1;
          if (leaf == "beta2") v = effective->beta2;
          if (leaf == "eps") v = effective->eps;
        }
        static_cast<QDoubleSpinBox*>(w)->setValue(v);
        break;
      }
      case FieldDescriptor::CPPTYPE_FLOAT:
        static_cast<QDoubleSpinBox*>(w)->setValue(r->GetFloat(*m, f));
        break;
      case FieldDescriptor::CPPTYPE_BOOL:
        static_cast<QCheckBox*>(w)->setChecked(r->GetBool(*m, f));
        break;
      case FieldDescriptor::CPPTYPE_ENUM: {
        auto* c = static_cast<QComboBox*>(w);
        c->setCurrentIndex(c->findData(r->GetEnumValue(*m, f)));
        break;
      }
      case FieldDescriptor::CPPTYPE_STRING:
        if (auto* c = qobject_cast<QComboBox*>(w)) {
          const QString v = QString::fromStdString(r->GetString(*m, f));
          int i = c->findData(v);
          if (i < 0) c->setEditText(v);
          c->setCurrentIndex(i);
          if (i < 0 && c->isEditable()) c->setEditText(v);
        } else if (auto* e = static_cast<QLineEdit*>(w); !e->hasFocus()) {
          e->setText(QString::fromStdString(r->GetString(*m, f)));
        }
        break;
      default: break;
    }
  }
  showRows(root);
  if (m_schedule) {
    const proto::TrainDef& t = m_doc->train();
    auto effective = optimizerSettings(t.optimizer());
    m_schedule->setSchedule(t.schedule(), effective ? effective->lr : 1e-3,
                            t.epochs() > 0 ? t.epochs() : 1);
  }
  m_loading = false;
  showProblems();
}

// Rows that apply to one optimizer or schedule follow its choice; of the data
// sources, only the one in use shows (the dataset picker changes it).
void SettingsForm::showRows(const Message& root) {
  for (const auto& [path, w] : m_fields) {
    const FieldHint* hint = fieldHint(m_part == Part::Train, path);
    if (!hint || !hint->onlyWhen) continue;
    std::string leaf;
    const Message* m = walk(root, hint->onlyWhen, leaf);
    if (!m) continue;
    const FieldDescriptor* f = m->GetDescriptor()->FindFieldByName(leaf);
    int value = m->GetReflection()->GetEnumValue(*m, f);
    bool on = std::find(hint->onlyValues.begin(), hint->onlyValues.end(), value) !=
              hint->onlyValues.end();
    m_forms.at(path)->setRowVisible(w, on);
  }
  const google::protobuf::OneofDescriptor* source = root.GetDescriptor()->FindOneofByName("source");
  if (!source) return;
  const FieldDescriptor* active = root.GetReflection()->GetOneofFieldDescriptor(root, source);
  for (int i = 0; i < source->field_count(); ++i)
    if (auto it = m_groups.find(source->field(i)->name()); it != m_groups.end())
      it->second->setVisible(!active || active == source->field(i));
}

void SettingsForm::showProblems() {
  proto::Project project;
  *project.mutable_train() = m_doc->train();
  *project.mutable_data() = m_doc->data();
  std::vector<std::string> warnings;
  Status s = checkProject(project, &warnings);
  const std::string prefix = m_part == Part::Train ? "train." : "data.";
  auto mine = [&](const std::string& text) { return text.rfind(prefix, 0) == 0; };
  QStringList lines;
  QWidget* flagged = nullptr;
  if (!s.ok() && mine(s.message())) {
    lines << QString("<b style='color:#c62828'>%1</b>")
                 .arg(QString::fromStdString(s.message()).toHtmlEscaped());
    // The message opens with the field's path: the longest field path it names.
    const std::string rest = s.message().substr(prefix.size());
    size_t best = 0;
    for (const auto& [path, w] : m_fields)
      if (path.size() > best && rest.rfind(path, 0) == 0 &&
          (rest.size() == path.size() || rest[path.size()] == ' ' || rest[path.size()] == ':')) {
        best = path.size();
        flagged = w;
      }
  }
  for (const std::string& w : warnings)
    if (mine(w))
      lines << QString("<span style='color:#a15c00'>%1</span>")
                   .arg(tr("warning: %1").arg(QString::fromStdString(w).toHtmlEscaped()));
  m_problems->setText(lines.join("<br>"));
  m_problems->setVisible(!lines.isEmpty());
  if (m_flagged && m_flagged != flagged) m_flagged->setStyleSheet({});
  if (flagged) flagged->setStyleSheet("border: 1px solid #c62828;");
  m_flagged = flagged;
}

Status SettingsForm::preview() {
  if (m_part != Part::Data) return makeError("only the Data dock previews samples");
  QString dir =
      m_doc->filePath().isEmpty() ? QString(".") : QFileInfo(m_doc->filePath()).absolutePath();
  auto splits = loadData(m_doc->data(), dir.toStdString(), m_doc->train().seed());
  if (!splits) return splits.error();
  const Dataset& train = splits->train;
  const auto& names = m_doc->data().class_names();
  auto name = [&](int32_t c) {
    return c >= 0 && c < names.size() ? QString::fromStdString(names.Get(c)) : QString::number(c);
  };
  m_samples->clear();
  for (int64_t i = 0; i < std::min<int64_t>(kPreviewSamples, train.size()); ++i) {
    auto* it = new QListWidgetItem(name(train.labels[size_t(i)]), m_samples);
    QImage img = sampleImage(train, i);
    if (!img.isNull()) it->setIcon(QPixmap::fromImage(img.scaled(42, 42)));
  }
  std::vector<int64_t> counts(size_t(std::max<int32_t>(train.classes, 0)), 0);
  for (int32_t l : train.labels)
    if (l >= 0 && size_t(l) < counts.size()) ++counts[size_t(l)];
  QStringList parts;
  for (size_t c = 0; c < counts.size(); ++c)
    parts << QString("%1 %2").arg(name(int32_t(c))).arg(counts[c]);
  m_counts->setText(tr("%1 training, %2 validation, %3 test samples · classes: %4")
                        .arg(train.size())
                        .arg(splits->val.size())
                        .arg(splits->test.size())
                        .arg(parts.join(", ")));
  return {};
}

}  // namespace netloom::gui
