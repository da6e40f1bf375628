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
#include <QPushButton>
#include <QRegularExpression>
#include <QScrollArea>
#include <QSpinBox>
#include <QVBoxLayout>
#include <type_traits>

#include "engine/compiler/passes.h"
#include "engine/data/dataset.h"
#include "engine/train/project_check.h"
#include "gui/evaluation.h"

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
template <class Msg>
Msg* walk(Msg& root, const std::string& path, std::string& leaf) {
  Msg* m = &root;
  size_t start = 0;
  for (size_t dot; (dot = path.find('.', start)) != std::string::npos; start = dot + 1) {
    const FieldDescriptor* f = m->GetDescriptor()->FindFieldByName(path.substr(start, dot - start));
    if (!f || f->cpp_type() != FieldDescriptor::CPPTYPE_MESSAGE) return nullptr;
    if constexpr (std::is_const_v<Msg>)
      m = &m->GetReflection()->GetMessage(*m, f);
    else
      m = m->GetReflection()->MutableMessage(m, f);
  }
  leaf = path.substr(start);
  return m;
}

int typingIdOf(const std::string& path) {
  return int(std::hash<std::string>{}(path)&0x3fffffff) | 1;
}

QString label(const std::string& name) {
  QString s = QString::fromStdString(name);
  s.replace('_', ' ');
  return s;
}

}  // namespace

SettingsForm::SettingsForm(editor::GraphDocument* doc, Part part, QWidget* parent)
    : QWidget(parent), m_doc(doc), m_part(part) {
  auto* inner = new QWidget;
  auto* form = new QFormLayout(inner);
  const Descriptor* d =
      part == Part::Train ? proto::TrainDef::descriptor() : proto::DataDef::descriptor();
  build(form, d, "");
  auto* scroll = new QScrollArea;
  scroll->setWidget(inner);
  scroll->setWidgetResizable(true);
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

QWidget* SettingsForm::field(const std::string& path) const {
  auto it = m_fields.find(path);
  return it == m_fields.end() ? nullptr : it->second;
}

void SettingsForm::build(QFormLayout* form, const Descriptor* d, const std::string& prefix) {
  for (int i = 0; i < d->field_count(); ++i) {
    const FieldDescriptor* f = d->field(i);
    std::string path = prefix + f->name();
    if (f->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE) {
      if (f->is_repeated()) continue;
      auto* box = new QGroupBox(label(f->name()));
      auto* sub = new QFormLayout(box);
      build(sub, f->message_type(), path + ".");
      form->addRow(box);
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
            c->addItem(QString::fromStdString(f->enum_type()->value(k)->name()),
                       f->enum_type()->value(k)->number());
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
          auto* e = new QLineEdit;
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
    w->setToolTip(QString::fromStdString((m_part == Part::Train ? "train." : "data.") + path));
    form->addRow(label(f->name()), w);
    m_fields[path] = w;
  }
}

void SettingsForm::commit(const std::string& path,
                          const std::function<void(Message&, const std::string&)>& set) {
  proto::TrainDef train = m_doc->train();
  proto::DataDef data = m_doc->data();
  Message& root = m_part == Part::Train ? static_cast<Message&>(train) : data;
  std::string leaf;
  Message* m = walk(root, path, leaf);
  if (!m) return;
  set(*m, leaf);
  m_doc->setSettings(
      train, data,
      tr("Set %1").arg(QString::fromStdString((m_part == Part::Train ? "train." : "data.") + path)),
      typingIdOf(path));
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
      case FieldDescriptor::CPPTYPE_INT32:
        static_cast<QSpinBox*>(w)->setValue(r->GetInt32(*m, f));
        break;
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
        if (auto* e = static_cast<QLineEdit*>(w); !e->hasFocus())
          e->setText(QString::fromStdString(r->GetString(*m, f)));
        break;
      default: break;
    }
  }
  m_loading = false;
  showProblems();
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
