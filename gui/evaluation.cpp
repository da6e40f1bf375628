#include "gui/evaluation.h"

#include <QCheckBox>
#include <QComboBox>
#include <QFileDialog>
#include <QGridLayout>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QImage>
#include <QLabel>
#include <QListWidget>
#include <QPushButton>
#include <QSplitter>
#include <QTableWidget>
#include <QVBoxLayout>
#include <algorithm>
#include <numeric>

namespace netloom::gui {

namespace {

// At most this many samples in the grid at once; the sort and filter pick which.
constexpr int kGridMax = 2000;

}  // namespace

Evaluation evaluate(const Predictions& p) {
  Evaluation e;
  e.classes = p.classes;
  int64_t n = p.samples.size();
  e.confusion.assign(size_t(p.classes) * size_t(p.classes), 0);
  e.perClass.assign(size_t(p.classes), {});
  int64_t correct = 0;
  for (int64_t i = 0; i < n; ++i) {
    const float* row = p.probs.data() + i * p.classes;
    int32_t best = int32_t(std::max_element(row, row + p.classes) - row);
    int32_t truth = p.samples.labels[size_t(i)];
    e.predicted.push_back(best);
    e.confidence.push_back(row[best]);
    if (truth >= 0 && truth < p.classes) {
      ++e.confusion[size_t(truth) * size_t(p.classes) + size_t(best)];
      ++e.perClass[size_t(truth)].support;
    }
    ++e.perClass[size_t(best)].predicted;
    if (best == truth) ++correct, ++e.perClass[size_t(best)].correct;
  }
  for (ClassStats& c : e.perClass) {
    c.precision = c.predicted ? double(c.correct) / double(c.predicted) : 0;
    c.recall = c.support ? double(c.correct) / double(c.support) : 0;
    c.f1 = c.precision + c.recall > 0 ? 2 * c.precision * c.recall / (c.precision + c.recall) : 0;
  }
  e.accuracy = n ? double(correct) / double(n) : 0;
  return e;
}

std::vector<std::pair<int32_t, float>> topClasses(const float* probs, int32_t classes, int k) {
  std::vector<std::pair<int32_t, float>> all;
  for (int32_t c = 0; c < classes; ++c) all.push_back({c, probs[c]});
  std::stable_sort(all.begin(), all.end(),
                   [](const auto& a, const auto& b) { return a.second > b.second; });
  all.resize(std::min<size_t>(all.size(), size_t(k)));
  return all;
}

void showAsThumbnails(QListWidget* list, int icon) {
  list->setViewMode(QListView::IconMode);
  list->setIconSize(QSize(icon, icon));
  list->setResizeMode(QListView::Adjust);
  list->setMovement(QListView::Static);
  list->setWordWrap(true);
  list->setUniformItemSizes(true);
  QFontMetrics fm(list->font());
  list->setGridSize(
      QSize(std::max(icon + 16, fm.averageCharWidth() * 15), icon + 2 * fm.lineSpacing() + 12));
}

QString tokenLabel(const std::string& token) {
  QString t = QString::fromStdString(token);
  t.replace('\n', "\\n").replace('\t', "\\t");
  return "'" + t + "'";
}

QImage sampleImage(const Dataset& d, int64_t index) {
  if ((d.bytes.empty() && d.files.empty()) || d.sampleShape.size() != 3) return {};
  int64_t c = d.sampleShape[0], h = d.sampleShape[1], w = d.sampleShape[2];
  if (c != 1 && c != 3) return {};
  // Images left on disk are decoded as the loader would.
  std::vector<uint8_t> decoded;
  if (d.bytes.empty()) {
    decoded.resize(size_t(d.featuresPerSample()));
    std::string error;
    if (!decodeImage(d.files[size_t(index)], d.image, decoded.data(), error)) return {};
  }
  const uint8_t* s =
      decoded.empty() ? d.bytes.data() + index * d.featuresPerSample() : decoded.data();
  QImage img(int(w), int(h), c == 1 ? QImage::Format_Grayscale8 : QImage::Format_RGB888);
  for (int64_t y = 0; y < h; ++y) {
    uchar* line = img.scanLine(int(y));
    for (int64_t x = 0; x < w; ++x)
      for (int64_t k = 0; k < c; ++k) line[x * c + k] = s[(k * h + y) * w + x];
  }
  return img;
}

EvaluationWidget::EvaluationWidget(QWidget* parent)
    : QWidget(parent),
      m_confusion(new QTableWidget),
      m_perClass(new QTableWidget),
      m_samples(new QListWidget),
      m_detail(new QLabel),
      m_sort(new QComboBox),
      m_mistakes(new QCheckBox(tr("Mistakes only"))) {
  for (QTableWidget* t : {m_confusion, m_perClass}) {
    t->setEditTriggers(QAbstractItemView::NoEditTriggers);
    t->horizontalHeader()->setSectionResizeMode(QHeaderView::ResizeToContents);
  }
  m_confusion->setToolTip(tr("Rows: true class; columns: predicted class"));
  m_sort->addItems({tr("Test-set order"), tr("Least confident first"), tr("Most confident first")});
  showAsThumbnails(m_samples, 56);
  m_detail->setWordWrap(true);
  m_detail->setTextFormat(Qt::RichText);
  auto* open = new QPushButton(tr("Predict an Image…"));

  auto* controls = new QHBoxLayout;
  controls->addWidget(new QLabel(tr("Sort:")));
  controls->addWidget(m_sort);
  controls->addWidget(m_mistakes);
  controls->addStretch();
  controls->addWidget(open);
  auto* right = new QWidget;
  auto* rl = new QVBoxLayout(right);
  rl->setContentsMargins(0, 0, 0, 0);
  rl->addLayout(controls);
  rl->addWidget(m_samples, 1);
  rl->addWidget(m_detail);
  // The confusion matrix with its axes named: true classes down, predictions across.
  auto* matrix = new QWidget;
  auto* grid = new QGridLayout(matrix);
  grid->setContentsMargins(0, 0, 0, 0);
  auto* predicted = new QLabel(tr("Predicted class →"));
  predicted->setObjectName("confusionPredictedAxis");
  predicted->setAlignment(Qt::AlignCenter);
  auto* truth = new QLabel(tr("True\nclass\n↓"));
  truth->setObjectName("confusionTrueAxis");
  truth->setAlignment(Qt::AlignCenter);
  grid->addWidget(predicted, 0, 1);
  grid->addWidget(truth, 1, 0);
  grid->addWidget(m_confusion, 1, 1);
  auto* left = new QSplitter(Qt::Vertical);
  left->addWidget(matrix);
  left->addWidget(m_perClass);
  auto* split = new QSplitter(Qt::Horizontal);
  split->addWidget(left);
  split->addWidget(right);
  auto* lay = new QVBoxLayout(this);
  lay->setContentsMargins(2, 2, 2, 2);
  lay->addWidget(split);

  connect(m_sort, &QComboBox::currentIndexChanged, this, [this] { fillSamples(); });
  connect(m_mistakes, &QCheckBox::toggled, this, [this] { fillSamples(); });
  connect(m_samples, &QListWidget::currentItemChanged, this, [this](QListWidgetItem* it) {
    if (it) showSample(it->data(Qt::UserRole).toLongLong());
  });
  connect(open, &QPushButton::clicked, this, [this] {
    QString path = QFileDialog::getOpenFileName(this, tr("Predict an image"), {},
                                                tr("Images (*.png *.jpg *.jpeg *.bmp *.pgm)"));
    if (path.isEmpty()) return;
    if (Status s = predictImage(path); !s) m_detail->setText(QString::fromStdString(s.message()));
  });
}

QString EvaluationWidget::className(int32_t c) const {
  const auto& names = m_project.data().class_names();
  return c >= 0 && c < names.size() ? QString::fromStdString(names.Get(c)) : QString::number(c);
}

Status EvaluationWidget::evaluateRun(const proto::Project& project, const TrainOptions& opts,
                                     const QString& weightsPath) {
  auto p = predict(project, opts, weightsPath.toStdString());
  if (!p) return p.error();
  m_project = project;
  m_opts = opts;
  m_weights = weightsPath;
  m_pred = std::move(*p);
  m_eval = evaluate(m_pred);
  fill();
  return {};
}

void EvaluationWidget::fill() {
  int32_t k = m_eval.classes;
  QStringList names;
  for (int32_t c = 0; c < k; ++c) names << className(c);
  m_confusion->clear();
  m_confusion->setRowCount(k);
  m_confusion->setColumnCount(k);
  m_confusion->setHorizontalHeaderLabels(names);
  m_confusion->setVerticalHeaderLabels(names);
  int64_t most = 1;
  for (int64_t v : m_eval.confusion) most = std::max(most, v);
  for (int32_t t = 0; t < k; ++t)
    for (int32_t p = 0; p < k; ++p) {
      int64_t v = m_eval.confusion[size_t(t) * size_t(k) + size_t(p)];
      auto* it = new QTableWidgetItem(QString::number(v));
      // Heat: the share of the largest cell, blue on the diagonal, red off it.
      double share = double(v) / double(most);
      int a = int(40 + 215 * share);
      it->setBackground(t == p ? QColor(0x2c, 0x6f, 0xbb, v ? a : 0)
                               : QColor(0xd0, 0x3b, 0x3b, v ? a : 0));
      it->setTextAlignment(Qt::AlignCenter);
      m_confusion->setItem(t, p, it);
    }
  m_perClass->clear();
  m_perClass->setRowCount(k + 1);
  m_perClass->setColumnCount(4);
  m_perClass->setHorizontalHeaderLabels({tr("Precision"), tr("Recall"), tr("F1"), tr("Support")});
  QStringList rows = names;
  rows << tr("accuracy");
  m_perClass->setVerticalHeaderLabels(rows);
  for (int32_t c = 0; c < k; ++c) {
    const ClassStats& s = m_eval.perClass[size_t(c)];
    m_perClass->setItem(c, 0, new QTableWidgetItem(QString::number(s.precision, 'f', 3)));
    m_perClass->setItem(c, 1, new QTableWidgetItem(QString::number(s.recall, 'f', 3)));
    m_perClass->setItem(c, 2, new QTableWidgetItem(QString::number(s.f1, 'f', 3)));
    m_perClass->setItem(c, 3, new QTableWidgetItem(QString::number(s.support)));
  }
  m_perClass->setItem(k, 2, new QTableWidgetItem(QString::number(m_eval.accuracy, 'f', 4)));
  m_perClass->setItem(k, 3, new QTableWidgetItem(QString::number(m_pred.samples.size())));
  fillSamples();
}

std::vector<int64_t> EvaluationWidget::shownSamples() const {
  std::vector<int64_t> order;
  for (int64_t i = 0; i < m_pred.samples.size(); ++i)
    if (!m_mistakes->isChecked() || m_eval.predicted[size_t(i)] != m_pred.samples.labels[size_t(i)])
      order.push_back(i);
  const auto& conf = m_eval.confidence;
  if (m_sort->currentIndex() == 1)
    std::stable_sort(order.begin(), order.end(),
                     [&](int64_t a, int64_t b) { return conf[size_t(a)] < conf[size_t(b)]; });
  if (m_sort->currentIndex() == 2)
    std::stable_sort(order.begin(), order.end(),
                     [&](int64_t a, int64_t b) { return conf[size_t(a)] > conf[size_t(b)]; });
  if (order.size() > size_t(kGridMax)) order.resize(kGridMax);
  return order;
}

void EvaluationWidget::fillSamples() {
  m_samples->clear();
  for (int64_t i : shownSamples()) {
    int32_t truth = m_pred.samples.labels[size_t(i)], pred = m_eval.predicted[size_t(i)];
    // Two short lines under the picture; the sample's number is in the tooltip.
    QString text = className(pred);
    if (pred != truth) text += "\n≠ " + className(truth);
    auto* it = new QListWidgetItem(text, m_samples);
    QImage img = sampleImage(m_pred.samples, i);
    if (!img.isNull()) it->setIcon(QPixmap::fromImage(img.scaled(56, 56)));
    it->setData(Qt::UserRole, qlonglong(i));
    it->setForeground(pred == truth ? QColor(0x2a, 0x9d, 0x5c) : QColor(0xd0, 0x3b, 0x3b));
    it->setToolTip(tr("#%1: true %2, predicted %3 (%4%)")
                       .arg(i)
                       .arg(className(truth), className(pred))
                       .arg(100.0 * m_eval.confidence[size_t(i)], 0, 'f', 1));
  }
}

void EvaluationWidget::showSample(int64_t index) {
  if (index < 0 || index >= m_pred.samples.size()) return;
  const float* row = m_pred.probs.data() + index * m_pred.classes;
  QString html = tr("<b>Test sample #%1</b>, true class <b>%2</b><br>")
                     .arg(index)
                     .arg(className(m_pred.samples.labels[size_t(index)]));
  for (auto [c, p] : topClasses(row, m_pred.classes, 5))
    html += QString("%1: %2%<br>").arg(className(c)).arg(100.0 * p, 0, 'f', 1);
  m_detail->setText(html);
}

Status EvaluationWidget::predictImage(const QString& path) {
  if (m_weights.isEmpty()) return makeError("evaluate a run first: its weights predict the image");
  const Shape& shape = m_pred.samples.sampleShape;
  if (shape.size() != 3 || (shape[0] != 1 && shape[0] != 3))
    return makeError("this model's samples are not images");
  QImage img(path);
  if (img.isNull()) return makeError(path.toStdString() + ": not an image Qt can read");
  int64_t c = shape[0], h = shape[1], w = shape[2];
  img = img.convertToFormat(c == 1 ? QImage::Format_Grayscale8 : QImage::Format_RGB888)
            .scaled(int(w), int(h), Qt::IgnoreAspectRatio, Qt::SmoothTransformation);
  Dataset one;
  one.sampleShape = shape;
  one.classes = m_pred.classes;
  one.labels = {0};
  one.bytes.resize(size_t(c * h * w));
  for (int64_t y = 0; y < h; ++y)
    for (int64_t x = 0; x < w; ++x)
      for (int64_t k = 0; k < c; ++k)
        one.bytes[size_t((k * h + y) * w + x)] = img.constScanLine(int(y))[x * c + k];
  auto p = predict(m_project, m_opts, m_weights.toStdString(), &one);
  if (!p) return p.error();
  QString html = tr("<b>%1</b><br>").arg(QFileInfo(path).fileName().toHtmlEscaped());
  for (auto [cls, prob] : topClasses(p->probs.data(), p->classes, 5))
    html += QString("%1: %2%<br>").arg(className(cls)).arg(100.0 * prob, 0, 'f', 1);
  m_detail->setText(html);
  return {};
}

}  // namespace netloom::gui
