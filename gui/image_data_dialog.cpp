#include "gui/image_data_dialog.h"

#include <QCheckBox>
#include <QComboBox>
#include <QDialogButtonBox>
#include <QDir>
#include <QDoubleSpinBox>
#include <QFile>
#include <QFileDialog>
#include <QFormLayout>
#include <QFutureWatcher>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QLineEdit>
#include <QListWidget>
#include <QPushButton>
#include <QSpinBox>
#include <QTableWidget>
#include <QTimer>
#include <QtConcurrent/QtConcurrentRun>

#include "editor/document.h"
#include "gui/dataset_dialog.h"
#include "gui/evaluation.h"
#include "gui/screen_fit.h"

namespace netloom::gui {
namespace {

// A list's first line is a header unless it names an image ("path,label" does not).
bool listHasHeader(const std::string& csvPath) {
  QFile f(QString::fromStdString(csvPath));
  if (!f.open(QIODevice::ReadOnly)) return false;
  const QString first = QString::fromUtf8(f.readLine()).trimmed();
  const qsizetype comma = first.lastIndexOf(',');
  return !isImageFile(first.left(comma < 0 ? first.size() : comma).remove('"').toStdString());
}

constexpr int kDebounceMs = 250;

// Lists the folder or list and decodes a few samples of each class: all of it on a
// worker thread, so a folder of 100,000 files never stalls the window. `control`
// stops it within one entry or one sample.
ImageDataDialog::Listing listAndSample(ImageDataDialog::Kind kind, const std::string& path,
                                       ImageSpec spec, ListControl& control) {
  ImageDataDialog::Listing out;
  out.index = kind == ImageDataDialog::Kind::Folder
                  ? listImageFolder(path, nullptr, &control)
                  : readImageList(path, listHasHeader(path), nullptr, &control);
  if (!out.index) return out;
  const ImageIndex& index = *out.index;
  out.samples.resize(index.classNames.size());
  if (!spec.valid()) spec = {3, 64, 64};
  std::vector<uint8_t> pixels(size_t(spec.bytesPerImage()));
  for (size_t i = 0; i < index.paths.size(); ++i) {
    auto& row = out.samples[size_t(index.labels[i])];
    if (row.size() >= ImageDataDialog::kSamplesPerClass) continue;
    if (control.cancelled) {
      out.index = makeError("'" + path + "': listing cancelled");
      return out;
    }
    std::string error;
    Dataset one;
    one.sampleShape = {spec.channels, spec.height, spec.width};
    one.bytes.resize(pixels.size());
    if (!decodeImage(index.paths[i], spec, one.bytes.data(), error)) {
      row.push_back(QImage());  // shown as a blank tile named by its file
      continue;
    }
    one.labels = {0};
    row.push_back(sampleImage(one, 0));
  }
  return out;
}

}  // namespace

ImageDataDialog::ImageDataDialog(editor::GraphDocument* doc, Kind kind, QWidget* parent)
    : QDialog(parent),
      m_doc(doc),
      m_kind(kind),
      m_train(new QLineEdit),
      m_test(new QLineEdit),
      m_testFraction(new QDoubleSpinBox),
      m_channels(new QComboBox),
      m_height(new QSpinBox),
      m_width(new QSpinBox),
      m_fit(new QComboBox),
      m_cache(new QCheckBox(tr("Decode every image once and keep them in memory"))),
      m_skip(new QCheckBox(tr("Skip unreadable images (else the run stops, naming the file)"))),
      m_summary(new QLabel),
      m_classes(new QTableWidget),
      m_samples(new QListWidget),
      m_debounce(new QTimer(this)) {
  const bool folder = kind == Kind::Folder;
  setWindowTitle(folder ? tr("Use Image Folder") : tr("Use Image List"));
  setObjectName("imageDataDialog");
  m_train->setObjectName("imageTrain");
  m_test->setObjectName("imageTest");
  m_train->setPlaceholderText(folder ? tr("a folder holding one folder per class")
                                     : tr("a CSV file of path,label lines"));
  m_test->setPlaceholderText(tr("none: split off the training images"));
  m_testFraction->setRange(0.01, 0.99);
  m_testFraction->setSingleStep(0.05);
  m_testFraction->setValue(0.2);
  m_channels->addItem(tr("Grayscale"), 1);
  m_channels->addItem(tr("RGB"), 3);
  for (QSpinBox* s : {m_height, m_width}) s->setRange(1, 4096);
  m_fit->addItem(tr("Resize"), int(proto::ImageSource::RESIZE));
  m_fit->addItem(tr("Centre crop"), int(proto::ImageSource::CENTER_CROP));
  m_summary->setObjectName("imageSummary");
  m_summary->setWordWrap(true);
  m_summary->setTextInteractionFlags(Qt::TextSelectableByMouse);
  m_classes->setObjectName("imageClasses");
  m_classes->setColumnCount(2);
  m_classes->setHorizontalHeaderLabels({tr("Class"), tr("Images")});
  m_classes->horizontalHeader()->setSectionResizeMode(0, QHeaderView::Stretch);
  m_classes->setEditTriggers(QAbstractItemView::NoEditTriggers);
  m_classes->verticalHeader()->hide();
  m_samples->setObjectName("imageSamples");
  showAsThumbnails(m_samples, 48);

  // The shape the images become: the model's input where it has one.
  proto::DataDef shaped;
  shaped.mutable_image_folder();
  resolveImageShape(shaped, m_doc->toProject().model());
  const proto::ImageSource& s = shaped.image_folder();
  m_channels->setCurrentIndex(s.channels() == 3 ? 1 : 0);
  m_height->setValue(s.height() > 0 ? s.height() : 28);
  m_width->setValue(s.width() > 0 ? s.width() : 28);

  auto browse = [this, folder](QLineEdit* edit) {
    const QString from = edit->text().isEmpty() ? projectDir() : edit->text();
    const QString path =
        folder ? QFileDialog::getExistingDirectory(this, tr("Image folder"), from)
               : QFileDialog::getOpenFileName(this, tr("Image list"), from, tr("CSV (*.csv)"));
    if (!path.isEmpty()) edit->setText(path);
  };
  auto row = [&](QLineEdit* edit) {
    auto* box = new QHBoxLayout;
    auto* button = new QPushButton(tr("Browse…"));
    box->addWidget(edit, 1);
    box->addWidget(button);
    connect(button, &QPushButton::clicked, this, [browse, edit] { browse(edit); });
    return box;
  };
  auto* form = new QFormLayout;
  form->addRow(folder ? tr("Training folder") : tr("Training list"), row(m_train));
  form->addRow(folder ? tr("Test folder") : tr("Test list"), row(m_test));
  form->addRow(tr("Test share when split"), m_testFraction);
  auto* shape = new QHBoxLayout;
  shape->addWidget(m_channels);
  shape->addWidget(m_height);
  shape->addWidget(new QLabel("×"));
  shape->addWidget(m_width);
  shape->addWidget(m_fit);
  form->addRow(tr("Images become"), shape);
  form->addRow(m_cache);
  form->addRow(m_skip);

  auto* buttons = new QDialogButtonBox(QDialogButtonBox::Ok | QDialogButtonBox::Cancel);
  connect(buttons, &QDialogButtonBox::accepted, this, [this] {
    if (apply()) accept();
  });
  connect(buttons, &QDialogButtonBox::rejected, this, &QDialog::reject);
  auto* lay = new QVBoxLayout(this);
  lay->addLayout(form);
  lay->addWidget(m_summary);
  auto* preview = new QHBoxLayout;
  preview->addWidget(m_classes, 1);
  preview->addWidget(m_samples, 3);
  lay->addLayout(preview, 1);
  lay->addWidget(buttons);
  fitToScreen(this, QSize(820, 560));

  m_debounce->setSingleShot(true);
  m_debounce->setInterval(kDebounceMs);
  connect(m_debounce, &QTimer::timeout, this, &ImageDataDialog::startListing);
  connect(m_train, &QLineEdit::textChanged, this, &ImageDataDialog::pathEdited);
}

// A worker still running holds its own share of the control and posts to a watcher
// that dies with the dialog, so nothing here waits for it.
ImageDataDialog::~ImageDataDialog() {
  cancelListing();
}

void ImageDataDialog::done(int result) {
  m_debounce->stop();
  cancelListing();
  QDialog::done(result);
}

void ImageDataDialog::setDebounceMs(int ms) {
  m_debounce->setInterval(ms);
  if (m_debounce->isActive()) m_debounce->start();
}

void ImageDataDialog::setListHook(std::function<void(size_t)> hook) {
  m_listHook = std::move(hook);
}

QString ImageDataDialog::projectDir() const {
  return m_doc->filePath().isEmpty() ? QDir::currentPath()
                                     : QFileInfo(m_doc->filePath()).absolutePath();
}

void ImageDataDialog::setTrainPath(const QString& path) {
  m_train->setText(path);
}

void ImageDataDialog::pathEdited() {
  cancelListing();
  m_listed = false;
  const QString text = m_train->text().trimmed();
  if (text.isEmpty()) {
    m_debounce->stop();
    m_summary->clear();
    return;
  }
  m_summary->setText(tr("Listing %1…").arg(text));
  m_debounce->start();
}

void ImageDataDialog::cancelListing() {
  if (m_running) m_running->cancelled = true;
  m_running.reset();
}

void ImageDataDialog::startListing() {
  const QString text = m_train->text().trimmed();
  if (text.isEmpty()) return;
  cancelListing();
  auto control = std::make_shared<ListControl>();
  control->onEntry = m_listHook;
  m_running = control;
  ++m_listingsStarted;
  const std::string path = QDir(projectDir()).absoluteFilePath(text).toStdString();
  ImageSpec spec{m_channels->currentData().toInt(), m_height->value(), m_width->value(),
                 proto::ImageSource::Fit(m_fit->currentData().toInt())};
  auto* watcher = new QFutureWatcher<Listing>(this);
  connect(watcher, &QFutureWatcher<Listing>::finished, this, [this, watcher, control] {
    watcher->deleteLater();
    if (control != m_running) return;  // cancelled or superseded: its result is stale
    m_running.reset();
    showListing(watcher->result());
  });
  m_latest = QtConcurrent::run(
      [kind = m_kind, path, spec, control] { return listAndSample(kind, path, spec, *control); });
  watcher->setFuture(m_latest);
}

void ImageDataDialog::showListing(const Listing& l) {
  m_classes->setRowCount(0);
  m_samples->clear();
  if (!l.index) {
    m_summary->setText(QString::fromStdString(l.index.error().message));
    m_classNames.clear();
    emit previewReady();
    return;
  }
  const ImageIndex& index = *l.index;
  m_classNames = index.classNames;
  m_classes->setRowCount(int(index.classNames.size()));
  for (size_t c = 0; c < index.classNames.size(); ++c) {
    m_classes->setItem(int(c), 0,
                       new QTableWidgetItem(QString::fromStdString(index.classNames[c])));
    auto* count = new QTableWidgetItem(QString::number(index.perClass[c]));
    count->setTextAlignment(Qt::AlignRight | Qt::AlignVCenter);
    m_classes->setItem(int(c), 1, count);
    for (const QImage& img : l.samples[c]) {
      auto* item = new QListWidgetItem(QString::fromStdString(index.classNames[c]), m_samples);
      if (!img.isNull()) item->setIcon(QPixmap::fromImage(img.scaled(48, 48)));
    }
  }
  QStringList lines{
      tr("%1 images in %2 classes").arg(index.paths.size()).arg(index.classNames.size())};
  for (const std::string& w : index.warnings)
    lines << tr("warning: %1").arg(QString::fromStdString(w));
  m_summary->setText(lines.join("\n"));
  m_listed = true;
  emit previewReady();
}

proto::ImageSource ImageDataDialog::source() const {
  proto::ImageSource s;
  const QDir dir(projectDir());
  auto stored = [&](const QString& text) {
    if (text.trimmed().isEmpty()) return std::string();
    const QString abs = dir.absoluteFilePath(text.trimmed());
    const QString rel = dir.relativeFilePath(abs);
    return (rel.startsWith("..") ? abs : rel).toStdString();
  };
  s.set_train(stored(m_train->text()));
  s.set_test(stored(m_test->text()));
  if (s.test().empty()) s.set_test_fraction(m_testFraction->value());
  s.set_channels(m_channels->currentData().toInt());
  s.set_height(m_height->value());
  s.set_width(m_width->value());
  s.set_fit(proto::ImageSource::Fit(m_fit->currentData().toInt()));
  s.set_cache(m_cache->isChecked());
  s.set_skip_unreadable(m_skip->isChecked());
  if (m_kind == Kind::List)
    s.set_has_header(listHasHeader(dir.absoluteFilePath(m_train->text().trimmed()).toStdString()));
  return s;
}

bool ImageDataDialog::apply() {
  if (!m_listed) {
    if (m_summary->text().isEmpty()) m_summary->setText(tr("Choose the training images first"));
    return false;
  }
  proto::DataDef data = m_doc->data();
  proto::ImageSource s = source();
  if (m_kind == Kind::Folder)
    *data.mutable_image_folder() = s;
  else
    *data.mutable_image_list() = s;
  data.clear_class_names();
  for (const std::string& name : m_classNames) data.add_class_names(name);
  // Pixels are normalised per channel by these images' own training split: whatever
  // another dataset's statistics were, they do not carry over.
  data.mutable_normalization()->Clear();
  data.mutable_normalization()->set_kind(proto::Normalization::STANDARDIZE);
  data.mutable_normalization()->set_scale(1.0 / 255.0);
  // The model's Input takes the images' shape, in the same step.
  setDatasetOf(*m_doc, data, {s.channels(), s.height(), s.width()},
               m_kind == Kind::Folder ? tr("Use Image Folder") : tr("Use Image List"));
  return true;
}

}  // namespace netloom::gui
