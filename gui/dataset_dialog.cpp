#include "gui/dataset_dialog.h"

#include <QCheckBox>
#include <QComboBox>
#include <QDialogButtonBox>
#include <QDir>
#include <QFileDialog>
#include <QFileInfo>
#include <QFormLayout>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QLineEdit>
#include <QListWidget>
#include <QPushButton>
#include <QSpinBox>
#include <QStackedWidget>
#include <QTableWidget>
#include <QTimer>
#include <QUndoStack>
#include <QVBoxLayout>
#include <QtConcurrent/QtConcurrentRun>
#include <cmath>

#include "editor/document.h"
#include "gui/evaluation.h"
#include "gui/image_data_dialog.h"
#include "gui/screen_fit.h"

namespace netloom::gui {

namespace {

constexpr const char* kFashionDir = "/usr/share/datasets/fashion-mnist";
const char* const kFashionFiles[] = {"train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz",
                                     "t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz"};
const char* const kFashionClasses[] = {"T-shirt/top", "Trouser", "Pullover", "Dress", "Coat",
                                       "Sandal",      "Shirt",   "Sneaker",  "Bag",   "Ankle boot"};

// The training split's mean and standard deviation, over every feature, after the
// 1/255 that byte images get first.
void measure(const Dataset& d, DatasetDialog::Preview& p) {
  double sum = 0, squares = 0;
  size_t n = 0;
  auto add = [&](double v) { sum += v, squares += v * v, ++n; };
  if (!d.bytes.empty())
    for (uint8_t b : d.bytes) add(b / 255.0);
  else
    for (float f : d.floats) add(f);
  if (n == 0) return;
  p.mean = sum / double(n);
  p.std = std::sqrt(std::max(0.0, squares / double(n) - p.mean * p.mean));
  if (!(p.std > 1e-12)) p.std = 1;  // a constant feature: divide by nothing
}

// A text source's preview: its windows, its vocabulary with each token's count over
// the training part, and how the training text begins.
DatasetDialog::Preview previewText(const DataSplits& splits) {
  DatasetDialog::Preview p;
  const Dataset& train = splits.train;
  p.text = true;
  p.sampleShape = train.sampleShape;
  p.trainSize = train.size() + splits.val.size();
  p.testSize = splits.test.size();
  p.vocab = train.vocab;
  p.tokens = int64_t(train.tokens->size());
  p.perClass.assign(train.vocab.size(), 0);
  p.samples.resize(train.vocab.size());  // no pictures of tokens
  const std::vector<int32_t>& ids = *train.tokens;
  for (int64_t i = 0; i < train.textEnd; ++i)
    if (size_t(ids[size_t(i)]) < p.perClass.size()) ++p.perClass[size_t(ids[size_t(i)])];
  std::vector<int32_t> start(ids.begin(), ids.begin() + std::min<int64_t>(240, train.textEnd));
  p.excerpt = decodeTokens(start, train.vocab);
  for (const std::string& token : train.vocab)
    p.classNames.push_back(train.byteVocab ? std::to_string(uint8_t(token[0]))
                                           : tokenLabel(token).toStdString());
  return p;
}

// Runs on a worker thread: loads the data as a run would, and what the preview shows.
DatasetDialog::Preview load(const proto::DataDef& def, const std::string& dir,
                            std::vector<std::string> names) {
  DatasetDialog::Preview p;
  auto splits = loadData(def, dir, 1);
  if (!splits) {
    p.status = splits.error();
    return p;
  }
  const Dataset& train = splits->train;
  if (train.isText()) return previewText(*splits);
  p.sampleShape = train.sampleShape;
  p.bytes = !train.bytes.empty();
  p.trainSize = train.size() + splits->val.size();
  p.testSize = splits->test.size();
  const int32_t classes = std::max<int32_t>(train.classes, splits->test.classes);
  if (names.size() != size_t(classes)) names = splits->classNames;
  for (int32_t c = int32_t(names.size()); c < classes; ++c) names.push_back(std::to_string(c));
  p.classNames = names;
  p.perClass.assign(size_t(classes), 0);
  p.samples.resize(size_t(classes));
  for (int64_t i = 0; i < train.size(); ++i) {
    const auto label = size_t(train.labels[size_t(i)]);
    if (label >= p.perClass.size()) continue;
    ++p.perClass[label];
    if (p.samples[label].size() < DatasetDialog::kSamplesPerClass)
      p.samples[label].push_back(sampleImage(train, i));
  }
  measure(train, p);
  return p;
}

QLineEdit* namedEdit(const char* name) {
  auto* e = new QLineEdit;
  e->setObjectName(name);
  return e;
}

}  // namespace

QString installedFashionMnist() {
  for (const char* f : kFashionFiles)
    if (!QFileInfo::exists(QString(kFashionDir) + "/" + f)) return {};
  return kFashionDir;
}

DatasetDialog::DatasetDialog(editor::GraphDocument* doc, QWidget* parent)
    : QDialog(parent),
      m_doc(doc),
      m_sources(new QListWidget),
      m_pages(new QStackedWidget),
      m_summary(new QLabel),
      m_classes(new QTableWidget),
      m_samples(new QListWidget) {
  setObjectName("datasetDialog");
  setWindowTitle(tr("Choose Dataset"));
  m_sources->setObjectName("datasetSources");
  const QString fashion = installedFashionMnist();
  m_sources->addItem(fashion.isEmpty() ? tr("Fashion-MNIST (not installed)")
                                       : tr("Fashion-MNIST (installed)"));
  m_sources->addItem(tr("IDX files (MNIST format)"));
  m_sources->addItem(tr("CSV file"));
  m_sources->addItem(tr("Image folder"));
  m_sources->addItem(tr("Text (a language model)"));
  m_sources->setMaximumWidth(220);

  auto* about = new QLabel(
      fashion.isEmpty()
          ? tr("Install Debian's dataset-fashion-mnist package to use it here.")
          : tr("70,000 grayscale 28×28 images of clothing in 10 classes: 60,000 to train on "
               "and 10,000 to test with. From %1.")
                .arg(fashion));
  about->setWordWrap(true);
  m_pages->addWidget(about);

  m_idxTrainImages = namedEdit("idxTrainImages");
  m_idxTrainLabels = namedEdit("idxTrainLabels");
  m_idxTestImages = namedEdit("idxTestImages");
  m_idxTestLabels = namedEdit("idxTestLabels");
  auto* idx = new QWidget;
  auto* idxForm = new QFormLayout(idx);
  const QString idxFilter = tr("IDX files (*-ubyte *-ubyte.gz *.idx *.gz);;All files (*)");
  idxForm->addRow(tr("Training images"), pathRow(m_idxTrainImages, false, idxFilter));
  idxForm->addRow(tr("Training labels"), pathRow(m_idxTrainLabels, false, idxFilter));
  idxForm->addRow(tr("Test images"), pathRow(m_idxTestImages, false, idxFilter));
  idxForm->addRow(tr("Test labels"), pathRow(m_idxTestLabels, false, idxFilter));
  m_pages->addWidget(idx);

  m_csvTrain = namedEdit("csvTrain");
  m_csvTest = namedEdit("csvTest");
  m_csvLabel = namedEdit("csvLabel");
  m_csvTest->setPlaceholderText(tr("none: a fifth of the training file is held out"));
  m_csvLabel->setPlaceholderText(tr("its header name; empty: the last column"));
  m_csvHeader = new QCheckBox(tr("The first line names the columns"));
  m_csvHeader->setChecked(true);
  auto* csv = new QWidget;
  auto* csvForm = new QFormLayout(csv);
  const QString csvFilter = tr("CSV files (*.csv *.txt);;All files (*)");
  csvForm->addRow(tr("Training file"), pathRow(m_csvTrain, false, csvFilter));
  csvForm->addRow(tr("Test file"), pathRow(m_csvTest, false, csvFilter));
  csvForm->addRow(tr("Label column"), m_csvLabel);
  csvForm->addRow(m_csvHeader);
  m_pages->addWidget(csv);

  // Image folders have a picker of their own, which lists them off the GUI thread and
  // previews their classes.
  auto* images = new QWidget;
  auto* imagesBox = new QVBoxLayout(images);
  auto* pick = new QPushButton(tr("Choose an Image Folder…"));
  pick->setObjectName("chooseImageFolder");
  imagesBox->addWidget(
      new QLabel(tr("A folder holding one folder per class, each holding that "
                    "class's PNG or JPEG images.")));
  imagesBox->addWidget(pick);
  imagesBox->addStretch();
  m_pages->addWidget(images);
  connect(pick, &QPushButton::clicked, this, [this] {
    ImageDataDialog folder(m_doc, ImageDataDialog::Kind::Folder, this);
    if (folder.exec() == QDialog::Accepted) accept();
  });

  m_pages->addWidget(textPage());

  m_summary->setObjectName("datasetSummary");
  m_summary->setWordWrap(true);
  m_classes->setObjectName("datasetClasses");
  m_classes->setColumnCount(2);
  m_classes->setHorizontalHeaderLabels({tr("Class"), tr("Training samples")});
  m_classes->horizontalHeader()->setSectionResizeMode(0, QHeaderView::Stretch);
  m_classes->setEditTriggers(QAbstractItemView::NoEditTriggers);
  m_classes->verticalHeader()->hide();
  m_samples->setObjectName("datasetSamples");
  showAsThumbnails(m_samples, 40);

  auto* top = new QHBoxLayout;
  top->addWidget(m_sources);
  top->addWidget(m_pages, 1);
  auto* preview = new QHBoxLayout;
  preview->addWidget(m_classes, 2);
  preview->addWidget(m_samples, 3);
  auto* buttons = new QDialogButtonBox(QDialogButtonBox::Ok | QDialogButtonBox::Cancel);
  buttons->button(QDialogButtonBox::Ok)->setText(tr("Use This Dataset"));
  connect(buttons, &QDialogButtonBox::accepted, this, [this] {
    if (apply()) accept();
  });
  connect(buttons, &QDialogButtonBox::rejected, this, &QDialog::reject);
  auto* lay = new QVBoxLayout(this);
  lay->addLayout(top);
  lay->addWidget(m_summary);
  lay->addLayout(preview, 1);
  lay->addWidget(buttons);
  fitToScreen(this, QSize(900, 640));

  connect(m_sources, &QListWidget::currentRowChanged, this, [this](int row) {
    m_pages->setCurrentIndex(row);
    reload();
  });
  for (QLineEdit* e : {m_idxTrainImages, m_idxTrainLabels, m_idxTestImages, m_idxTestLabels,
                       m_csvTrain, m_csvTest, m_csvLabel, m_textPath})
    connect(e, &QLineEdit::editingFinished, this, &DatasetDialog::reload);
  connect(m_csvHeader, &QCheckBox::toggled, this, &DatasetDialog::reload);
  connect(&m_watcher, &QFutureWatcher<Preview>::finished, this, [this] {
    if (m_watcher.property("generation").toInt() == m_generation) showPreview(m_watcher.result());
  });
  choose(fashion.isEmpty() ? Source::Idx : Source::Fashion);
}

// A preview still loading holds only copies: it ends on its own, and its result is
// dropped with the watcher.
DatasetDialog::~DatasetDialog() = default;

// Text: a UTF-8 file or a folder of them, read a character or a byte a token.
QWidget* DatasetDialog::textPage() {
  m_textPath = namedEdit("textPath");
  m_textPath->setPlaceholderText(tr("a UTF-8 text file, or a folder of them"));
  m_textVocab = new QComboBox;
  m_textVocab->setObjectName("textVocabulary");
  m_textVocab->addItem(tr("Characters (built from the training text)"),
                       int(proto::TextSource::CHAR));
  m_textVocab->addItem(tr("Bytes (256 tokens, any file)"), int(proto::TextSource::BYTE));
  m_textContext = new QSpinBox;
  m_textContext->setObjectName("textContext");
  m_textContext->setRange(2, 1 << 16);
  m_textContext->setValue(128);
  m_textContext->setToolTip(tr("Tokens per window: the model's input length"));
  auto* text = new QWidget;
  auto* textForm = new QFormLayout(text);
  textForm->addRow(tr("Text"), pathRow(m_textPath, false, tr("Text files (*.txt);;All files (*)")));
  auto* folder = new QPushButton(tr("Use a Folder…"));
  textForm->addRow(QString(), folder);
  textForm->addRow(tr("Tokens"), m_textVocab);
  textForm->addRow(tr("Context"), m_textContext);
  connect(folder, &QPushButton::clicked, this, [this] {
    const QString path = QFileDialog::getExistingDirectory(this, tr("Choose"), projectDir());
    if (path.isEmpty()) return;
    m_textPath->setText(path);
    reload();
  });
  connect(m_textVocab, &QComboBox::currentIndexChanged, this, &DatasetDialog::reload);
  connect(m_textContext, &QSpinBox::editingFinished, this, &DatasetDialog::reload);
  return text;
}

QWidget* DatasetDialog::pathRow(QLineEdit* edit, bool folder, const QString& filter) {
  auto* row = new QWidget;
  auto* box = new QHBoxLayout(row);
  box->setContentsMargins(0, 0, 0, 0);
  auto* browse = new QPushButton(tr("Browse…"));
  box->addWidget(edit, 1);
  box->addWidget(browse);
  connect(browse, &QPushButton::clicked, this, [this, edit, folder, filter] {
    const QString from = edit->text().isEmpty() ? projectDir() : edit->text();
    const QString path = folder ? QFileDialog::getExistingDirectory(this, tr("Choose"), from)
                                : QFileDialog::getOpenFileName(this, tr("Choose"), from, filter);
    if (path.isEmpty()) return;
    edit->setText(path);
    reload();
  });
  return row;
}

QString DatasetDialog::projectDir() const {
  return m_doc->filePath().isEmpty() ? QDir::currentPath()
                                     : QFileInfo(m_doc->filePath()).absolutePath();
}

void DatasetDialog::choose(Source s) {
  if (m_sources->currentRow() != int(s)) m_sources->setCurrentRow(int(s));  // reloads
}

DatasetDialog::Source DatasetDialog::source() const {
  return Source(std::max(0, m_sources->currentRow()));
}

proto::DataDef DatasetDialog::dataDef() const {
  proto::DataDef d;
  const QDir dir(projectDir());
  auto stored = [&](const QLineEdit* e) {
    const QString text = e->text().trimmed();
    if (text.isEmpty()) return std::string();
    const QString abs = dir.absoluteFilePath(text);
    const QString rel = dir.relativeFilePath(abs);
    return (rel.startsWith("..") ? abs : rel).toStdString();
  };
  switch (source()) {
    case Source::Fashion: {
      proto::IdxSource* idx = d.mutable_idx();
      const std::string base = std::string(kFashionDir) + "/";
      idx->set_train_images(base + kFashionFiles[0]);
      idx->set_train_labels(base + kFashionFiles[1]);
      idx->set_test_images(base + kFashionFiles[2]);
      idx->set_test_labels(base + kFashionFiles[3]);
      for (const char* name : kFashionClasses) d.add_class_names(name);
      break;
    }
    case Source::Idx: {
      proto::IdxSource* idx = d.mutable_idx();
      idx->set_train_images(stored(m_idxTrainImages));
      idx->set_train_labels(stored(m_idxTrainLabels));
      idx->set_test_images(stored(m_idxTestImages));
      idx->set_test_labels(stored(m_idxTestLabels));
      break;
    }
    case Source::Csv: {
      proto::CsvSource* csv = d.mutable_csv();
      csv->set_train_path(stored(m_csvTrain));
      csv->set_test_path(stored(m_csvTest));
      csv->set_label_column(m_csvLabel->text().trimmed().toStdString());
      csv->set_has_header(m_csvHeader->isChecked());
      break;
    }
    case Source::ImageFolder: break;  // its own picker sets the source
    case Source::Text: {
      proto::TextSource* text = d.mutable_text();
      text->set_path(stored(m_textPath));
      text->set_vocabulary(proto::TextSource::Vocabulary(m_textVocab->currentData().toInt()));
      text->set_context(m_textContext->value());
      d.set_validation_fraction(0.1);
      break;
    }
  }
  return d;
}

void DatasetDialog::reload() {
  ++m_generation;
  m_ready = false;
  m_classes->setRowCount(0);
  m_samples->clear();
  const proto::DataDef def = dataDef();
  // Only a source with its training files named is loaded: a half-filled form is no
  // dataset yet (and an empty IDX path would mean Fashion-MNIST's).
  const bool named = def.has_idx()
                         ? !def.idx().train_images().empty() && !def.idx().train_labels().empty() &&
                               !def.idx().test_images().empty() && !def.idx().test_labels().empty()
                     : def.has_csv()  ? !def.csv().train_path().empty()
                     : def.has_text() ? !def.text().path().empty()
                                      : false;
  if (!named) {
    m_summary->setText(source() == Source::ImageFolder
                           ? tr("Choose the folder; its classes and images are shown there.")
                       : source() == Source::Text ? tr("Name the text file or folder.")
                                                  : tr("Name the training and test files."));
    return;
  }
  m_summary->setText(tr("Loading…"));
  std::vector<std::string> names(def.class_names().begin(), def.class_names().end());
  m_watcher.setProperty("generation", m_generation);
  m_watcher.setFuture(QtConcurrent::run(load, def, projectDir().toStdString(), names));
}

void DatasetDialog::showPreview(const Preview& p) {
  m_preview = p;
  if (!p.status) {
    m_summary->setText(QString::fromStdString(p.status.message()));
    emit previewReady();
    return;
  }
  m_classes->setHorizontalHeaderLabels(
      {p.text ? tr("Token") : tr("Class"),
       p.text ? tr("In the training text") : tr("Training samples")});
  m_classes->setRowCount(int(p.classNames.size()));
  for (size_t c = 0; c < p.classNames.size(); ++c) {
    const QString name = QString::fromStdString(p.classNames[c]);
    m_classes->setItem(int(c), 0, new QTableWidgetItem(name));
    auto* count = new QTableWidgetItem(QString::number(p.perClass[c]));
    count->setTextAlignment(Qt::AlignRight | Qt::AlignVCenter);
    m_classes->setItem(int(c), 1, count);
    for (const QImage& img : p.samples[c]) {
      auto* item = new QListWidgetItem(name, m_samples);
      if (!img.isNull()) item->setIcon(QPixmap::fromImage(img.scaled(40, 40)));
    }
  }
  m_ready = true;
  if (p.text) {
    QString start = QString::fromStdString(p.excerpt).simplified();
    if (start.size() > 160) start = start.left(160) + "…";
    m_summary->setText(tr("%1 tokens, a vocabulary of %2; %3 training and %4 test windows of "
                          "%5 tokens. It begins: “%6”")
                           .arg(p.tokens)
                           .arg(p.vocab.size())
                           .arg(p.trainSize)
                           .arg(p.testSize)
                           .arg(p.sampleShape.empty() ? 0 : p.sampleShape[0])
                           .arg(start));
    emit previewReady();
    return;
  }
  m_summary->setText(tr("%1 training and %2 test samples of shape %3 in %4 classes; "
                        "normalised by the training split's mean %5 and std %6")
                         .arg(p.trainSize)
                         .arg(p.testSize)
                         .arg(QString::fromStdString(shapeToString(p.sampleShape)))
                         .arg(p.classNames.size())
                         .arg(p.mean, 0, 'g', 4)
                         .arg(p.std, 0, 'g', 4));
  m_ready = true;
  emit previewReady();
}

bool DatasetDialog::apply() {
  if (!m_ready) {
    if (m_summary->text().isEmpty()) m_summary->setText(tr("Choose a dataset first"));
    return false;
  }
  proto::DataDef data = m_doc->data();
  const proto::DataDef chosen = dataDef();
  data.clear_source();
  if (chosen.has_idx()) *data.mutable_idx() = chosen.idx();
  if (chosen.has_csv()) *data.mutable_csv() = chosen.csv();
  data.clear_class_names();
  if (chosen.has_text()) {
    // The vocabulary built from the training text is the project's from now on, so
    // every run and the weights it saves spell tokens alike.
    proto::TextSource* text = data.mutable_text();
    *text = chosen.text();
    if (text->vocabulary() != proto::TextSource::BYTE)
      for (const std::string& token : m_preview.vocab) text->add_vocab(token);
    if (data.validation_fraction() <= 0) data.set_validation_fraction(chosen.validation_fraction());
    data.clear_normalization();
    setDatasetOf(*m_doc, data, m_preview.sampleShape, tr("Choose text"));
    return true;
  }
  for (const std::string& name : m_preview.classNames) data.add_class_names(name);
  proto::Normalization* n = data.mutable_normalization();
  n->Clear();
  n->set_kind(proto::Normalization::FIXED);
  if (m_preview.bytes) n->set_scale(1.0 / 255.0);
  n->set_mean(m_preview.mean);
  n->set_std(m_preview.std);
  setDatasetOf(*m_doc, data, m_preview.sampleShape, tr("Choose dataset"));
  return true;
}

void setDatasetOf(editor::GraphDocument& doc, const proto::DataDef& data, const Shape& sample,
                  const QString& text) {
  doc.undoStack()->beginMacro(text);
  doc.setSettings(doc.train(), data, text);
  // The Input the samples feed: the model's first that is not the labels'; one is
  // added above the graph where there is none.
  editor::NodeId input = -1;
  for (editor::NodeId id : doc.nodes()) {
    const proto::NodeDef& def = doc.node(id).def;
    auto field = def.attrs().find("field");
    if (def.op() == "Input" && (field == def.attrs().end() || field->second.s() != "label")) {
      input = id;
      break;
    }
  }
  QPointF at(0, 0);
  for (editor::NodeId id : doc.nodes()) at.setY(std::min(at.y(), doc.node(id).pos.y() - 120));
  const bool tokens = data.has_text();
  if (input < 0)
    input = doc.addNode("Input", at, tokens ? "tokens" : data.has_csv() ? "features" : "image");
  proto::AttrValue shape;
  for (int64_t d : sample) shape.mutable_ints()->add_values(d);
  doc.setAttr(input, "shape", shape);
  proto::AttrValue int32;
  int32.set_s("int32");
  // Text: token ids, and the next token at every position as the labels, whose Input
  // the losses read by default; other data: float32, normalised samples.
  doc.setAttr(input, "dtype", tokens ? std::optional(int32) : std::nullopt);
  if (tokens) {
    editor::NodeId labels = -1;
    for (editor::NodeId id : doc.nodes()) {
      const proto::NodeDef& def = doc.node(id).def;
      auto field = def.attrs().find("field");
      if (def.op() == "Input" && field != def.attrs().end() && field->second.s() == "label")
        labels = id;
    }
    if (labels < 0) {
      labels = doc.addNode("Input", at + QPointF(0, -120), "next");
      proto::AttrValue field;
      field.set_s("label");
      doc.setAttr(labels, "field", field);
    }
    doc.setAttr(labels, "shape", shape);
    doc.setAttr(labels, "dtype", int32);
  }
  doc.undoStack()->endMacro();
}

}  // namespace netloom::gui
