// The evaluation view of a run: its final weights run over the test set, then a
// confusion-matrix heat map, per-class precision, recall and F1, and a grid of test
// samples with their predicted and true labels that sorts by confidence or shows
// the mistakes only; a sample's top-5 classes on click. Inference: an image file or
// a test sample through the same weights.
#pragma once

#include <QWidget>
#include <vector>

#include "engine/train/trainer.h"

class QCheckBox;
class QComboBox;
class QLabel;
class QListWidget;
class QTableWidget;

namespace netloom::gui {

struct ClassStats {
  int64_t support = 0, predicted = 0, correct = 0;
  double precision = 0, recall = 0, f1 = 0;
};

struct Evaluation {
  int32_t classes = 0;
  std::vector<int64_t> confusion;  // [true * classes + predicted]
  std::vector<int32_t> predicted;  // per sample
  std::vector<float> confidence;   // the predicted class's probability
  std::vector<ClassStats> perClass;
  double accuracy = 0;
};
Evaluation evaluate(const Predictions& p);

// The k most probable classes of one sample, most probable first.
std::vector<std::pair<int32_t, float>> topClasses(const float* probs, int32_t classes, int k);

// A token as a label: quoted, with the characters that do not print spelled out.
QString tokenLabel(const std::string& token);

// A sample of an image dataset (channels × height × width, bytes) as an image;
// null for other data.
QImage sampleImage(const Dataset& d, int64_t index);
// Sets `list` up as a grid of `icon`-pixel thumbnails, each in a cell wide enough for
// a class name and tall enough for two lines of caption: no caption is cut off or
// drawn over a neighbour.
void showAsThumbnails(QListWidget* list, int icon);

class EvaluationWidget : public QWidget {
  Q_OBJECT

 public:
  explicit EvaluationWidget(QWidget* parent = nullptr);

  // Runs `weightsPath` over the project's test set and shows the result.
  Status evaluateRun(const proto::Project& project, const TrainOptions& opts,
                     const QString& weightsPath);
  // Predicts one image file with the evaluated run's weights: grey or colour,
  // resized to the samples' size. The top-5 go to detail().
  Status predictImage(const QString& path);

  const Evaluation& evaluation() const { return m_eval; }
  const Predictions& predictions() const { return m_pred; }
  QTableWidget* confusion() const { return m_confusion; }
  QTableWidget* perClass() const { return m_perClass; }
  QListWidget* samples() const { return m_samples; }
  QLabel* detail() const { return m_detail; }
  QComboBox* sortBy() const { return m_sort; }
  QCheckBox* mistakesOnly() const { return m_mistakes; }
  // The test-sample indices the grid shows, in order.
  std::vector<int64_t> shownSamples() const;
  void showSample(int64_t index);  // its top-5 in detail()

 private:
  void fill();
  void fillSamples();
  QString className(int32_t c) const;

  proto::Project m_project;
  TrainOptions m_opts;
  QString m_weights;
  Predictions m_pred;
  Evaluation m_eval;
  QTableWidget *m_confusion, *m_perClass;
  QListWidget* m_samples;
  QLabel* m_detail;
  QComboBox* m_sort;
  QCheckBox* m_mistakes;
};

}  // namespace netloom::gui
